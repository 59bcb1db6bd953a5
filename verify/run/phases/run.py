"""The verify run, wired: the baseline and harness self-check, the plan (which gates reach each mutation, in what
order, with what budget; cache hits and stale anchors settled at once), then the verdict sequence
(`verify.run.phases.verdicts`: judge, confirmation, chance, flake check, past flaky gates, voiding).

Every final verdict goes into the cache and the partial report as it arrives: a run interrupted, or ended by its
executor's death (exit code 4), loses nothing it finished, and the next run resumes. At the end the user's tree
must be byte-identical to what it was at the start (`verify.sandbox.guard`). Returns a `RunReport`; never
prints.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from verify.config.selection import RunOptions, SelectionError, Shard, select
from verify.config.settings import ProjectConfig
from verify.mutation import Mutation
from verify.mutation.apply import Stale, apply_mutation
from verify.report.verdict import MutationResult, RunReport, Status
from verify.run.execution.choice import open_executor
from verify.run.execution.interrupts import interrupt_signal, signals_as_interrupts
from verify.run.execution.jobs import ExecutorLost
from verify.run.phases import cache as cache_mod
from verify.run.phases.coverage_map import CoverageMap, anchor_lines
from verify.run.phases.layout_probe import check_sources_imported
from verify.run.phases.order import expected_s, kill_order, pins_first
from verify.run.phases.pristine import BaselineError, HarnessError, Progress, Silent, budget, run_pristine
from verify.run.phases.state import Planned, RunState
from verify.run.phases.verdicts import settle, void
from verify.sandbox import namespaces
from verify.sandbox.guard import TreeGuard

__all__ = ["BaselineError", "HarnessError", "Progress", "RunOptions", "SelectionError", "Shard", "run_verify"]


def _plan(run: RunState, coverage: CoverageMap, tree: str, changed: set[str] | None) -> list[Planned]:
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
            run.plans[mutation.name] = plan = Planned(mutation, applied, key, gate_ids, timeout, expected)
            if (hit := run.cache.get(key) or run.cache.get(full_key)) is not None:
                run.add(hit, emit=False)
            else:
                planned.append(plan)
    run.on_report(run.report())  # nothing ran for those: one partial report for all of them
    # The slowest first: a long mutant started last would leave every other worker idle at the end.
    return sorted(planned, key=lambda p: -p.expected_s)


def _tree_changed(config: ProjectConfig, options: RunOptions, files: dict[str, bytes], tree: str) -> tuple[str, ...]:
    """The harness error when what the gates ran against changed during the run, naming every file; () if not."""
    now = cache_mod.tree_files(config, options.outputs)
    if changes := cache_mod.tree_changes(files, now):
        return (f"the project's files changed during the run: {'; '.join(changes)}; its verdicts may mix two trees",)
    if cache_mod.tree_digest(config, files=now) != tree:
        return ("the harness's code or the interpreter's packages changed during the run (no project file did)",)
    return ()


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
    files = cache_mod.tree_files(config, options.outputs)  # read again at the end: a change is named, file by file
    tree = cache_mod.tree_digest(config, files=files)
    run = RunState(config, chosen, options, cache, on_report or (lambda report: None))
    # The inventory before any child, taken aside while the executor starts; `watch` waits for it.
    guard = TreeGuard(config.root, options.outputs, cache_mod.CACHE_DIR, aside=True)
    run.confinement = guard.confinement.describe()
    if config.executor != "ray":  # what children forked here cannot see; a cluster's nodes are probed there
        run.confinement += f"; {namespaces.probe().describe()}"
    with guard, signals_as_interrupts(), open_executor(config, options.ray_address) as executor:
        run.nodes = executor.nodes  # on a cluster the children's confinement is each node's
        run.ceilings = executor.ceilings
        ex = guard.watch(executor)
        run.num_jobs = options.jobs or config.jobs or executor.default_jobs
        run.baseline, coverage, run.self_check = run_pristine(ex, cache, tree, progress, run.num_jobs, files)
        check_sources_imported(config, coverage)  # a layout the copy cannot import is an error, not survivals
        coverage_map = CoverageMap.from_json(coverage, run.baseline.gate_ids)
        planned = _plan(run, coverage_map, tree, changed)
        try:
            settle(run, ex, planned, tree, progress)  # the verdict sequence (verify.run.phases.verdicts)
        except KeyboardInterrupt as error:
            run.interrupted_by = interrupt_signal(error)
        except ExecutorLost as error:
            run.lost = f"the run ended early, its executor lost: {error}; verdicts reached are cached: run again"
    if not run.interrupted_by and not run.lost:
        run.harness_errors = _tree_changed(config, options, files, tree)
    run.harness_errors += guard.errors
    void(run, guard.culprits)  # a mutant that changed the user's files gets no verdict
    report = run.report()
    run.on_report(report)
    return report
