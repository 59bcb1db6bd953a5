"""A mutation's verdict, from its first child to the report: the one place that shows the sequence.

The steps, in the order they apply (`settle` runs steps 1 to 5 in this order, 3 and 4 in one batch of children,
since neither needs the other's result to run; `void` is step 6). What each step's children establish, and which
reds need them at all, the corroboration policy decides (`verify.run.phases.corroboration`); this module only
runs the children it asks for, in order:

1. judge: the first child's outcomes make the verdict when they are conclusive: a gate green, or red by its own
   check (`judge.verdict`). Evidence is only what a gate's check said.
2. confirm: a crash, a named invariant, a hang or a gate that did not run is asked again in a fresh child (the
   same budget and deadlines: a hang costs one more gate's deadline). A child that found the harness changed
   under its gates makes the mutant an error at once, naming the change (`judge.tampered`).
3. second seed: a kill by statistical gates alone awaits its killers on an independent gate seed.
4. flaky: the gates that turned a verdict red, but those the policy exempts, are re-run on the pristine tree
   (`flake_reruns` times: 3, 1 with --first-kill); one red there is flaky and is left out of every verdict it
   touched (rejudged, never cached). A gate first red on the second seed is re-run after it.
5. past flaky: in first-kill mode, a survivor whose child stopped at a gate later found flaky was judged on the
   gates before it alone; it runs the gates it never reached.
6. void: a mutant that changed the user's files gets no verdict at all (the tree guard names it).

A verdict is cached only once final (`RunState.add`). Knows children only through `JobExecutor`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from verify.report.verdict import MutationResult, Status
from verify.run.execution.jobs import Job, JobExecutor, JobResult
from verify.run.phases.corroboration import needs_second_attempt
from verify.run.phases.judge import tampered, verdict, voided
from verify.run.phases.order import pinned
from verify.run.phases.pristine import Progress, budget, flake_jobs, flaky_in
from verify.run.phases.state import Planned, RunState

__all__ = ["settle", "void"]


def settle(run: RunState, ex: JobExecutor, planned: list[Planned], tree: str, progress: Progress) -> None:
    """Steps 1 to 5 for every planned mutation, in order; each final verdict is recorded as it is reached."""
    _judge_and_confirm(run, ex, planned, progress)  # 1, 2
    _confirm_kills(run, ex, tree, progress)  # 3 and 4, in one batch of children
    _past_flaky(run, ex, progress)  # 5


def void(run: RunState, culprits: Mapping[str, Sequence[str]]) -> None:
    """Step 6: a mutant that changed the user's files (`culprits`: name -> paths) gets no verdict, and its cache
    entry is forgotten."""
    for name, paths in culprits.items():
        if name in run.results and (plan := run.plans.get(name)) is not None:
            run.results[name] = voided(run.results[name], paths)
            run.cache.forget(plan.key)


def _job(run: RunState, item: Planned, gate_ids: tuple[str, ...], timeout_s: float) -> Job:
    """A child running `gate_ids` against the mutant; in first-kill mode it stops at the first kill once the
    pinned gates among them ran. Each gate has its own deadline, as a job has its budget (`budget` of that gate
    alone): a hanging gate ends at its own, and the child moves on, where a job's budget (the sum over its gates)
    would have let it hang for every gate's share. A confirming child gets the same: a crash or a hang is
    confirmed with the same budget and deadlines, so a hang's confirmation costs one more deadline (the executor
    ends it there however it treats signals, `verify.run.execution.overtime`)."""
    stop_after = pinned(gate_ids, item.mutation.expect_killed_by) if run.options.first_kill else None
    mutated = ((item.applied.file, item.applied.mutated),)
    deadlines = tuple((g, budget(run.config, run.baseline, (g,))) for g in gate_ids)
    return Job(item.mutation.name, gate_ids, timeout_s, mutated, stop_after=stop_after, deadlines=deadlines)


def _verdict_of_attempts(run: RunState, item: Planned, second: JobResult | None) -> MutationResult:
    assert item.first is not None
    outcomes = run.policy.resolve(item.first.outcomes, second.outcomes if second else None)
    loaded = set(item.first.loaded) | set(second.loaded if second else ())
    duration = item.first.duration_s + (second.duration_s if second else 0.0)
    never = item.applied.file if item.applied.file not in loaded else ""
    flaky = frozenset(run.flaky)
    # First-kill mode: the gates that ran are those with an outcome (the rest were skipped after the kill).
    ran = tuple(o.gate_id for o in outcomes) if run.options.first_kill else item.gate_ids
    result = verdict(item.mutation.name, outcomes, ran, duration, 2 if second else 1, flaky, never)
    why = item.first.tampered or (second.tampered if second else "")
    return tampered(result, why) if why else result


def _judge_and_confirm(run: RunState, ex: JobExecutor, planned: list[Planned], progress: Progress) -> None:
    by_key = {p.mutation.name: p for p in planned}
    num_jobs = run.num_jobs
    again: list[Planned] = []

    def first_done(result: JobResult) -> None:
        item = by_key[result.key]
        item.first = result
        progress.advance(result.key)
        if needs_second_attempt(result.outcomes) and not result.tampered:
            again.append(item)
        else:
            run.add(_verdict_of_attempts(run, item, None), item.key)

    # Those decided before any child (not reached by a gate, replayed from the cache, stale) are said, so "0 to run"
    # beside a listed mutation never reads as a mutation forgotten.
    decided = len(run.results)
    progress.phase(f"mutations ({decided} decided without a child)" if decided else "mutations", len(planned))
    ex.run([_job(run, p, p.gate_ids, p.timeout_s) for p in planned], num_jobs, first_done)
    if not again:
        return

    def second_done(result: JobResult) -> None:
        item = by_key[result.key]
        progress.advance(f"{result.key} (confirmed)")
        run.add(_verdict_of_attempts(run, item, result), item.key)

    progress.phase("confirming", len(again))
    ex.run([_job(run, item, item.gate_ids, item.timeout_s) for item in again], num_jobs, second_done)


def _confirm_kills(run: RunState, ex: JobExecutor, tree: str, progress: Progress) -> None:
    """Steps 3 and 4 in one batch of children, since neither needs the other's result to run: the second seed
    of every kill awaiting one, and the flake check's pristine re-runs of the reds the policy calls suspect
    (`Policy.flake_suspects`). A gate first red on the second seed is re-run in a batch of its own after.

    The flake check re-runs a gate unless an earlier run's flake check on this tree already did, as many times
    (its finding is kept in the cache: a kill cached before its gate was found flaky must not come back as a
    kill on the next run). Then every result a flaky gate turned red is rejudged."""
    policy = run.policy
    # The results the second seed runs again (keyed by their names), with the killers it must see red again.
    awaiting = {name: killers for name, result in run.results.items() if (killers := policy.awaiting(result))}
    seeded = [_second_seed_job(run, run.plans[name], run.results[name]) for name in awaiting if name in run.plans]
    reruns = run.config.flake_reruns_for(run.options.first_kill)
    known = run.cache.get_gate_checks(tree, reruns)
    unchecked = policy.flake_suspects(run.results.values(), seed_to_come=True) - set(known)
    pristine = flake_jobs(run.config, run.baseline, unchecked, run.num_jobs, reruns)
    seeded_keys = {job.key for job in seeded}

    def done(result: JobResult) -> None:
        if result.key in seeded_keys:
            progress.advance(f"{result.key} (on gate seed {policy.confirm_seed})")
            _record_second_seed(run, result, awaiting[result.key])
        else:
            progress.advance(result.key.lstrip("_"))

    if seeded or pristine:
        progress.phase("confirming kills" if seeded else "flake check", len(seeded) + len(pristine))
    # Longest first (a pristine slice may take longer than every second seed), so none finishes alone at the end.
    # A second seed's child stops at its first kill: its killers are what it is expected to take.
    expected = {job.key: run.baseline.duration_of(job.gate_ids) for job in pristine}
    for job in seeded:
        expected[job.key] = run.baseline.duration_of(awaiting[job.key])
    batch = sorted([*seeded, *pristine], key=lambda job: -expected[job.key])
    results = [r for r in ex.run(batch, run.num_jobs, done) if r.key not in seeded_keys]
    # Red on the second seed alone (a gate the first child never reached, in first-kill mode): one run, checked now.
    late = policy.flake_suspects(run.results.values(), seed_to_come=False) - set(known) - unchecked
    if late:
        again = flake_jobs(run.config, run.baseline, late, run.num_jobs, reruns)
        progress.phase("flake check", len(again))
        results += ex.run(again, run.num_jobs, lambda result: progress.advance(result.key.lstrip("_")))
    found = flaky_in(results)
    checked = {gate_id: found.get(gate_id, "") for gate_id in unchecked | late}
    run.cache.put_gate_checks(tree, checked, reruns)  # only once every re-run finished: an interrupt leaves it
    red = _red(run)
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


def _second_seed_job(run: RunState, plan: Planned, result: MutationResult) -> Job:
    """The child that runs an awaiting kill's gates again on the policy's independent gate seed (the seed
    travels as job data, so fork and Ray confirm alike)."""
    gate_ids = run.policy.second_seed_gates(result, plan.gate_ids)
    job = _job(run, plan, gate_ids, budget(run.config, run.baseline, gate_ids))
    return dataclasses.replace(job, gate_seed=run.policy.confirm_seed)


def _record_second_seed(run: RunState, again: JobResult, killers: tuple[str, ...]) -> None:
    """The verdict once an awaiting kill's killers ran on the second seed, recorded (and cached once final)."""
    first = run.results[again.key]
    outcomes = run.policy.reseeded(first.outcomes, killers, again.outcomes)
    ran = tuple(dict.fromkeys((*first.ran, *(o.gate_id for o in again.outcomes))))
    duration, attempts = first.duration_s + again.duration_s, first.attempts + 1
    result = verdict(first.name, outcomes, ran, duration, attempts, frozenset(run.flaky))
    run.add(tampered(result, again.tampered) if again.tampered else result, run.plans[again.key].key)


