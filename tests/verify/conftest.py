"""Engine tests: the toy project's gates are data for the engine, never collected by this run.

`toy_run` runs `dflash verify` once per session on a private copy of the toy project (every
verdict, every report format); tests that need another run copy the toy again with `toy_copy`.
Helpers are handed out as fixtures: tests/ is not a package, so test modules import nothing from here.
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from verify.cli.verify import verify_app
from verify.mutation import reset_registry
from verify.report.files import read_json
from verify.report.verdict import RunReport
from verify.run.phases.cache import CACHE_DIR

collect_ignore = ["toy_project"]

TOY = Path(__file__).parent / "toy_project"


@pytest.fixture(autouse=True)
def _fresh_registry():
    reset_registry()
    yield
    reset_registry()


def copy_toy(dest: Path) -> Path:
    shutil.copytree(TOY, dest, ignore=shutil.ignore_patterns("__pycache__", CACHE_DIR))
    return dest


def tree_hashes(root: Path) -> dict[str, str]:
    """sha256 of every file under root except the engine's own cache: the user's tree, byte for byte."""
    return {
        path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and CACHE_DIR not in path.relative_to(root).parts
    }


def invoke(*args: str) -> Result:
    return CliRunner().invoke(verify_app, list(args))


@dataclass(frozen=True)
class ToyRun:
    root: Path
    before: dict[str, str]
    result: Result
    report: RunReport
    reports: Path  # directory with report.json, report.xml, report.html, stryker.json, last-report.json

    def shown_project(self, dest: Path) -> Path:
        """A private copy of the run's project whose last report is this run's (other tests re-run verify in
        `root`, each replacing the last report `show` reads: a test of `show` must not depend on their order)."""
        shutil.copytree(self.root, dest)
        shutil.copyfile(self.reports / "last-report.json", dest / CACHE_DIR / "last-report.json")
        return dest


@pytest.fixture(scope="session")
def toy_run(tmp_path_factory: pytest.TempPathFactory) -> ToyRun:
    root = copy_toy(tmp_path_factory.mktemp("session") / "toy")
    reports = tmp_path_factory.mktemp("reports")
    before = tree_hashes(root)
    reset_registry()
    result = invoke(
        "--project", str(root),
        "--json", str(reports / "report.json"),
        "--junit", str(reports / "report.xml"),
        "--html", str(reports / "report.html"),
        "--stryker", str(reports / "stryker.json"),
    )  # fmt: skip
    reset_registry()
    shutil.copyfile(root / CACHE_DIR / "last-report.json", reports / "last-report.json")
    report, _ = read_json(reports / "report.json")
    return ToyRun(root, before, result, report, reports)


@pytest.fixture
def toy_copy(tmp_path: Path):
    """A factory: a fresh copy of the toy project under tmp_path (name it when you need two)."""
    return lambda name="toy": copy_toy(tmp_path / name)


@pytest.fixture
def hash_tree():
    return tree_hashes


@pytest.fixture
def cli():
    """Invoke `dflash verify` (the verify sub-app) with string arguments, like the shell would."""
    return invoke
