"""The verify run: baseline, harness self-check, every selected mutation, then the flake check, in that order
(first-kill mode: then the mutants a flaky gate stopped, on past it).

Each mutation runs in a fresh child against the gates that reach its lines (`verify.run.judge` says when a
second child is needed and what two attempts mean). Every final verdict goes into the cache and the
partial report as it arrives, so an interrupted run loses nothing it finished and the next run resumes.
At the end the user's tree must be byte-identical to what it was at the start (`verify.run.guard`). This
module wires the pieces and returns a `RunReport`; it never prints.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from verify.mutation import Mutation
from verify.report.verdict import Baseline, MutationResult, Outcome, RunReport, Status
from verify.run import cache as cache_mod
from verify.run.apply import Applied, Stale, apply_mutation
from verify.run.checks import BaselineError, HarnessError, Progress, Silent, budget, find_flaky, run_pristine
from verify.run.coverage_map import CoverageMap, anchor_lines
from verify.run.executors import open_executor
from verify.run.guard import TreeGuard
from verify.run.interrupts import interrupt_signal, signals_as_interrupts
from verify.run.jobs import Job, JobExecutor, JobResult
from verify.run.judge import needs_second_attempt, resolve, verdict, voided
from verify.run.order import expected_s, kill_order, pinned, pins_first
from verify.run.probe import check_sources_imported
from verify.run.selection import RunOptions, SelectionError, Shard, select
from verify.run.settings import ProjectConfig

__all__ = ["BaselineError", "HarnessError", "Progress", "RunOptions", "SelectionError", "Shard", "run_verify"]


@dataclass
class _Planned:
    mutation: Mutation
    applied: Applied
    key: str
    gate_ids: tuple[str, ...]
    timeout_s: float
    expected_s: float  # what the child should take, from the baseline: the slowest are started first
    first: JobResult | None = None


@dataclass
class _Run:
    """What a run has established so far; `report()` can be called at any moment (partial reports)."""

    config: ProjectConfig
    chosen: list[Mutation]
    options: RunOptions
    cache: cache_mod.ResultCache
    on_report: Callable[[RunReport], None]
    results: dict[str, MutationResult] = dataclasses.field(default_factory=dict)
    baseline: Baseline = Baseline("pending", ())
    self_check: str = ""
    flaky: dict[str, str] = dataclasses.field(default_factory=dict)
    interrupted_by: str = ""
    harness_errors: tuple[str, ...] = ()
    confinement: str = ""  # what keeps children out of the user's files (verify.run.confine)
    plans: dict[str, _Planned] = dataclasses.field(default_factory=dict)  # every mutation a gate reaches
    num_jobs: int = 1  # children at once, in every phase

    def add(self, result: MutationResult, key: str = "", *, emit: bool = True) -> None:
        """Record a final verdict (cached under `key` when given); `emit` hands the partial report on at once."""
        self.results[result.name] = result
        if key:
            self.cache.put(key, result)
        if emit:
            self.on_report(self.report())

    def report(self) -> RunReport:
        names = [m.name for m in self.chosen if m.name in self.results]
        config = self.config
        required = config.required if config.required is not None else tuple(names)
        return RunReport(
            baseline=self.baseline,
            mutations=tuple(self.results[n] for n in names),
            required=tuple(n for n in required if n in self.results),
            pins=tuple((m.name, m.expect_killed_by) for m in self.chosen if m.expect_killed_by),
            shard=str(self.options.shard) if self.options.shard else "",
            interrupted=bool(self.interrupted_by),
            interrupted_by=self.interrupted_by,
            expected_survivors=tuple((m.name, m.reason) for m in self.chosen if m.expect == "survives"),
            flaky_gates=tuple(sorted(self.flaky.items())),
            self_check=self.self_check,
            harness_errors=self.harness_errors,
            first_kill=self.options.first_kill,
            confinement=self.confinement,
            jobs=self.num_jobs,
        )


def _plan(run: _Run, coverage: CoverageMap, tree: str, changed: set[str] | None) -> list[_Planned]:
    planned = []
    baseline, options = run.baseline, run.options
    for mutation in run.chosen:
        key = run.cache.key(tree, mutation, options.all_gates, options.first_kill)
        full_key = run.cache.key(tree, mutation, options.all_gates)
        applied = apply_mutation(mutation, run.config.root)
        if isinstance(applied, Stale):
            run.add(MutationResult(mutation.name, Status.STALE, reason=applied.reason), emit=False)
            continue
        gate_ids = (
            baseline.gate_ids if options.all_gates else coverage.gates_reaching(applied.file, anchor_lines(applied))
        )
        if (
            changed is not None
            and mutation.file not in changed
            and not {g.partition("::")[0] for g in gate_ids} & changed
        ):
            reason = f"neither {mutation.file} nor its gates changed since {options.changed_since}"
            run.add(MutationResult(mutation.name, Status.SKIPPED, reason=reason), emit=False)
        elif not gate_ids:
            unreached = MutationResult(mutation.name, Status.SURVIVED, reason="no gate reaches the mutated lines")
            run.add(unreached, key, emit=False)
        else:
            timeout = budget(run.config, baseline, gate_ids)
            pins = mutation.expect_killed_by
            gate_ids = kill_order(gate_ids, pins, baseline) if options.first_kill else pins_first(gate_ids, pins)
            expected = expected_s(gate_ids, mutation.expect_killed_by, baseline, options.first_kill)
            run.plans[mutation.name] = plan = _Planned(mutation, applied, key, gate_ids, timeout, expected)
            if (hit := run.cache.get(key) or run.cache.get(full_key)) is not None:
                run.add(hit, emit=False)
            else:
                planned.append(plan)
    run.on_report(run.report())  # nothing ran for those: one partial report for all of them
    # The slowest first: a long mutant started last would leave every other worker idle at the end.
    return sorted(planned, key=lambda p: -p.expected_s)


def _job(run: _Run, item: _Planned, gate_ids: tuple[str, ...], timeout_s: float, stretch: float = 1.0) -> Job:
    """A child running `gate_ids` against the mutant; in first-kill mode it stops at the first kill once the
    pinned gates among them ran. Each gate has its own deadline, as a job has its budget (`budget` of that gate
    alone, times `stretch`): a hanging gate ends at its own, and the child moves on, where a job's budget (the
    sum over its gates) would have let it hang for every gate's share."""
    stop_after = pinned(gate_ids, item.mutation.expect_killed_by) if run.options.first_kill else None
    mutated = ((item.applied.file, item.applied.mutated),)
    deadlines = tuple((g, stretch * budget(run.config, run.baseline, (g,))) for g in gate_ids)
    return Job(item.mutation.name, gate_ids, timeout_s, mutated, stop_after=stop_after, deadlines=deadlines)


