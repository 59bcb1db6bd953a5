"""The runs on the unmutated tree that make every verdict trustworthy: the baseline, the harness self-check
and the pristine re-runs that expose flaky gates.

The baseline runs every gate once under coverage.py and times it, shared by one child per worker, with every
source file served unchanged through the import hook that serves the mutants; a red gate stops the run, after
re-runs tell red from flaky, from a gate the hook changes and from one that needs other gates run before it.
The self-check's forced failure runs beside it, in the same batch of children, and proves the harness can see
a failure: it must turn every gate red by assertion. After the mutations, the gates that turned red are re-run
on the pristine tree; one red there is flaky, and its kills are not counted. `check_baseline` runs the baseline
and the self-check once for `dflash init` (`verify.config.adopt` writes the table it checks). Returns records;
never prints.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from verify.config.project import project_files
from verify.config.settings import ConfigError, ProjectConfig
from verify.report.decode import baseline_from_dict
from verify.report.verdict import Baseline, BaselineStatus, GateOutcome, Outcome
from verify.run.execution.jobs import Job, JobExecutor, JobResult, JobState
from verify.run.phases import cache as cache_mod
from verify.run.phases.reuse import Reuse, combine, fingerprint, plan_reuse

__all__ = [
    "BaselineCheck",
    "BaselineError",
    "HarnessError",
    "Progress",
    "Silent",
    "budget",
    "check_baseline",
    "flake_jobs",
    "flaky_in",
    "run_pristine",
]


class BaselineError(Exception):
    """A gate is red or flaky on unmutated code, or no gate was selected (CLI exit code 3)."""


class HarnessError(Exception):
    """The harness cannot see a forced failure, or breaks unmutated code (CLI exit code 3)."""


class Progress(Protocol):
    def phase(self, name: str, total: int) -> None: ...
    def advance(self, label: str) -> None: ...


class Silent:
    """A `Progress` that reports nothing (a library caller's default)."""

    def phase(self, name: str, total: int) -> None:
        pass

    def advance(self, label: str) -> None:
        pass


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
        if rel.endswith(".py") and config.is_source(rel)
    )


def run_pristine(
    ex: JobExecutor,
    cache: cache_mod.ResultCache,
    tree: str,
    progress: Progress,
    num_jobs: int,
    files: Mapping[str, bytes] | None = None,
) -> tuple[Baseline, dict[str, Any], str]:
    """The baseline and the harness self-check's forced failure, in one batch of children (neither needs the
    other's result to run, only to be judged). With the tree's `files` and an earlier tree's baseline cached,
    only the gates a change can have reached run (`verify.run.phases.reuse`). Returns (baseline, coverage
    data, self-check status: "passed" or "cached"); raises BaselineError or HarnessError."""
    config = ex.config
    cached = cache.get_baseline(tree)
    checked = cache.get_self_check(tree)
    reuse = _reusable(config, cache, files) if cached is None and files is not None else None
    targets = reuse.targets if reuse is not None else ()
    nothing_reached = reuse is not None and not targets
    jobs = []
    if not checked and not nothing_reached:
        # Before the baseline is known there is no per-gate budget: each may take as long as a baseline.
        jobs.append(Job("_forced-fail", targets, config.baseline_timeout_s, force_fail=True, share_bytecode=True))
    if cached is None and not nothing_reached:
        # One run of the gates shared by a child per worker (each gate file to whichever claims it first), with
        # every source file served unchanged through the import hook, as each mutant's code is served: a gate
        # the hook itself changes is red here, never later as a kill.
        sources, parts = _sources(config), max(1, num_jobs)
        jobs += [
            Job(
                f"_baseline {k + 1}/{parts}",
                targets,
                config.baseline_timeout_s,
                sources,
                measure_coverage=True,
                claims="baseline",
            )
            for k in range(parts)
        ]
    name = "baseline and self-check"
    if reuse is not None:
        name += f" ({len(targets)} of {len(reuse.baseline.gates)} gate ids or files: the rest ran unchanged code)"
    progress.phase(name, max(1, len(jobs)))
    if not jobs:
        progress.advance("baseline and self-check (cached)")
    runs = {run.key: run for run in ex.run(jobs, num_jobs, lambda r: progress.advance(r.key.lstrip("_")))}
    if changed := [run for run in runs.values() if run.tampered]:
        # The unmutated gates (a conftest, a plugin) change what the harness checks: no child could be trusted.
        raise HarnessError(f"the unmutated gates changed the harness's reporting path: {changed[0].tampered}")
    ran = None
    if cached is not None:
        baseline, coverage = baseline_from_dict(cached["baseline"]), cached["coverage"]
    elif reuse is not None:
        ran, coverage = Baseline(BaselineStatus.GREEN, ()), {}
        if not nothing_reached:
            merged = _merge([run for key, run in runs.items() if key.startswith("_baseline")])
            ran, coverage = _judge_baseline(ex, merged, num_jobs, alone=False)
        baseline, coverage = combine(reuse, ran.gates, tuple(o.gate_id for o in ran.gates), coverage)
        _put(cache, config, tree, files, baseline, coverage)
    else:
        merged = _merge([run for key, run in runs.items() if key.startswith("_baseline")])
        baseline, coverage = _judge_baseline(ex, merged, num_jobs)
        _put(cache, config, tree, files, baseline, coverage)
    if checked:
        return baseline, coverage, "cached"
    if not nothing_reached:
        # With an earlier tree's baseline, the forced failure ran only where the change reached; the earlier
        # tree's own self-check passed for every other gate (`_reusable` takes no other).
        _judge_self_check(ran or baseline, runs["_forced-fail"])
    cache.put_self_check(tree)
    return baseline, coverage, "passed"


