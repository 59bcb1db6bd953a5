"""The engine tests' shared builders (tests/run, tests/report, tests/sandbox, tests/config, tests/mutation,
tests/examples and the CLI's verify tests): the toy project (tests/toy_project, whose gates are data for the
engine, never collected by this run) and the hostile project.

`toy_run` runs `dflash verify` once per session on a private copy of the toy project (every
verdict, every report format); tests that need another run copy the toy again with `toy_copy`.
`hostile_project` writes the small project hostile mutants run against, with the records each test needs.
`fresh_registry` empties the mutation registry around a test: each engine folder's conftest makes it autouse.
Helpers are handed out as fixtures, which tests/conftest.py registers for the whole suite (one session-wide
`toy_run`); test modules import nothing from here.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from verify.cli.verify import verify_app
from verify.mutation import Mutation, reset_registry
from verify.report.json_report import read_json
from verify.report.verdict import RunReport
from verify.run.phases.cache import CACHE_DIR

TOY = Path(__file__).parent / "toy_project"


@pytest.fixture
def fresh_registry():
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


@dataclass(frozen=True)
class HostileProject:
    """A project of the tests' own at `root`: the package `hostile`, its gates under tests/gates, its mutations in
    hostile_mutations.py. Beside it, `shared`: the one folder outside its copy a confined child may write (declared
    `writable`), where hostile mutants and gates leave what they did for the test to read."""

    root: Path

    @property
    def shared(self) -> Path:
        return self.root.parent / "shared"

    def write(
        self,
        *,
        core: str,
        gates: Mapping[str, str],
        mutations: Iterable[Mutation],
        settings: Mapping[str, object],
        modules: Mapping[str, str] | None = None,
    ) -> HostileProject:
        """hostile/core.py is `core`; `gates` and `modules` are further files under tests/gates and hostile (name ->
        text); `settings` are `[tool.dflash]` keys beside the ones every hostile project has."""
        self.shared.mkdir(exist_ok=True)  # two projects in one test share it
        package, gate_dir = self.root / "hostile", self.root / "tests" / "gates"
        package.mkdir(parents=True)
        gate_dir.mkdir(parents=True)
        for folder, files in ((package, {"__init__.py": "", "core.py": core, **(modules or {})}), (gate_dir, gates)):
            for name, text in files.items():
                (folder / name).write_text(text)
        # A Mutation's repr is the call that makes it: the catalog registers exactly the records given.
        records = "".join(f"    {mutation!r},\n" for mutation in mutations)
        (self.root / "hostile_mutations.py").write_text(
            f"from verify.mutation import Mutation, register\n\nregister(\n{records})\n"
        )
        keys = {**settings, "writable": [str(self.shared)]}
        # JSON's numbers, strings and lists of strings are TOML's too.
        table = "".join(f"{key} = {json.dumps(value)}\n" for key, value in keys.items())
        (self.root / "pyproject.toml").write_text(
            '[tool.pytest.ini_options]\nmarkers = ["gate: a gate"]\n\n[tool.dflash]\n'
            'mutation_modules = ["hostile_mutations"]\ngates = ["tests/gates"]\nsource_roots = ["hostile"]\n' + table
        )
        return self


@pytest.fixture
def hostile_project():
    """A factory: `hostile_project(root).write(...)` (HostileProject); the root's parent holds its `shared` folder."""
    return HostileProject


def verify_statuses(root: Path, report: Path) -> tuple[int, dict[str, str]]:
    """`dflash verify --no-cache` on `root` in a process of its own, as a user runs it: its exit code and each
    mutation's status from the JSON report it wrote at `report`."""
    done = subprocess.run(
        [sys.executable, "-m", "verify", "verify", "--project", str(root), "--json", str(report), "--no-cache"],
        capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"}, timeout=600, check=False,
    )  # fmt: skip
    assert report.is_file(), done.stdout + done.stderr
    return done.returncode, {m["name"]: m["status"] for m in json.loads(report.read_text())["mutations"]}
