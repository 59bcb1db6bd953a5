"""The runs on the unmutated tree that make every verdict trustworthy: the baseline, the harness self-check
and the pristine re-runs that expose flaky gates.

The baseline runs every gate under coverage.py and times it; a red gate stops the run. The self-check runs
beside it, in the same batch of children, and proves the harness: a forced failure must turn every gate red
by assertion, and every source file served unchanged through the import hook must keep every gate green
(the second unmutated run). After the
mutations, the gates that turned red are re-run on the pristine tree; one red there is flaky, and its
kills are not counted. Returns records; never prints.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

from verify.report.verdict import Baseline, GateOutcome, Outcome, baseline_from_dict
from verify.run import cache as cache_mod
from verify.run.executor import Executor, Job, JobResult
from verify.run.settings import ProjectConfig, project_files

__all__ = ["BaselineError", "HarnessError", "Progress", "budget", "find_flaky", "run_pristine"]


class BaselineError(Exception):
    """A gate is red or flaky on unmutated code, or no gate was selected (CLI exit code 3)."""


class HarnessError(Exception):
    """The harness cannot see a forced failure, or breaks unmutated code (CLI exit code 3)."""


class Progress(Protocol):
    def phase(self, name: str, total: int) -> None: ...
    def advance(self, label: str) -> None: ...


def budget(config: ProjectConfig, baseline: Baseline, gate_ids: tuple[str, ...]) -> float:
    """A child's budget on an idle machine: a multiple of its gates' baseline time, never under the floor.
    The executor stretches it by the load it measures while the child runs."""
    return max(config.timeout_min_s, config.timeout_factor * baseline.duration_of(gate_ids))


def _why(outcome: GateOutcome) -> str:
    return f"{outcome.exc_type}: {outcome.message}" if outcome.message else outcome.exc_type


def _sources(config: ProjectConfig) -> tuple[tuple[str, str], ...]:
    """Every source file, to be served unchanged through the import hook (the self-check's no-op mutant)."""
    return tuple(
        (rel, (config.root / rel).read_text())
        for rel in project_files(config)
        if rel.endswith(".py") and any(rel.startswith(r.rstrip("/") + "/") or rel == r for r in config.source_roots)
    )


def run_pristine(
    ex: Executor, cache: cache_mod.ResultCache, tree: str, progress: Progress
) -> tuple[Baseline, dict[str, Any], str]:
    """The baseline and the harness self-check, side by side in one batch of children (neither needs the
    other's result to run, only to be judged). Returns (baseline, coverage data, self-check status:
    "passed" or "cached"); raises BaselineError or HarnessError."""
    config = ex.config
    cached = cache.get_baseline(tree)
    checked = cache.get_self_check(tree)
    jobs = []
    if cached is None:
        jobs.append(Job("_baseline", (), config.baseline_timeout_s, measure_coverage=True, share_bytecode=True))
    if not checked:
        # Before the baseline is known there is no per-gate budget: each may take as long as a baseline.
        jobs.append(Job("_forced-fail", (), config.baseline_timeout_s, force_fail=True, share_bytecode=True))
        jobs.append(Job("_noop", (), config.baseline_timeout_s, _sources(config)))
    progress.phase("baseline and self-check", max(1, len(jobs)))
    if not jobs:
        progress.advance("baseline and self-check (cached)")
    runs = {run.key: run for run in ex.run(jobs, config.num_jobs, lambda r: progress.advance(r.key.lstrip("_")))}
    if cached is not None:
        baseline, coverage = baseline_from_dict(cached["baseline"]), cached["coverage"]
    else:
        baseline, coverage = _judge_baseline(config, runs["_baseline"], runs.get("_noop"))
        cache.put_baseline(tree, {"baseline": dataclasses.asdict(baseline), "coverage": coverage})
    if checked:
        return baseline, coverage, "cached"
    _judge_self_check(baseline, runs["_forced-fail"], runs["_noop"])
    cache.put_self_check(tree)
    return baseline, coverage, "passed"


def _judge_baseline(config: ProjectConfig, run: JobResult, noop: JobResult | None) -> tuple[Baseline, dict[str, Any]]:
    if run.state != "done":
        raise BaselineError(f"baseline {run.state}: {run.reason}")
    if run.collect_errors:
        raise BaselineError(f"gates fail to collect: {', '.join(f'{n} ({why})' for n, why in run.collect_errors)}")
    # A gate that skips itself here (a gpu gate on a CPU machine) is not one of this machine's gates.
    ran = [o for o in run.outcomes if not (o.outcome is Outcome.NOT_RUN and o.exc_type == "Skipped")]
    red = [o for o in ran if o.outcome is not Outcome.PASSED]
    if red:
        state = "not run" if red[0].outcome is Outcome.NOT_RUN else f"red ({red[0].outcome})"
        again = {o.gate_id: o.outcome for o in noop.outcomes} if noop is not None else {}
        if again.get(red[0].gate_id) is Outcome.PASSED:  # the two unmutated runs disagree
            raise BaselineError(
                f"gate {red[0].gate_id} is flaky: {state} in the baseline ({_why(red[0])}), green on a second "
                "unmutated run"
            )
        raise BaselineError(f"gate {red[0].gate_id} is {state} on unmutated code ({_why(red[0])})")
    baseline = Baseline("green", tuple(ran))
    if not baseline.gates:
        raise BaselineError(
            f"no gate selected: no test under {', '.join(config.gates)} carries the pytest marker "
            f"{config.gate_marker!r} ([tool.dflash] gates and gate_marker; pytest exit {run.pytest_exit})"
        )
    return baseline, run.coverage or {}


def _judge_self_check(baseline: Baseline, forced: JobResult, noop: JobResult) -> None:
    """A forced failure must be seen on every baseline gate; unchanged code served by the hook must keep
    every baseline gate green (the second unmutated run, which also catches a gate flaky on its 2nd run)."""
    for run in (forced, noop):
        if run.state != "done":
            raise HarnessError(f"self-check {run.key.lstrip('_')} {run.state}: {run.reason}")
    seen = {o.gate_id for o in forced.outcomes if o.outcome is Outcome.ASSERTION}
    unseen = [g for g in baseline.gate_ids if g not in seen]
    if unseen:
        raise HarnessError(
            f"the harness did not see a forced failure in {', '.join(unseen[:3])}"
            + (f" and {len(unseen) - 3} more" if len(unseen) > 3 else "")
            + " (a plugin or conftest hook that turns failures into passes or skips?)"
        )
    missing = GateOutcome("", Outcome.NOT_RUN, 0.0, "NotRun", "it never ran")
    outcomes = {o.gate_id: o for o in noop.outcomes}
    for gate_id in baseline.gate_ids:
        outcome = outcomes.get(gate_id, missing)
        if outcome.outcome is not Outcome.PASSED:
            raise BaselineError(
                f"gate {gate_id} is flaky: green in the baseline, {outcome.outcome} ({_why(outcome)}) on a second "
                "unmutated run"
            )


def _balanced(gate_ids: tuple[str, ...], baseline: Baseline, count: int) -> list[tuple[str, ...]]:
    """`count` slices of `gate_ids` with about equal baseline time (longest first, each to the lightest slice),
    each kept in baseline order."""
    seconds = {o.gate_id: o.duration_s for o in baseline.gates}
    loads, slices = [0.0] * count, [set[str]() for _ in range(count)]
    for gate_id in sorted(gate_ids, key=lambda g: -seconds.get(g, 0.0)):
        lightest = loads.index(min(loads))
        slices[lightest].add(gate_id)
        loads[lightest] += seconds.get(gate_id, 0.0)
    return [tuple(g for g in gate_ids if g in part) for part in slices if part]


def find_flaky(
    ex: Executor, baseline: Baseline, gate_ids: set[str], num_jobs: int, progress: Progress
) -> dict[str, str]:
    """Re-run `gate_ids` on the pristine tree `flake_reruns` times; {gate id: what it did} for each not green."""
    reruns = ex.config.flake_reruns
    ordered = tuple(g for g in baseline.gate_ids if g in gate_ids)
    if not ordered or reruns == 0:
        return {}
    # Each re-run split into one slice per worker, slices balanced by baseline time: the workers finish the
    # re-runs together instead of idling while one child runs a whole re-run alone.
    slices = _balanced(ordered, baseline, max(1, min(num_jobs, len(ordered))))
    jobs = [
        Job(f"_pristine-{i + 1}" + (f".{k + 1}" if len(slices) > 1 else ""), part, budget(ex.config, baseline, part))
        for i in range(reruns)
        for k, part in enumerate(slices)
    ]
    progress.phase("flake check", len(jobs))
    flaky: dict[str, str] = {}
    for run in ex.run(jobs, num_jobs, lambda r: progress.advance(r.key.lstrip("_"))):
        for outcome in run.outcomes:
            # Red or hung with nothing mutated is flaky; a gate that did not run says nothing either way.
            if outcome.outcome.is_red and outcome.gate_id not in flaky:
                flaky[outcome.gate_id] = f"{outcome.outcome} on the unmutated tree ({_why(outcome)})"[:200]
    return flaky