def _confirm_stretch(first: JobResult) -> float:
    """A crash is confirmed with the same budget, a hang with twice it (the job's and each gate's)."""
    return 2.0 if any(o.outcome is Outcome.TIMEOUT for o in first.outcomes) else 1.0


def _judge(run: _Run, item: _Planned, second: JobResult | None) -> MutationResult:
    assert item.first is not None
    outcomes = resolve(item.first.outcomes, second.outcomes if second else None)
    loaded = set(item.first.loaded) | set(second.loaded if second else ())
    duration = item.first.duration_s + (second.duration_s if second else 0.0)
    never = item.applied.file if item.applied.file not in loaded else ""
    flaky = frozenset(run.flaky)
    # First-kill mode: the gates that ran are those with an outcome (the rest were skipped after the kill).
    ran = tuple(o.gate_id for o in outcomes) if run.options.first_kill else item.gate_ids
    return verdict(item.mutation.name, outcomes, ran, duration, 2 if second else 1, flaky, never)


def _mutations(run: _Run, ex: JobExecutor, planned: list[_Planned], progress: Progress) -> None:
    by_key = {p.mutation.name: p for p in planned}
    num_jobs = run.num_jobs
    again: list[_Planned] = []

    def first_done(result: JobResult) -> None:
        item = by_key[result.key]
        item.first = result
        progress.advance(result.key)
        if needs_second_attempt(result.outcomes):
            again.append(item)
        else:
            run.add(_judge(run, item, None), item.key)

    progress.phase("mutations", len(planned))
    ex.run([_job(run, p, p.gate_ids, p.timeout_s) for p in planned], num_jobs, first_done)
    if not again:
        return

    def second_done(result: JobResult) -> None:
        item = by_key[result.key]
        progress.advance(f"{result.key} (confirmed)")
        run.add(_judge(run, item, result), item.key)

    progress.phase("confirming", len(again))
    jobs = []
    for item in again:
        assert item.first is not None
        stretch = _confirm_stretch(item.first)
        jobs.append(_job(run, item, item.gate_ids, item.timeout_s * stretch, stretch))
    ex.run(jobs, num_jobs, second_done)


def _flake_check(run: _Run, ex: JobExecutor, tree: str, progress: Progress) -> None:
    """Re-runs on the pristine tree every gate that turned any result red, fresh or from the cache, unless an
    earlier run's flake check already re-ran it on this tree (its finding is kept in the cache: a kill cached
    before its gate was found flaky must not come back as a kill on the next run). Rejudges every result a
    flaky gate turned red."""
    known = run.cache.get_gate_checks(tree)
    red = {o.gate_id for result in run.results.values() for o in result.outcomes if o.outcome.is_red}
    unchecked = red - set(known)
    found = find_flaky(ex, run.baseline, unchecked, run.num_jobs, progress)
    checked = {gate_id: found.get(gate_id, "") for gate_id in unchecked}
    run.cache.put_gate_checks(tree, checked)  # only once every re-run finished: an interrupt leaves it unchecked
    run.flaky = {gate_id: why for gate_id, why in {**known, **checked}.items() if why and gate_id in red}
    if not run.flaky:
        return
    flaky = frozenset(run.flaky)
    for name, result in list(run.results.items()):
        if any(o.gate_id in flaky for o in result.outcomes):
            rejudged = verdict(result.name, result.outcomes, result.ran, result.duration_s, result.attempts, flaky)
            # Never cached: a flaky gate makes this tree's verdicts provisional.
            run.results[name] = dataclasses.replace(rejudged, cached=result.cached)
    run.on_report(run.report())


