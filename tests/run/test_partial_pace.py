"""The partial report is handed on at a pace set by its own cost, not once per verdict: building and writing it
grows with the results, so a report per verdict made a 1,000-mutation run quadratic (the scale bench: 43 s of a
130 s run of 300 mutations went to it). The first verdict is always handed on at once, every verdict is cached
as it comes, and the run's end hands on the whole report (verify.run.phases.run)."""

from __future__ import annotations

from verify.config.selection import RunOptions
from verify.config.settings import load_config
from verify.mutation import Mutation
from verify.report.verdict import MutationResult, Status
from verify.run.phases import state as state_mod
from verify.run.phases.cache import ResultCache
from verify.run.phases.state import RunState


def test_partial_reports_are_paced_by_their_cost_and_every_verdict_is_cached(toy_copy, monkeypatch) -> None:
    clock = [100.0]
    monkeypatch.setattr(state_mod.time, "monotonic", lambda: clock[0])
    root = toy_copy()
    config = load_config(root)
    chosen = [Mutation(f"m{i}", "x", "toy/engine.py", "a", "b") for i in range(6)]
    handed: list[int] = []

    def on_report(report) -> None:
        clock[0] += 0.1  # building and writing the report costs 0.1 s: the next is due 20 x 0.1 = 2 s later
        handed.append(len(report.mutations))

    cache = ResultCache(root)
    run = RunState(config, chosen, RunOptions(), cache, on_report)
    for i, at in enumerate([0.0, 0.5, 1.0, 2.0, 2.2, 10.0]):
        clock[0] = 100.0 + at
        run.add(MutationResult(f"m{i}", Status.KILLED, ("g",)), key=f"key{i}")
    # At 0 (the first, at once), then not before 0.1 + 2.0 (so 2.2), then 10.0.
    assert handed == [1, 5, 6]
    assert all(cache.get(f"key{i}") is not None for i in range(6))  # the cache misses none
    assert len(run.report().mutations) == 6
