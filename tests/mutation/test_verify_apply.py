"""Applying a mutation, the import hook that serves it, and the lines coverage maps it to."""

from __future__ import annotations

import importlib
import sys

import pytest

from verify.mutation import Mutation
from verify.mutation.apply import Applied, MutantFinder, Stale, apply_mutation, count_matches
from verify.run.phases.coverage_map import CoverageMap, anchor_lines

SOURCE = """def scale(x, factor=2):
    total = (x *
             factor)
    if total > 10:
        return 10
    return total
"""


def _mutant(anchor: str, replacement: str) -> Mutation:
    return Mutation("m", "test", "pkg/mod.py", anchor, replacement)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "mod.py").write_text(SOURCE)
    return tmp_path


@pytest.mark.parametrize(
    ("anchor", "replacement", "reason"),
    [
        ("return 99", "return 98", "anchor not found"),
        ("total", "tot", "anchor matches 3 times"),
        ("return 10", "return (", "mutant does not compile"),
    ],
    ids=["absent", "many", "syntax-error"],
)
def test_stale_mutations_say_why(project, anchor, replacement, reason) -> None:
    stale = apply_mutation(_mutant(anchor, replacement), project)
    assert isinstance(stale, Stale) and stale.reason.startswith(reason)


def test_missing_file_is_stale(tmp_path) -> None:
    assert apply_mutation(_mutant("a", "b"), tmp_path) == Stale("m", "file not found: pkg/mod.py")


def test_overlapping_matches_count() -> None:
    assert count_matches("aaa", "aa") == 2


def test_apply_reads_only_and_diffs(project) -> None:
    applied = apply_mutation(_mutant("return 10\n", "return 11\n"), project)
    assert isinstance(applied, Applied)
    assert (project / "pkg" / "mod.py").read_text() == SOURCE
    assert (applied.first_line, applied.last_line) == (5, 5)
    assert "-        return 10\n+        return 11\n" in applied.diff
    assert applied.diff.startswith("--- a/pkg/mod.py\n+++ b/pkg/mod.py\n")


@pytest.mark.parametrize(
    ("anchor", "lines"),
    [
        ("factor)", {3, 2}),  # the middle of a multi-line statement maps to its first line
        ("total > 10", {4}),  # an if header, not its body
        ("factor=2", {1}),  # a def header: executed at import
        ("return 10", {5}),
    ],
)
def test_anchor_lines(project, anchor, lines) -> None:
    applied = apply_mutation(_mutant(anchor, anchor + " "), project)
    assert isinstance(applied, Applied)
    assert anchor_lines(applied) == lines


def test_coverage_map_credits_import_time_and_fixture_lines() -> None:
    lines = {"pkg/mod.py": {"1": [""], "2": ["fixture:model"], "5": ["t.py::a"]}}
    cmap = CoverageMap(lines, {"t.py::a": [], "t.py::b": ["model"], "t.py::c": []}, ("t.py::a", "t.py::b", "t.py::c"))
    assert cmap.gates_reaching("pkg/mod.py", [5]) == ("t.py::a",)
    assert cmap.gates_reaching("pkg/mod.py", [2]) == ("t.py::b",)
    assert cmap.gates_reaching("pkg/mod.py", [1]) == ("t.py::a", "t.py::b", "t.py::c")
    assert cmap.gates_reaching("pkg/mod.py", [6]) == ()


def test_finder_serves_the_mutant_from_the_given_root_only(project) -> None:
    applied = apply_mutation(_mutant("return 10\n", "return 11\n"), project)
    assert isinstance(applied, Applied)
    finder = MutantFinder([project], ["pkg"], {str(project / "pkg" / "mod.py"): applied.mutated})
    sys.meta_path.insert(0, finder)
    try:
        module = importlib.import_module("pkg.mod")
        assert module.scale(100) == 11
        assert module.__file__ == str((project / "pkg" / "mod.py").resolve())
        assert finder.loaded == {str((project / "pkg" / "mod.py").resolve())}
        with pytest.raises(ModuleNotFoundError, match="in "):
            importlib.import_module("pkg.absent")
    finally:
        sys.meta_path.remove(finder)
        for name in [m for m in sys.modules if m == "pkg" or m.startswith("pkg.")]:
            del sys.modules[name]