def _reusable(config: ProjectConfig, cache: cache_mod.ResultCache, files: Mapping[str, bytes]) -> Reuse | None:
    """The newest earlier baseline (same harness, settings and interpreter; its self-check passed) that can
    stand for this tree's, with the gates to re-run; None: a whole baseline."""
    for earlier in cache.earlier_baselines(cache_mod.setup_digest(config)):
        if cache.get_self_check(str(earlier.get("tree", ""))) and (reuse := plan_reuse(config, files, earlier)):
            return reuse
    return None


def _put(
    cache: cache_mod.ResultCache,
    config: ProjectConfig,
    tree: str,
    files: Mapping[str, bytes] | None,
    baseline: Baseline,
    coverage: dict[str, Any],
) -> None:
    entry = {"baseline": dataclasses.asdict(baseline), "coverage": coverage, "tree": tree}
    if files is not None:  # what a later tree needs to reuse this baseline
        entry |= {"setup": cache_mod.setup_digest(config), **fingerprint(config, files, coverage)}
    cache.put_baseline(tree, entry)


def _merge(parts: list[JobResult]) -> JobResult:
    """The children that shared one run of the gates, as one run: their outcomes in collection order, their
    coverage joined (a line any of them saw, with every context it was seen in)."""
    if len(parts) == 1:
        return parts[0]
    order = max((part.order for part in parts), key=len)  # every child collected the same gates
    index = {gate_id: i for i, gate_id in enumerate(order)}
    # One outcome per gate (each ran in one child, unless a pytest without a setup stack made every child run all).
    unique = {o.gate_id: o for part in reversed(parts) for o in part.outcomes}
    outcomes = sorted(unique.values(), key=lambda o: index.get(o.gate_id, len(index)))
    lines: dict[str, dict[str, list[str]]] = {}
    fixtures: dict[str, list[str]] = {}
    for part in parts:
        coverage = part.coverage or {}
        fixtures.update(coverage.get("fixtures", {}))
        for file, by_line in coverage.get("lines", {}).items():
            merged = lines.setdefault(file, {})
            for line, contexts in by_line.items():
                merged[line] = sorted(set(merged.get(line, ())) | set(contexts))
    failed = [part for part in parts if part.state != JobState.DONE]
    return JobResult(
        "_baseline",
        failed[0].state if failed else JobState.DONE,
        max(part.duration_s for part in parts),
        tuple(outcomes),
        "; ".join(f"{part.key.lstrip('_')}: {part.reason}" for part in (failed or parts) if part.reason),
        max(part.pytest_exit for part in parts),
        tuple(sorted({file for part in parts for file in part.loaded})),
        tuple(dict.fromkeys(error for part in parts for error in part.collect_errors)),
        {"lines": lines, "fixtures": fixtures},
        order,
    )