def _past_flaky(run: _Run, ex: JobExecutor, progress: Progress) -> None:
    """First-kill mode: a mutant that stopped at a gate later found flaky was judged on the gates before it
    alone, so its "survived" would be the flaky gate's doing. It runs again on the gates it never reached (the
    flaky ones left out), a crash or hang confirmed as in the mutation phase."""
    if not run.options.first_kill or not run.flaky:
        return
    flaky = frozenset(run.flaky)
    redo: dict[str, tuple[_Planned, tuple[str, ...]]] = {}
    for name, result in run.results.items():
        plan = run.plans.get(name)
        if plan is None or result.status is not Status.SURVIVED:
            continue
        if not any(o.gate_id in flaky and o.outcome.is_red for o in result.outcomes):
            continue
        done = {o.gate_id for o in result.outcomes}
        rest = tuple(g for g in plan.gate_ids if g not in flaky and g not in done)
        if rest:
            redo[name] = (plan, rest)
    if not redo:
        return

    num_jobs = run.num_jobs
    timeouts = {name: budget(run.config, run.baseline, rest) for name, (_, rest) in redo.items()}
    progress.phase("past flaky gates", len(redo))
    jobs = [_job(run, plan, rest, timeouts[name]) for name, (plan, rest) in redo.items()]
    first = {r.key: r for r in ex.run(jobs, num_jobs, lambda r: progress.advance(r.key))}
    # A crash or hang is confirmed by a second child before it counts, as in the mutation phase.
    again = [_job(run, redo[name][0], redo[name][1], timeouts[name] * (k := _confirm_stretch(result)), k)
             for name, result in first.items() if needs_second_attempt(result.outcomes)]  # fmt: skip
    second = {r.key: r for r in ex.run(again, num_jobs)} if again else {}
    for name, job in first.items():
        old = run.results[name]
        later = resolve(job.outcomes, second[name].outcomes if name in second else None)
        outcomes = old.outcomes + later
        duration = old.duration_s + job.duration_s + (second[name].duration_s if name in second else 0.0)
        attempts = old.attempts + 1 + (name in second)
        rejudged = verdict(name, outcomes, tuple(o.gate_id for o in outcomes), duration, attempts, flaky)
        run.results[name] = rejudged  # never cached: a flaky gate makes this tree's verdicts provisional
    run.on_report(run.report())


def run_verify(
    config: ProjectConfig,
    mutations: Mapping[str, Mutation],
    options: RunOptions | None = None,
    progress: Progress | None = None,
    on_report: Callable[[RunReport], None] | None = None,
) -> RunReport:
    """The whole run. Raises BaselineError/HarnessError (exit 3) and SelectionError (exit 2); an interrupt
    during the mutations returns the partial report (`interrupted_by` says which signal)."""
    progress, options = progress or Silent(), options or RunOptions()
    chosen = select(mutations, options, config)
    changed = cache_mod.changed_files(config.root, options.changed_since) if options.changed_since else None
    cache = cache_mod.ResultCache(config.root, options.use_cache)
    tree = cache_mod.tree_digest(config)
    run = _Run(config, chosen, options, cache, on_report or (lambda report: None))
    guard = TreeGuard(config.root, options.outputs, cache_mod.CACHE_DIR)  # the inventory before any child
    run.confinement = guard.confinement.describe()
    with guard, signals_as_interrupts(), open_executor(config, options.ray_address) as executor:
        ex = guard.watch(executor)
        run.num_jobs = options.jobs or config.jobs or executor.default_jobs
        run.baseline, coverage, run.self_check = run_pristine(ex, cache, tree, progress, run.num_jobs)
        check_sources_imported(config, coverage)  # a layout the copy cannot import is an error, not survivals
        coverage_map = CoverageMap.from_json(coverage, run.baseline.gate_ids)
        planned = _plan(run, coverage_map, tree, changed)
        try:
            _mutations(run, ex, planned, progress)
            _flake_check(run, ex, tree, progress)
            _past_flaky(run, ex, progress)
        except KeyboardInterrupt as error:
            run.interrupted_by = interrupt_signal(error)
    if not run.interrupted_by and cache_mod.tree_digest(config) != tree:
        run.harness_errors = ("the project's files changed during the run; its verdicts may mix two trees",)
    run.harness_errors += guard.errors
    for name, paths in guard.culprits.items():  # a mutant that changed the user's files gets no verdict
        if name in run.results and (plan := run.plans.get(name)) is not None:
            run.results[name] = voided(run.results[name], paths)
            run.cache.forget(plan.key)
    report = run.report()
    run.on_report(report)
    return report
