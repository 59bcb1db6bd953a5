"""`dflash sweep` with another mutmut than the one it reads is refused by name (exit 2), not a traceback."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verify.cli.sweep import sweep_app
from verify.compat import tomllib
from verify.sweep import requirement

ROOT = Path(__file__).resolve().parents[2]


def test_pyproject_pins_the_mutmut_the_sweep_reads_in_its_extra_alone() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert f"mutmut=={requirement.MUTMUT_VERSION}" in project["optional-dependencies"]["sweep"]
    assert not [d for d in project["dependencies"] if d.startswith(("mutmut", "libcst"))]  # verify installs without
    assert metadata.version("mutmut") == requirement.MUTMUT_VERSION  # what this repository tests with


def _fake_version(monkeypatch: pytest.MonkeyPatch, found: str | None) -> None:
    real = metadata.version

    def version(name: str) -> str:
        if name != "mutmut":
            return real(name)
        if found is None:
            raise metadata.PackageNotFoundError(name)
        return found

    monkeypatch.setattr(requirement.metadata, "version", version)


@pytest.mark.parametrize(
    ("found", "says"),
    [("3.9.0", "found 3.9.0"), ("2.5.1", "found 2.5.1"), (None, "which is not installed")],
    ids=["newer", "older", "missing"],
)
def test_another_mutmut_is_a_named_error_before_anything_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, found: str | None, says: str
) -> None:
    _fake_version(monkeypatch, found)
    result = CliRunner().invoke(sweep_app, ["--root", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    text = " ".join(result.output.split())
    assert f"needs mutmut {requirement.MUTMUT_VERSION}" in text and says in text
    assert f"pip install 'mutmut=={requirement.MUTMUT_VERSION}'" in text
    assert "pip install '/path/to/dflash-verify[sweep]'" in text  # the extra that brings it
    assert list(tmp_path.iterdir()) == []  # refused before reading or writing anything


def test_the_pinned_mutmut_passes_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_version(monkeypatch, requirement.MUTMUT_VERSION)
    requirement.require_mutmut()
