"""`dflash mutations list` and `show` on the shipped catalog: full names, and diffs that git accepts."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verify.cli import app
from verify.config.catalog import load_mutations
from verify.config.settings import load_config

ROOT = Path(__file__).resolve().parents[2]
CATALOG = sorted(load_mutations(load_config(ROOT)))


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
@pytest.mark.parametrize("name", CATALOG)
def test_show_output_applies_with_git(name: str) -> None:
    shown = CliRunner().invoke(app, ["mutations", "show", name, "--project", str(ROOT)])
    assert shown.exit_code == 0, shown.output
    check = subprocess.run(
        ["git", "apply", "--check", "-"], input=shown.output, cwd=ROOT, capture_output=True, text=True
    )
    assert check.returncode == 0, check.stderr + shown.output
    assert f"# {name}: " in shown.output  # the bug class rides along as a preamble git skips


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_real_shell_pipe_into_git_apply() -> None:
    longest = max(CATALOG, key=len)
    pipe = f"{sys.executable} -m verify mutations show {longest} | git apply --check"
    done = subprocess.run(["bash", "-o", "pipefail", "-c", pipe], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_list_shows_every_name_whole_at_80_columns() -> None:
    listed = CliRunner().invoke(app, ["mutations", "list", "--project", str(ROOT)], env={"COLUMNS": "80"})
    assert listed.exit_code == 0, listed.output
    assert f"{len(CATALOG)} registered mutations" in listed.output
    for name in CATALOG:
        assert name in listed.output, name
    assert "…" not in listed.output  # nothing cut with an ellipsis


def test_list_piped_keeps_every_column_one_line_per_mutation() -> None:
    listed = CliRunner().invoke(app, ["mutations", "list", "--project", str(ROOT)], env={"COLUMNS": None})
    assert listed.exit_code == 0, listed.output
    lines = listed.output.splitlines()
    assert lines[0] == f"{len(CATALOG)} registered mutations"  # at the left, not centred over a wide table
    assert lines[1].split() == ["name", "file", "bug", "class", "(pinned", "killers)"]
    mutations = load_mutations(load_config(ROOT))
    for name, mutation in mutations.items():
        [row] = [line for line in lines if line.startswith(f"{name} ")]
        pins = ", ".join(pin.rpartition("/")[2] for pin in mutation.expect_killed_by)
        assert mutation.file in row and row.endswith(mutation.bug_class + (f" (pinned: {pins})" if pins else ""))
        assert row.index(mutation.file) == lines[1].index("file")  # aligned under its heading
    assert all(line == line.rstrip() for line in lines)  # no padding after the last column


def test_list_piped_with_columns_fits_them() -> None:
    listed = CliRunner().invoke(app, ["mutations", "list", "--project", str(ROOT)], env={"COLUMNS": "80"})
    assert listed.exit_code == 0, listed.output
    lines = listed.output.splitlines()
    assert max(len(line) for line in lines) <= 80 and lines[0].startswith(f"{len(CATALOG)} registered")
    text = " ".join(listed.output.split())
    for name in CATALOG:
        assert name in text, name
