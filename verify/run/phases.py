"""The verify run: baseline, harness self-check, then every selected mutation, in that order.

Phase 1 runs every gate on unmutated code under coverage.py and times it; a red gate stops the run.
Phase 2 proves the harness: a forced failure must turn every gate red, and a no-op mutant (every
source file served unchanged through the import hook) must keep every gate green, which is also
the second unmutated run that exposes a flaky gate. Phase 3 runs each mutation against the gates
that reach its lines. This module wires the pieces and returns a `RunReport`; it never prints.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from verify.mutation import Mutation
from verify.report.verdict import Baseline, GateOutcome, MutationResult, Outcome, RunReport, Status, baseline_from_dict
from verify.run import cache as cache_mod
from verify.run.apply import Applied, Stale, apply_mutation
from verify.run.coverage_map import CoverageMap, anchor_lines
from verify.run.executor import Executor, Job, JobResult
from verify.run.settings import ProjectConfig, project_files

__all__ = ["BaselineError", "HarnessError", "Progress", "RunOptions", "SelectionError", "Shard", "run_verify"]


class BaselineError(Exception):
    """A gate is red or flaky on unmutated code (CLI exit code 3)."""


class HarnessError(Exception):
    """The harness cannot see a forced failure, or breaks unmutated code (CLI exit code 3)."""


class SelectionError(Exception):
    """An unknown mutation name or a malformed shard (CLI exit code 2)."""


@dataclass(frozen=True, slots=True)
class Shard:
    index: int  # 1-based: shard K of N
    count: int

    def __post_init__(self) -> None:
        if not 1 <= self.index <= self.count:
            raise SelectionError(f"shard {self.index}/{self.count}: need 1 <= K <= N")

    @classmethod
    def parse(cls, text: str) -> Shard:
        index, sep, count = text.partition("/")
        if not sep or not index.isdigit() or not count.isdigit():
            raise SelectionError(f"shard {text!r} must look like K/N, e.g. 2/4")
        return cls(int(index), int(count))

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True, slots=True)
class RunOptions:
    jobs: int = 0  # 0: the config's jobs
    all_gates: bool = False  # run every gate for every mutation, not only those reaching its lines
    changed_since: str | None = None
    shard: Shard | None = None
    names: tuple[str, ...] = ()  # only these mutations; () means all
    use_cache: bool = True


class Progress(Protocol):
    def phase(self, name: str, total: int) -> None: ...
    def advance(self, label: str) -> None: ...


class _Silent:
    def phase(self, name: str, total: int) -> None:
        pass

    def advance(self, label: str) -> None:
        pass


def select(mutations: Mapping[str, Mutation], options: RunOptions) -> list[Mutation]:
    """The mutations this run owns: the name filter, then the shard slice over the sorted names."""
    unknown = sorted(set(options.names) - set(mutations))
    if unknown:
        raise SelectionError(f"unknown mutation: {', '.join(unknown)}")
    names = sorted(options.names or mutations)
    if options.shard is not None:
        names = [n for i, n in enumerate(names) if i % options.shard.count == options.shard.index - 1]
    return [mutations[n] for n in names]


def _timeout(config: ProjectConfig, baseline: Baseline, gate_ids: tuple[str, ...]) -> float:
    return max(config.timeout_min_s, config.timeout_factor * baseline.duration_of(gate_ids))


def _baseline(
    ex: Executor, cache: cache_mod.ResultCache, tree: str, progress: Progress
) -> tuple[Baseline, dict[str, Any]]:
    progress.phase("baseline", 1)
    cached = cache.get_baseline(tree)
    if cached is not None:
        progress.advance("baseline (cached)")
        return baseline_from_dict(cached["baseline"]), cached["coverage"]
    runs, interrupted = ex.run([Job("_baseline", (), ex.config.baseline_timeout_s, measure_coverage=True)], 1)
    if interrupted:
        raise KeyboardInterrupt
    [run] = runs
    progress.advance("baseline")
    if run.state != "done":
        raise BaselineError(f"baseline {run.state}: {run.reason}")
    if run.collect_errors:
        raise BaselineError(f"gates fail to collect: {', '.join(run.collect_errors)}")
    red = [o for o in run.outcomes if o.outcome.is_red]
    if red:
        raise BaselineError(f"gate {red[0].gate_id} is red on unmutated code ({_why(red[0])})")
    baseline = Baseline("green", tuple(o for o in run.outcomes if o.outcome is Outcome.PASSED))
    if not baseline.gates:
        raise BaselineError(f"no gate ran under {', '.join(ex.config.gates)} (pytest exit {run.pytest_exit})")
    coverage = run.coverage or {}
    cache.put_baseline(tree, {"baseline": dataclasses.asdict(baseline), "coverage": coverage})
    return baseline, coverage


def _why(outcome: GateOutcome) -> str:
    return f"{outcome.exc_type}: {outcome.message}" if outcome.message else outcome.exc_type


def _self_check(ex: Executor, baseline: Baseline, progress: Progress) -> None:
    """Forced failure must be seen on every gate; unchanged code served by the hook must stay green."""
    config, gate_ids = ex.config, baseline.gate_ids
    timeout = _timeout(config, baseline, gate_ids)
    sources = tuple(
        (rel, (config.root / rel).read_text())
        for rel in project_files(config)
        if rel.endswith(".py") and any(rel.startswith(r.rstrip("/") + "/") or rel == r for r in config.source_roots)
    )
    jobs = [Job("_forced-fail", gate_ids, timeout, force_fail=True), Job("_noop", gate_ids, timeout, sources)]
    progress.phase("self-check", len(jobs))
    runs, interrupted = ex.run(jobs, ex.config.num_jobs, lambda r: progress.advance(r.key.lstrip("_")))
    if interrupted:
        raise KeyboardInterrupt
    forced, noop = runs
    for run in (forced, noop):
        if run.state != "done":
            raise HarnessError(f"self-check {run.key.lstrip('_')} {run.state}: {run.reason}")
    unseen = [o.gate_id for o in forced.outcomes if o.outcome is not Outcome.ASSERTION]
    if unseen or len(forced.outcomes) != len(gate_ids):
        raise HarnessError(f"the harness did not see a forced failure in {', '.join(unseen) or 'some gates'}")
    red = [o for o in noop.outcomes if o.outcome.is_red]
    if red:
        raise BaselineError(
            f"gate {red[0].gate_id} is flaky: green in the baseline, red ({_why(red[0])}) on a second unmutated run"
        )


def _verdict(mutation: Mutation, applied: Applied, ran: tuple[str, ...], run: JobResult) -> MutationResult:
    duration_s = round(run.duration_s, 3)
    if run.state == "timeout":
        return MutationResult(mutation.name, Status.TIMEOUT, (), ran, duration_s, run.reason)
    if run.state == "crashed":
        return MutationResult(mutation.name, Status.CRASHED, (), ran, duration_s, run.reason)
    killed_by = tuple(o.gate_id for o in run.outcomes if o.outcome.is_red)
    status = Status.KILLED if killed_by else Status.SURVIVED
    reason = ""
    if not killed_by and applied.file not in run.loaded:
        reason = f"the gates never imported {applied.file}"
    return MutationResult(mutation.name, status, killed_by, ran, round(run.duration_s, 3), reason, run.outcomes)


def run_verify(
    config: ProjectConfig,
    mutations: Mapping[str, Mutation],
    options: RunOptions = RunOptions(),
    progress: Progress | None = None,
) -> RunReport:
    """The whole run. Raises BaselineError/HarnessError (exit 3) and SelectionError (exit 2)."""
    progress = progress or _Silent()
    chosen = select(mutations, options)
    unknown_required = sorted(set(config.required or ()) - set(mutations))
    if unknown_required:
        raise SelectionError(f"[tool.dflash] required names unknown mutations: {', '.join(unknown_required)}")
    changed = cache_mod.changed_files(config.root, options.changed_since) if options.changed_since else None
    cache = cache_mod.ResultCache(config.root, options.use_cache)
    tree = cache_mod.tree_digest(config)
    results: dict[str, MutationResult] = {}
    jobs: list[Job] = []
    pending: dict[str, tuple[Mutation, Applied, str, tuple[str, ...]]] = {}
    with Executor(config) as ex:
        baseline, coverage = _baseline(ex, cache, tree, progress)
        _self_check(ex, baseline, progress)
        coverage_map = CoverageMap.from_json(coverage, baseline.gate_ids)
        for mutation in chosen:
            key = cache.key(tree, mutation, options.all_gates)
            applied = apply_mutation(mutation, config.root)
            if isinstance(applied, Stale):
                results[mutation.name] = MutationResult(mutation.name, Status.STALE, reason=applied.reason)
                continue
            gate_ids = (
                baseline.gate_ids
                if options.all_gates
                else coverage_map.gates_reaching(applied.file, anchor_lines(applied))
            )
            if (
                changed is not None
                and mutation.file not in changed
                and not {g.partition("::")[0] for g in gate_ids} & changed
            ):
                reason = f"neither {mutation.file} nor its gates changed since {options.changed_since}"
                results[mutation.name] = MutationResult(mutation.name, Status.SKIPPED, reason=reason)
            elif not gate_ids:
                reason = "no gate reaches the mutated lines"
                results[mutation.name] = MutationResult(mutation.name, Status.SURVIVED, reason=reason)
            elif (hit := cache.get(key)) is not None:
                results[mutation.name] = hit
            else:
                timeout = _timeout(config, baseline, gate_ids)
                jobs.append(Job(mutation.name, gate_ids, timeout, ((applied.file, applied.mutated),)))
                pending[mutation.name] = (mutation, applied, key, gate_ids)
        progress.phase("mutations", len(jobs))
        runs, interrupted = ex.run(jobs, options.jobs or config.num_jobs, lambda r: progress.advance(r.key))
    for run in runs:
        mutation, applied, key, gate_ids = pending[run.key]
        results[run.key] = _verdict(mutation, applied, gate_ids, run)
        cache.put(key, results[run.key])
    names = [m.name for m in chosen if m.name in results]
    required = config.required if config.required is not None else tuple(names)
    return RunReport(
        baseline=baseline,
        mutations=tuple(results[n] for n in names),
        required=tuple(n for n in required if n in results),
        pins=tuple((m.name, m.expect_killed_by) for m in chosen if m.expect_killed_by),
        shard=str(options.shard) if options.shard else "",
        interrupted=interrupted,
    )
