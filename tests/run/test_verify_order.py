"""The order of a first-kill mutant's gates and the order mutants start in, from the baseline's gate times."""

from __future__ import annotations

from verify.report.verdict import Baseline, GateOutcome, Outcome
from verify.run.phases.order import expected_s, floor_s, kill_order, pins_first

FAST, MEDIUM, SLOW = "t.py::fast", "t.py::medium", "t.py::slow"
BASELINE = Baseline(
    "green", tuple(GateOutcome(g, Outcome.PASSED, s) for g, s in ((SLOW, 3.0), (MEDIUM, 0.5), (FAST, 0.1)))
)


def test_pins_run_first_then_the_fastest() -> None:
    assert kill_order((SLOW, MEDIUM, FAST), (), BASELINE) == (FAST, MEDIUM, SLOW)
    assert kill_order((SLOW, MEDIUM, FAST), ("t.py::medium",), BASELINE) == (MEDIUM, FAST, SLOW)
    assert kill_order((SLOW, MEDIUM, FAST), ("t.py",), BASELINE) == (SLOW, MEDIUM, FAST)  # a file pins them all


def test_a_mutant_pinned_to_a_slow_gate_is_expected_to_take_longer_than_one_with_more_gates() -> None:
    # Its budget is smaller (fewer gates), but in first-kill mode every pin runs, while the other stops at
    # its fastest gate's kill: started by budget, the slow one would start last and finish alone.
    many = kill_order((SLOW, MEDIUM, FAST), (), BASELINE)
    one_slow = kill_order((SLOW,), (SLOW,), BASELINE)
    assert BASELINE.duration_of(many) > BASELINE.duration_of(one_slow)
    assert expected_s(one_slow, (SLOW,), BASELINE, True) == 3.0
    assert expected_s(many, (), BASELINE, True) == 0.1
    assert expected_s(many, (), BASELINE, False) == 3.6  # the full matrix runs every gate


def test_the_full_matrix_runs_the_pins_first_and_keeps_the_rest_in_collection_order() -> None:
    """A mutant hanging a gate collected before its pin must not keep the pin from running (and killing)."""
    assert pins_first((SLOW, MEDIUM, FAST), ()) == (SLOW, MEDIUM, FAST)
    assert pins_first((SLOW, MEDIUM, FAST), ("t.py::fast",)) == (FAST, SLOW, MEDIUM)
    assert pins_first((SLOW, MEDIUM, FAST), ("t.py::medium", "t.py::fast")) == (MEDIUM, FAST, SLOW)


def test_the_floor_is_the_baseline_and_each_mutants_selected_gates_over_the_jobs() -> None:
    # 3.6 s of baseline, one mutant reaching SLOW and FAST (3.1 s), one reaching MEDIUM (0.5 s), one unreached.
    selections = [(SLOW, FAST), (MEDIUM,), ()]
    seconds = {o.gate_id: o.duration_s for o in BASELINE.gates}
    assert floor_s(seconds, selections, 1) == 3.6 + 3.1 + 0.5
    assert floor_s(seconds, selections, 2) == (3.6 + 3.1 + 0.5) / 2
    assert floor_s(seconds, [], 0) == 3.6  # no jobs given: one
