"""An earlier tree's baseline reused: only the gates a change can have reached run again, and anything the rule
cannot see through (a change outside function bodies, a conftest, a helper, a data file) runs a whole baseline."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import pytest

from verify.config.catalog import load_mutations
from verify.config.settings import load_config
from verify.mutation import reset_registry
from verify.report.verdict import Baseline, BaselineStatus, GateOutcome, Outcome
from verify.run.phases import cache as cache_mod
from verify.run.phases.reuse import Reuse, combine, fingerprint, plan_reuse
from verify.run.phases.run import RunOptions, run_verify

ADD, SUB, MUL, DESCRIBE = (f"tests/gates/test_arith.py::test_{n}" for n in ("add", "sub", "mul", "describe_runs"))


def _files(root: Path) -> dict[str, bytes]:
    config = load_config(root)
    return cache_mod.tree_files(config)


def _entry(root: Path, coverage: dict) -> dict:
    """A cached baseline of the toy as it is now, with the coverage given."""
    config = load_config(root)
    gates = tuple(GateOutcome(g, Outcome.PASSED, 0.5) for g in (ADD, SUB, MUL, DESCRIBE))
    baseline = Baseline(BaselineStatus.GREEN, gates)
    return {
        "baseline": dataclasses.asdict(baseline),
        "coverage": coverage,
        **fingerprint(config, _files(root), coverage),
    }


# Coverage as the baseline child records it: import-time lines under "", a gate's lines under its node id.
COVERAGE = {
    "lines": {
        "toy/arith.py": {"1": [""], "4": [""], "5": [ADD], "8": [""], "9": [SUB], "12": [""], "13": [MUL]},
        "toy/text.py": {"1": [""], "4": [""], "5": [DESCRIBE], "6": [DESCRIBE]},
    },
    "fixtures": {},
}


def _plan(root: Path, earlier: dict) -> Reuse | None:
    return plan_reuse(load_config(root), _files(root), earlier)


def test_a_body_change_reruns_only_the_gates_that_ran_that_file(toy_copy) -> None:
    root = toy_copy()
    earlier = _entry(root, COVERAGE)
    path = root / "toy/text.py"
    path.write_text(path.read_text().replace('label = "value"', 'label = "val" + "ue"'))
    reuse = _plan(root, earlier)
    assert reuse is not None
    assert reuse.targets == (DESCRIBE,)
    assert reuse.changed_files == {"toy/text.py"}


def test_an_unchanged_tree_reruns_nothing(toy_copy) -> None:
    root = toy_copy()
    reuse = _plan(root, _entry(root, COVERAGE))
    assert reuse is not None and reuse.targets == ()


@pytest.mark.parametrize(
    ("file", "old", "new"),
    [
        pytest.param("toy/arith.py", "def add(a, b):", "def add(a, b, c=0):", id="a-signature"),
        pytest.param("toy/text.py", '"""Text helpers', 'LIMIT = 3\n"""Text helpers', id="a-module-constant"),
        pytest.param("pyproject.toml", "jobs = 2", "jobs = 2\n", id="a-data-file"),
    ],
)
def test_a_change_the_rule_cannot_see_through_runs_a_whole_baseline(toy_copy, file: str, old: str, new: str) -> None:
    root = toy_copy()
    earlier = _entry(root, COVERAGE)
    path = root / file
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new, 1))
    assert _plan(root, earlier) is None


def test_a_new_conftest_or_helper_beside_the_gates_runs_a_whole_baseline(toy_copy) -> None:
    root = toy_copy()
    earlier = _entry(root, COVERAGE)
    (root / "tests/gates/helpers.py").write_text("X = 1\n")
    assert _plan(root, earlier) is None
    (root / "tests/gates/helpers.py").unlink()
    (root / "tests/gates/conftest.py").write_text("")
    assert _plan(root, earlier) is None


def test_a_body_run_at_import_time_runs_a_whole_baseline(toy_copy) -> None:
    root = toy_copy()
    at_import = {**COVERAGE, "lines": {**COVERAGE["lines"], "toy/text.py": {"5": ["", DESCRIBE], "6": [DESCRIBE]}}}
    earlier = _entry(root, at_import)
    path = root / "toy/text.py"
    path.write_text(path.read_text().replace('label = "value"', 'label = "val" + "ue"'))
    assert _plan(root, earlier) is None


def test_a_changed_gate_file_reruns_the_whole_file_and_a_fixture_reaches_its_users(toy_copy) -> None:
    root = toy_copy()
    with_fixture = {
        "lines": {**COVERAGE["lines"], "toy/text.py": {**COVERAGE["lines"]["toy/text.py"], "10": ["fixture:f"]}},
        "fixtures": {SUB: ["f"]},
    }
    earlier = _entry(root, with_fixture)
    gate_file = root / "tests/gates/test_arith.py"
    gate_file.write_text(gate_file.read_text().replace("== 12", "== 4 * 3"))
    text = root / "toy/text.py"
    text.write_text(text.read_text().replace("result = s.upper()", "result = s.upper() + ''"))
    reuse = _plan(root, earlier)
    assert reuse is not None
    assert reuse.targets == ("tests/gates/test_arith.py",)  # the file whole (its gates may have changed)
    reuse = _plan(root, {**earlier, "files": {**earlier["files"], "tests/gates/test_arith.py": _digest(gate_file)}})
    # Only text.py changed: the gate that ran it, and the one whose fixture ran it.
    assert reuse is not None and reuse.targets == (SUB, DESCRIBE)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_combine_keeps_the_earlier_order_and_drops_a_target_that_no_longer_runs(toy_copy) -> None:
    root = toy_copy()
    earlier = _entry(root, COVERAGE)
    reuse = _plan(root, earlier)
    assert reuse is not None
    reuse = dataclasses.replace(reuse, targets=(SUB, DESCRIBE))
    ran = (GateOutcome(SUB, Outcome.PASSED, 2.0),)  # DESCRIBE skipped itself this time
    new_coverage = {"lines": {"toy/arith.py": {"9": [SUB]}}, "fixtures": {SUB: []}}
    baseline, coverage = combine(reuse, ran, (SUB,), new_coverage)
    assert baseline.gate_ids == (ADD, SUB, MUL)
    assert baseline.gates[1].duration_s == 2.0 and baseline.gates[0].duration_s == 0.5
    assert coverage["lines"]["toy/arith.py"]["5"] == [ADD]
    assert coverage["lines"]["toy/arith.py"]["9"] == [SUB]
    # Only the skipped gate ran describe(): its earlier lines are gone, the import-time ones stay.
    assert coverage["lines"]["toy/text.py"] == {"1": [""], "4": [""]}


class _Phases:
    def __init__(self) -> None:
        self.names: list[str] = []

    def phase(self, name: str, total: int) -> None:
        self.names.append(name)

    def advance(self, label: str) -> None:
        pass


def _run(root: Path, *names: str) -> tuple[object, list[str]]:
    reset_registry()
    config = load_config(root)
    mutations = {n: m for n, m in load_mutations(config).items() if n in names}
    phases = _Phases()
    report = run_verify(config, mutations, RunOptions(jobs=1), progress=phases)
    reset_registry()
    return report, phases.names


def test_a_second_tree_reruns_only_the_reached_gates_and_judges_as_a_whole_baseline_would(toy_copy) -> None:
    root, fresh = toy_copy("reused"), toy_copy("fresh")
    _run(root, "add-off-by-one")
    for project in (root, fresh):  # the same body-only change in both: one reuses the first tree's baseline
        path = project / "toy/text.py"
        path.write_text(path.read_text().replace('label = "value"', 'label = "val" + "ue"'))
    reused, phases = _run(root, "describe-label", "add-off-by-one", "mul-adds")
    assert phases[0].startswith("baseline and self-check (1 of 4 gate ids or files")
    whole, phases = _run(fresh, "describe-label", "add-off-by-one", "mul-adds")
    assert phases[0] == "baseline and self-check"
    assert reused.baseline.gate_ids == whole.baseline.gate_ids
    assert [(m.name, m.status, m.killed_by, m.ran) for m in reused.mutations] == [
        (m.name, m.status, m.killed_by, m.ran) for m in whole.mutations
    ]


def test_a_file_edited_during_the_run_gets_no_skeleton_so_its_next_change_runs_a_whole_baseline(toy_copy) -> None:
    root = toy_copy()
    config = load_config(root)
    files = _files(root)
    path = root / "toy/text.py"
    path.write_text(path.read_text().replace('label = "value"', 'label = "val" + "ue"'))  # after the run began
    stored = fingerprint(config, files, COVERAGE)
    assert "toy/text.py" not in stored["sources"] and "toy/arith.py" in stored["sources"]