def _judge_baseline(
    ex: JobExecutor, run: JobResult, num_jobs: int, alone: bool = True
) -> tuple[Baseline, dict[str, Any]]:
    """The baseline a green run of the gates gives; `alone`: it ran every gate, so it must have run one."""
    config = ex.config
    if run.state != JobState.DONE:
        raise BaselineError(f"baseline {run.state}: {run.reason}")
    if run.collect_errors:
        raise BaselineError(f"gates fail to collect: {', '.join(f'{n} ({why})' for n, why in run.collect_errors)}")
    # A gate that skips itself here (a gpu gate on a CPU machine) is not one of this machine's gates.
    ran = [o for o in run.outcomes if not (o.outcome is Outcome.NOT_RUN and o.exc_type == "Skipped")]
    red = [o for o in ran if o.outcome is not Outcome.PASSED]
    if red:
        raise _red_baseline(ex, red[0], num_jobs)
    missing = [gate_id for gate_id in run.order if gate_id not in {o.gate_id for o in run.outcomes}]
    if missing:  # collected, and neither run nor skipped: no mutant may be judged without it
        raise BaselineError(
            f"gate {missing[0]} was collected but never ran in the baseline (pytest exit {run.pytest_exit})"
            + (f", nor did {len(missing) - 1} more" if len(missing) > 1 else "")
        )
    if run.pytest_exit in (3, 4):  # pytest refused the session (a plugin, an option): that, not "no gate"
        raise BaselineError(f"the baseline's pytest could not run the gates: {run.reason}")
    baseline = Baseline(BaselineStatus.GREEN, tuple(ran))
    if alone and not baseline.gates:
        where = f"no test under {', '.join(config.gates)}"
        raise BaselineError(
            f"no gate selected: {where} carries the pytest marker {config.gate_marker!r} ([tool.dflash] gates and "
            f"gate_marker; pytest exit {run.pytest_exit})"
            if config.gate_marker
            else f"no gate selected: {where} was collected ([tool.dflash] gates and exclude; pytest exit "
            f"{run.pytest_exit})"
        )
    return baseline, run.coverage or {}


def _red_baseline(ex: JobExecutor, red: GateOutcome, num_jobs: int) -> Exception:
    """A gate red in the baseline, run again alone twice at once: from the files, and through the import hook
    as the baseline ran it. Green through the hook: flaky. Green only from the files: the hook changes what
    the gate sees, so no mutant can be judged by it (a harness error). Red both ways: one more run of every gate
    in one child tells a gate that needs others run before it (green there) from a red one."""
    config = ex.config
    state = "not run" if red.outcome is Outcome.NOT_RUN else f"red ({red.outcome})"
    gate, sources = (red.gate_id,), _sources(config)
    timeout = config.baseline_timeout_s
    plain, hooked = ex.run([Job("_recheck", gate, timeout), Job("_recheck-hooked", gate, timeout, sources)], num_jobs)

    def green(run: JobResult) -> bool:
        return any(o.gate_id == red.gate_id and o.outcome is Outcome.PASSED for o in run.outcomes)

    if green(hooked):
        return BaselineError(f"gate {red.gate_id} is flaky: {state} in the baseline ({_why(red)}), green on a re-run")
    if green(plain):
        return HarnessError(
            f"gate {red.gate_id} is {state} whenever the project's sources are served through the import hook, as "
            f"every mutant's are ({_why(red)}), and green when they are imported from the files: no mutant can be "
            "judged by it (does it read how its modules were loaded?)"
        )
    [together] = ex.run([Job("_recheck-together", (), timeout, sources)], 1)
    if green(together):
        return BaselineError(
            f"gate {red.gate_id} depends on other gates: {state} when run without some of them ({_why(red)}), green "
            "in one run of every gate. Each mutant runs only the gates that reach it, so a gate must pass on its own "
            "(state left by another gate's module or session fixture?)"
        )
    return BaselineError(f"gate {red.gate_id} is {state} on unmutated code ({_why(red)}), also when re-run alone")