def _red(run: RunState) -> set[str]:
    return {o.gate_id for result in run.results.values() for o in result.outcomes if o.outcome.is_red}


def _past_flaky(run: RunState, ex: JobExecutor, progress: Progress) -> None:
    """First-kill mode: a mutant that stopped at a gate later found flaky was judged on the gates before it
    alone, so its "survived" would be the flaky gate's doing. It runs again on the gates it never reached (the
    flaky ones left out), a crash or hang confirmed as in the mutation phase."""
    if not run.options.first_kill or not run.flaky:
        return
    flaky = frozenset(run.flaky)
    redo: dict[str, tuple[Planned, tuple[str, ...]]] = {}
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
    again = [
        _job(run, redo[name][0], redo[name][1], timeouts[name])
        for name, result in first.items()
        if needs_second_attempt(result.outcomes) and not result.tampered
    ]
    second = {r.key: r for r in ex.run(again, num_jobs)} if again else {}
    for name, job in first.items():
        old = run.results[name]
        later = run.policy.resolve(job.outcomes, second[name].outcomes if name in second else None)
        outcomes = old.outcomes + later
        duration = old.duration_s + job.duration_s + (second[name].duration_s if name in second else 0.0)
        attempts = old.attempts + 1 + (name in second)
        rejudged = verdict(name, outcomes, tuple(o.gate_id for o in outcomes), duration, attempts, flaky)
        why = job.tampered or (second[name].tampered if name in second else "")
        run.results[name] = tampered(rejudged, why) if why else rejudged  # never cached: a flaky gate makes this
        # tree's verdicts provisional
    run.on_report(run.report())
