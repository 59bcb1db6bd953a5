"""The runs on the unmutated tree that make every verdict trustworthy: the baseline, the harness self-check
and the pristine re-runs that expose flaky gates.

The baseline runs every gate under coverage.py and times it; a red gate stops the run. The self-check
proves the harness: a forced failure must turn every gate red by assertion, and every source file served
unchanged through the import hook must keep every gate green (the second unmutated run). After the
mutations, the gates that turned red are re-run on the pristine tree; one red there is flaky, and its
kills are not counted. Returns records; never prints.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

from verify.report.verdict import Baseline, GateOutcome, Outcome, baseline_from_dict
from verify.run import cache as cache_mod
from verify.run.executor import Executor, Job
from verify.run.settings import ProjectConfig, project_files

__all__ = ["BaselineError", "HarnessError", "Progress", "budget", "find_flaky", "run_baseline", "self_check"]


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


def run_baseline(
    ex: Executor, cache: cache_mod.ResultCache, tree: str, progress: Progress
) -> tuple[Baseline, dict[str, Any], bool]:
    """(baseline, coverage data, whether it came from the cache)."""
    progress.phase("baseline", 1)
    cached = cache.get_baseline(tree)
    if cached is not None:
        progress.advance("baseline (cached)")
        return baseline_from_dict(cached["baseline"]), cached["coverage"], True
    [run] = ex.run([Job("_baseline", (), ex.config.baseline_timeout_s, measure_coverage=True)], 1)
    progress.advance("baseline")
    if run.state != "done":
        raise BaselineError(f"baseline {run.state}: {run.reason}")
    if run.collect_errors:
        raise BaselineError(f"gates fail to collect: {', '.join(f'{n} ({why})' for n, why in run.collect_errors)}")
    # A gate that skips itself here (a gpu gate on a CPU machine) is not one of this machine's gates.
    ran = [o for o in run.outcomes if not (o.outcome is Outcome.NOT_RUN and o.exc_type == "Skipped")]
    red = [o for o in ran if o.outcome is not Outcome.PASSED]
    if red:
        state = "not run" if red[0].outcome is Outcome.NOT_RUN else f"red ({red[0].outcome})"
        raise BaselineError(f"gate {red[0].gate_id} is {state} on unmutated code ({_why(red[0])})")
    baseline = Baseline("green", tuple(ran))
    if not baseline.gates:
        config = ex.config
        raise BaselineError(
            f"no gate selected: no test under {', '.join(config.gates)} carries the pytest marker "
            f"{config.gate_marker!r} ([tool.dflash] gates and gate_marker; pytest exit {run.pytest_exit})"
        )
    coverage = run.coverage or {}
    cache.put_baseline(tree, {"baseline": dataclasses.asdict(baseline), "coverage": coverage})
    return baseline, coverage, False


def self_check(ex: Executor, baseline: Baseline, cache: cache_mod.ResultCache, tree: str, progress: Progress) -> str:
    """Forced failure must be seen on every gate; unchanged code served by the hook must stay green.
    Returns "passed" or "cached"; raises HarnessError or BaselineError."""
    if cache.get_self_check(tree):
        progress.phase("self-check", 1)
        progress.advance("self-check (cached)")
        return "cached"
    progress.phase("self-check", 2)
    config, gate_ids = ex.config, baseline.gate_ids
    timeout = budget(config, baseline, gate_ids)
    sources = tuple(
        (rel, (config.root / rel).read_text())
        for rel in project_files(config)
        if rel.endswith(".py") and any(rel.startswith(r.rstrip("/") + "/") or rel == r for r in config.source_roots)
    )
    jobs = [Job("_forced-fail", gate_ids, timeout, force_fail=True), Job("_noop", gate_ids, timeout, sources)]
    forced, noop = ex.run(jobs, config.num_jobs, lambda r: progress.advance(r.key.lstrip("_")))
    for run in (forced, noop):
        if run.state != "done":
            raise HarnessError(f"self-check {run.key.lstrip('_')} {run.state}: {run.reason}")
    unseen = [o.gate_id for o in forced.outcomes if o.outcome is not Outcome.ASSERTION]
    if unseen or len(forced.outcomes) != len(gate_ids):
        raise HarnessError(f"the harness did not see a forced failure in {', '.join(unseen) or 'some gates'}")
    red = [o for o in noop.outcomes if o.outcome is not Outcome.PASSED]
    if red:
        raise BaselineError(
            f"gate {red[0].gate_id} is flaky: green in the baseline, {red[0].outcome} ({_why(red[0])}) on a second "
            "unmutated run"
        )
    cache.put_self_check(tree)
    return "passed"


def find_flaky(
    ex: Executor, baseline: Baseline, gate_ids: set[str], num_jobs: int, progress: Progress
) -> dict[str, str]:
    """Re-run `gate_ids` on the pristine tree `flake_reruns` times; {gate id: what it did} for each not green."""
    reruns = ex.config.flake_reruns
    ordered = tuple(g for g in baseline.gate_ids if g in gate_ids)
    if not ordered or reruns == 0:
        return {}
    timeout = budget(ex.config, baseline, ordered)
    jobs = [Job(f"_pristine-{i + 1}", ordered, timeout) for i in range(reruns)]
    progress.phase("flake check", len(jobs))
    flaky: dict[str, str] = {}
    for run in ex.run(jobs, num_jobs, lambda r: progress.advance(r.key.lstrip("_"))):
        for outcome in run.outcomes:
            # Red or hung with nothing mutated is flaky; a gate that did not run says nothing either way.
            if outcome.outcome.is_red and outcome.gate_id not in flaky:
                flaky[outcome.gate_id] = f"{outcome.outcome} on the unmutated tree ({_why(outcome)})"[:200]
    return flaky
