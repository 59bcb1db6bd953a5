"""Anchors are checked against the source when the catalog loads: a stale one is named with the nearest lines of
its file and how they differ (by whitespace, or which characters), by `dflash mutations list` (exit 1) and by
`dflash verify` before its baseline."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from verify.cli import app
from verify.config.catalog import StaleAnchorError, stale_anchors
from verify.config.settings import load_config
from verify.mutation import Mutation, reset_registry
from verify.mutation.apply import nearest

SOURCE = "def accept(p, q, i, x):\n    ratio = p[i, x] / q[i, x]\n    return ratio\n"


@pytest.fixture(autouse=True)
def _fresh_registry():
    reset_registry()
    yield
    reset_registry()


@pytest.mark.parametrize(
    ("anchor", "said"),
    [
        ("ratio = p[i,x] / q[i,x]", "nearest: line 2: 'ratio = p[i, x] / q[i, x]' (differs by whitespace)"),
        ("ratio = p[i, x] / q[j, x]", "the anchor has 'j' where the file has 'i'"),
        ("completely different text here", "no line of the file is near it"),
    ],
)
def test_the_nearest_line_and_how_it_differs(anchor: str, said: str) -> None:
    assert said in nearest(SOURCE, anchor)


def _project(root: Path) -> Path:
    (root / "spec").mkdir()
    (root / "spec" / "__init__.py").write_text("")
    (root / "spec" / "accept.py").write_text(SOURCE)
    (root / "tests").mkdir()
    (root / "catalog.py").write_text(
        "from verify.mutation import Mutation, register\n\n"
        "register(Mutation('ratio-swapped', 'q/p', 'spec/accept.py', 'ratio = p[i,x] / q[i,x]', 'ratio = 1'))\n"
    )
    (root / "pyproject.toml").write_text(
        '[tool.dflash]\nmutation_modules = ["catalog"]\nsource_roots = ["spec"]\ngates = ["tests"]\n'
    )
    return root


def test_mutations_list_names_a_stale_anchor_with_the_nearest_line(tmp_path) -> None:
    root = _project(tmp_path)
    done = CliRunner().invoke(app, ["mutations", "list", "--project", str(root)], env={"COLUMNS": "200"})
    assert done.exit_code == 1, done.output
    assert "stale anchor (1), found when the catalog loaded" in done.output
    assert "ratio-swapped: anchor not found in spec/accept.py; nearest: line 2" in done.output
    assert "differs by whitespace" in done.output


def test_stale_anchors_is_the_check_verify_runs_before_its_baseline(tmp_path) -> None:
    root = _project(tmp_path)
    config = load_config(root)
    fresh = Mutation("fresh", "q/p", "spec/accept.py", "ratio = p[i, x] / q[i, x]", "ratio = 1")
    stale = Mutation("stale", "q/p", "spec/accept.py", "ratio = p[i,x] / q[i,x]", "ratio = 1")
    found = stale_anchors(config, {"fresh": fresh, "stale": stale})
    assert list(found) == ["stale"] and "differs by whitespace" in found["stale"]
    assert "stale: anchor not found" in str(StaleAnchorError(found))
