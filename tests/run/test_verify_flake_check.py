"""The flake check's re-runs: how many (3 for the full matrix, 1 with --first-kill, the key when set), how they
are split into children, what they find, and what the cache remembers of them."""

from __future__ import annotations

import pytest

from verify.config.settings import ProjectConfig
from verify.report.verdict import Baseline, GateOutcome, Outcome
from verify.run.execution.jobs import JobResult
from verify.run.phases.cache import ResultCache
from verify.run.phases.pristine import flake_jobs, flaky_in

A, B, C = "t.py::a", "t.py::b", "u.py::c"
BASELINE = Baseline(
    "green",
    (GateOutcome(A, Outcome.PASSED, 3.0), GateOutcome(B, Outcome.PASSED, 1.0), GateOutcome(C, Outcome.PASSED, 2.0)),
)


@pytest.mark.parametrize(
    ("key", "first_kill", "reruns"),
    [(None, False, 3), (None, True, 1), (2, True, 2), (0, False, 0)],
    ids=["full-default", "first-kill-default", "set-applies-to-first-kill", "set-to-none"],
)
def test_reruns_by_mode_unless_set(tmp_path, key, first_kill, reruns) -> None:
    assert ProjectConfig(tmp_path, flake_reruns=key).flake_reruns_for(first_kill) == reruns


def test_each_rerun_is_split_by_baseline_time_into_one_child_per_worker(tmp_path) -> None:
    jobs = flake_jobs(ProjectConfig(tmp_path), BASELINE, {A, B, C}, 2, 3)
    assert [job.key for job in jobs] == [f"_pristine-{i}.{k}" for i in (1, 2, 3) for k in (1, 2)]
    # a (3 s) alone, b and c (1 s + 2 s) together; each slice in baseline order.
    assert {job.gate_ids for job in jobs} == {(A,), (B, C)}
    assert flake_jobs(ProjectConfig(tmp_path), BASELINE, {A, B}, 2, 0) == []
    assert flake_jobs(ProjectConfig(tmp_path), BASELINE, set(), 2, 3) == []


def test_a_gate_red_or_hung_in_any_rerun_is_flaky_one_not_run_is_not() -> None:
    def rerun(key: str, *outcomes: GateOutcome) -> JobResult:
        return JobResult(key, "done", 1.0, outcomes)

    found = flaky_in([
        rerun("_pristine-1", GateOutcome(A, Outcome.PASSED, 1.0), GateOutcome(B, Outcome.NOT_RUN, 0.0)),
        rerun("_pristine-2", GateOutcome(A, Outcome.ASSERTION, 1.0, "AssertionError", "3 != 4")),
        rerun("_pristine-3", GateOutcome(C, Outcome.TIMEOUT, 9.0, "Timeout")),
    ])  # fmt: skip
    assert set(found) == {A, C}
    assert found[A].startswith("assertion on the unmutated tree")


def test_the_cache_answers_a_run_needing_no_more_reruns_than_were_made(tmp_path) -> None:
    cache = ResultCache(tmp_path)
    cache.put_gate_checks("tree", {A: "", B: "assertion on the unmutated tree (x)"}, 1)
    # One green re-run settles a first-kill run's check, not a full matrix's three; a red finding settles both.
    assert cache.get_gate_checks("tree", 1) == {A: "", B: "assertion on the unmutated tree (x)"}
    assert cache.get_gate_checks("tree", 3) == {B: "assertion on the unmutated tree (x)"}
    cache.put_gate_checks("tree", {A: ""}, 3)
    assert cache.get_gate_checks("tree", 3) == {A: "", B: "assertion on the unmutated tree (x)"}
    cache.put_gate_checks("tree", {A: ""}, 1)  # a later, smaller check never lowers what was shown
    assert cache.get_gate_checks("tree", 3)[A] == ""
    assert cache.get_gate_checks("other tree", 1) == {}