def _judge_self_check(baseline: Baseline, forced: JobResult) -> None:
    """A forced failure must be seen on every baseline gate. (The other half, that unchanged code served by the
    import hook keeps every gate green, is the baseline's own run through the hook.)"""
    if forced.state != JobState.DONE:
        raise HarnessError(f"self-check {forced.key.lstrip('_')} {forced.state}: {forced.reason}")
    seen = {o.gate_id for o in forced.outcomes if o.outcome is Outcome.ASSERTION}
    unseen = [g for g in baseline.gate_ids if g not in seen]
    if unseen:
        raise HarnessError(
            f"the harness did not see a forced failure in {', '.join(unseen[:3])}"
            + (f" and {len(unseen) - 3} more" if len(unseen) > 3 else "")
            + " (a plugin or conftest hook that turns failures into passes or skips?)"
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


def flake_jobs(config: ProjectConfig, baseline: Baseline, gate_ids: set[str], num_jobs: int, reruns: int) -> list[Job]:
    """The children that re-run `gate_ids` on the pristine tree `reruns` times (keys "_pristine-..."): each re-run
    split into one slice per worker, slices balanced by baseline time, so the workers finish the re-runs
    together instead of idling while one child runs a whole re-run alone."""
    ordered = tuple(g for g in baseline.gate_ids if g in gate_ids)
    if not ordered or reruns == 0:
        return []
    slices = _balanced(ordered, baseline, max(1, min(num_jobs, len(ordered))))
    return [
        Job(f"_pristine-{i + 1}" + (f".{k + 1}" if len(slices) > 1 else ""), part, budget(config, baseline, part))
        for i in range(reruns)
        for k, part in enumerate(slices)
    ]


def flaky_in(reruns: Iterable[JobResult]) -> dict[str, str]:
    """{gate id: what it did} for each gate red or hung in a pristine re-run (`flake_jobs`' results)."""
    flaky: dict[str, str] = {}
    for run in reruns:
        for outcome in run.outcomes:
            # Red or hung with nothing mutated is flaky; a gate that did not run says nothing either way.
            if outcome.outcome.is_red and outcome.gate_id not in flaky:
                flaky[outcome.gate_id] = f"{outcome.outcome} on the unmutated tree ({_why(outcome)})"[:200]
    return flaky


@dataclass(frozen=True, slots=True)
class BaselineCheck:
    """The adopted configuration run once on the pristine tree: the baseline `dflash verify` starts from."""

    green: bool
    num_gates: int  # gates that ran (a gate that skips itself here is not counted)
    wall_s: float
    message: str = ""  # why it is not green


def check_baseline(root: Path) -> BaselineCheck:
    """Load the written table and run the baseline and the harness self-check once, no cache read or written."""
    from verify.config.catalog import load_mutations
    from verify.config.settings import load_config
    from verify.run.execution.choice import open_executor
    from verify.run.phases.layout_probe import check_sources_imported

    started = time.perf_counter()
    try:
        config = load_config(root)
        load_mutations(config)
        with open_executor(config) as executor:
            num_jobs = config.jobs or executor.default_jobs
            cache = cache_mod.ResultCache(config.root, enabled=False)
            baseline, coverage, _ = run_pristine(executor, cache, "", Silent(), num_jobs)
        check_sources_imported(config, coverage)
    except (ConfigError, BaselineError, HarnessError) as error:
        return BaselineCheck(False, 0, time.perf_counter() - started, str(error))
    return BaselineCheck(True, len(baseline.gates), time.perf_counter() - started)
