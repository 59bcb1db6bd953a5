"""Sweep tests: the toy project is data for the sweep (its gates run inside mutmut), never collected here."""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verify.cli.sweep import sweep_app
from verify.mutation import reset_registry

collect_ignore = ["toy_project"]

TOY = Path(__file__).parent / "toy_project"


def tree_digest(root: Path) -> dict[str, str]:
    """Every file under root (caches included) by content hash, to prove a sweep writes nothing there."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@dataclass(frozen=True)
class Swept:
    root: Path
    work: Path  # the kept private copy, with mutmut's mutants/
    state: Path
    reports: Path
    exit_code: int
    output: str
    before: dict[str, str]
    after: dict[str, str]


@pytest.fixture
def digest():
    return tree_digest


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    """A private copy of the toy project that a test may write into."""
    root = tmp_path / "toy"
    shutil.copytree(TOY, root)
    return root


@pytest.fixture(autouse=True)
def _fresh_registry():
    reset_registry()
    yield
    reset_registry()


@pytest.fixture(scope="session")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Swept:
    """One real mutmut sweep of the toy project through the CLI, shared by the tests that read it."""
    base = tmp_path_factory.mktemp("sweep")
    root = base / "toy"
    shutil.copytree(TOY, root)
    before = tree_digest(root)
    args = ["--root", str(root), "--jobs", "2", "--workdir", str(base / "work"), "--state", str(base / "state.json")]
    reports = base / "reports"
    args += ["--json", str(reports / "sweep.json"), "--junit", str(reports / "sweep.xml")]
    args += ["--html", str(reports / "sweep.html"), "--stryker", str(reports / "stryker.json")]
    result = CliRunner().invoke(sweep_app, args)
    return Swept(
        root, base / "work", base / "state.json", reports, result.exit_code, result.output, before, tree_digest(root)
    )
