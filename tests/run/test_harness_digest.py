"""The harness digest that keys the result cache covers exactly the modules that decide verdicts, found from the
run's imports: every byte of each changes it, a renderer does not, and a module the verdict code starts to
import is covered with no list to edit. Each change is made in a copy of the `verify` package."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import verify
from verify.run import harness_digest as digest_module
from verify.run.harness_digest import harness_digest, harness_digest_bytes, harness_modules

PACKAGE = Path(verify.__file__).parent
# Modules no verdict depends on: how a report looks, the CLI, the sweep.
NOT_VERDICT_CODE = (
    "verify.report.html",
    "verify.report.terminal",
    "verify.report.junit",
    "verify.report.stryker",
    "verify.cli.verify",
    "verify.sweep.driver",
)


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """A copy of the `verify` package (its sources alone) that a test may edit."""
    copy = tmp_path / "verify"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "vendor"))
    return copy


def _change_a_byte(file: Path) -> None:
    """One byte of the file changed (the source still parses): its last newline a space, or one added."""
    data = file.read_bytes()
    file.write_bytes(data[:-1] + b" " if data.endswith(b"\n") else data + b"\n")


def test_the_seeds_and_the_crash_kinds_are_covered_with_the_verdict_model_the_run_and_the_gate_kit() -> None:
    covered = harness_modules()
    for name in ("verify.seeds", "verify.report.crashes", "verify.report.verdict", "verify.report.decode",
                 "verify.mutation", "verify.run.phases.judge", "verify.run.child.recorder", "verify"):  # fmt: skip
        assert name in covered, name
    for root in ("run", "config", "sandbox", "gatekit"):  # the run, its configuration and sandbox, the gate kit
        assert set((PACKAGE / root).rglob("*.py")) <= set(covered.values()), root
    assert covered["verify.seeds"] == PACKAGE / "seeds.py"
    assert harness_digest() == harness_digest_bytes().hex() and harness_digest_bytes(PACKAGE) == harness_digest_bytes()


def test_a_byte_changed_in_any_covered_module_changes_the_digest(package: Path) -> None:
    covered = harness_modules(package)
    assert set(covered) == set(harness_modules())  # the copy is the same package
    base = harness_digest_bytes(package)
    seen = {base}
    for name, file in covered.items():
        original = file.read_bytes()
        _change_a_byte(file)
        changed = harness_digest_bytes(package)
        assert changed not in seen, f"a byte of {name} left the digest as it was"
        seen.add(changed)
        file.write_bytes(original)
    assert harness_digest_bytes(package) == base


@pytest.mark.parametrize("name", NOT_VERDICT_CODE)
def test_a_module_the_verdict_code_does_not_import_is_not_covered(package: Path, name: str) -> None:
    assert name not in harness_modules(package)
    base = harness_digest_bytes(package)
    _change_a_byte(package.parent / (name.replace(".", "/") + ".py"))
    assert harness_digest_bytes(package) == base


@pytest.mark.parametrize(
    "statement",
    [
        "from verify.report import newrule",
        "import verify.report.newrule",
        "from . import newrule",
        "def later():\n    from verify.report.newrule import RULE\n    return RULE",
        'MODULE = "verify.report.newrule"',  # started by name (python -m, importlib)
    ],
    ids=["from-package", "import", "relative", "inside-a-function", "by-name"],
)
def test_a_module_the_verdict_code_starts_to_import_is_covered_with_no_list_edited(
    package: Path, statement: str
) -> None:
    new = package / "report" / "newrule.py"
    new.write_text("RULE = 1\n")
    assert "verify.report.newrule" not in harness_modules(package)
    crashes = package / "report" / "crashes.py"  # itself covered only because the run imports it
    crashes.write_text(crashes.read_text() + "\n" + statement + "\n")
    assert harness_modules(package)["verify.report.newrule"] == new
    before = harness_digest_bytes(package)
    new.write_text("RULE = 2\n")
    assert harness_digest_bytes(package) != before


def test_a_renderer_imported_by_the_run_becomes_covered(package: Path) -> None:
    # The other side of deriving the set: nothing about a module's name keeps it out, only the imports.
    assert "verify.report.html" not in harness_modules(package)
    judge = package / "run" / "phases" / "judge.py"
    judge.write_text(judge.read_text() + "\nfrom verify.report import html as _html\n")
    assert "verify.report.html" in harness_modules(package)


def test_the_imports_of_a_source_are_read_once_per_content(package: Path) -> None:
    harness_digest_bytes(package)
    before = digest_module._named.cache_info().misses
    harness_digest_bytes(package)  # a run digests its harness at its start and at its end
    assert digest_module._named.cache_info().misses == before
