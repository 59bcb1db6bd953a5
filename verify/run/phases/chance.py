"""The confirmation of kills that statistical gates alone made, in the batch of children after the mutations.

A statistical gate (`[tool.dflash] statistical_gates`) fails by chance at a stated rate (about 1e-3 for
each of this project's exact gates). A mutant that only reshuffles the random stream the gates draw from
meets them all afresh, so with 25 of them its chance of a false kill on one run is about 2.5%. Such a kill is
provisional (never cached, said so in a partial report) until its killers run again on gate seed
CONFIRM_SEED, a stream independent of the first (`verify.seeds`): it stands only if one of them is red by
its check again. A false kill then needs two independent false alarms: about 2.5e-2 x 1e-3 = 2.5e-5 per
mutant. A real bug the killer detects with probability P is confirmed with probability P again.

A gate that states its red's p-value (`verify.run.child.evidence.stated_p_value`) can spare the second seed: a
red with p <= `conclusive_p_value` (default 1e-9) stands at once (`conclusive_reds`). With 25 such gates a false
kill then has probability at most 25 x 1e-9 = 2.5e-8 per mutant, below the two-seed rule's 2.5e-5 even if the
gate's p-value understates its tail a thousandfold (a chi-square approximation's does, a few times, at 2.5e-4).

Knows the run only through the `Run` protocol below (what `verify.run.phases.run` holds), and children only
through the `JobExecutor` interface: the seed travels as job data, so fork and Ray confirm alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from verify.report.verdict import Baseline, GateOutcome, MutationResult, Outcome, Status, matches_gate
from verify.run.config.settings import ProjectConfig
from verify.run.execution.jobs import Job, JobResult
from verify.run.phases.checks import budget
from verify.run.phases.judge import AGAIN, STATISTICAL_UNCONFIRMED, tampered, verdict
from verify.seeds import CONFIRM_SEED

__all__ = [
    "AWAITING",
    "awaits_confirmation",
    "chance_confirmations",
    "chance_killers",
    "conclusive_reason",
    "conclusive_reds",
    "confirm_by_seed",
]

AWAITING = "red only in statistical gates: to be confirmed on an independent gate seed"


class Plan(Protocol):
    key: str  # the result's cache key
    gate_ids: tuple[str, ...]  # the gates its first child was given, in the order it ran them


class Run(Protocol):
    config: ProjectConfig
    baseline: Baseline
    results: dict[str, MutationResult]
    flaky: dict[str, str]
    num_jobs: int

    @property
    def plans(self) -> Mapping[str, Plan]: ...

    def add(self, result: MutationResult, key: str = "", *, emit: bool = True) -> None: ...


def _is_statistical(gate_id: str, statistical: Sequence[str]) -> bool:
    return any(matches_gate(gate_id, pattern) for pattern in statistical)


def _statistical_kill(result: MutationResult, statistical: Sequence[str]) -> bool:
    """A kill every one of whose killers is a statistical gate."""
    if result.status is not Status.KILLED or not result.killed_by or not statistical:
        return False
    return all(_is_statistical(gate_id, statistical) for gate_id in result.killed_by)


def conclusive_reds(result: MutationResult, statistical: Sequence[str], conclusive_p: float | None) -> set[str]:
    """The statistical gates red in `result` by their check with a stated p-value of at most `conclusive_p`
    (None: no p-value is enough alone). Such a red is as strong as two independent reds: a correct engine
    produces it with probability at most `conclusive_p`, whatever makes the gate vary (its seed, the machine's
    timing), so it needs neither a second seed nor a pristine re-run to tell it from chance or a flake."""
    if conclusive_p is None:
        return set()
    return {
        o.gate_id
        for o in result.outcomes
        if o.outcome.is_check and o.p_value is not None and o.p_value <= conclusive_p
        and _is_statistical(o.gate_id, statistical)
    }  # fmt: skip


def chance_killers(
    result: MutationResult, statistical: Sequence[str], conclusive_p: float | None = None
) -> tuple[str, ...]:
    """The killers of a kill that only statistical gates made (node ids or prefixes in `statistical`), or ()
    when the kill needs no confirmation (another kind of verdict, some killer is not statistical, or some
    killer's red is conclusive by its p-value)."""
    if not _statistical_kill(result, statistical):
        return ()
    if conclusive_reds(result, statistical, conclusive_p) & set(result.killed_by):
        return ()
    return result.killed_by


def conclusive_reason(result: MutationResult, statistical: Sequence[str], conclusive_p: float | None) -> str:
    """Why a kill by statistical gates alone stands on its first seed (its killer's p-value), or ""."""
    if not _statistical_kill(result, statistical):
        return ""
    conclusive = conclusive_reds(result, statistical, conclusive_p) & set(result.killed_by)
    stated = [o for o in result.outcomes if o.gate_id in conclusive and o.p_value is not None]
    if not stated:
        return ""
    first = min(stated, key=lambda o: o.p_value or 0.0)
    why = f"statistical kill conclusive on one seed: {first.gate_id} red at p-value {first.p_value:.1e}"
    return f"{why} <= {conclusive_p:.0e}"[:200]


def awaits_confirmation(result: MutationResult, statistical: Sequence[str], conclusive_p: float | None = None) -> bool:
    """A kill by statistical gates alone that no second seed has confirmed yet (none of its killers' outcomes
    says red again) and no killer's p-value made conclusive."""
    killers = set(chance_killers(result, statistical, conclusive_p))
    return bool(killers) and not any(o.gate_id in killers and o.message.startswith(AGAIN) for o in result.outcomes)


def confirm_by_seed(
    first: tuple[GateOutcome, ...], killers: tuple[str, ...], again: tuple[GateOutcome, ...], seed: int
) -> tuple[GateOutcome, ...]:
    """The outcomes once the killers ran again on gate seed `seed`: a killer red by its check again stays red,
    one green there is a chance red (passed, STATISTICAL_UNCONFIRMED, its first red in the message), and one
    that did anything else has no verdict. Gates the first attempt never reached (first-kill mode) that ran
    on the second count as one attempt: conclusive ones stand, any other red is unconfirmed."""
    second = {o.gate_id: o for o in again}
    resolved = []
    for o in first:
        a = second.get(o.gate_id)
        if o.gate_id not in killers:
            resolved.append(o)
        elif a is not None and a.outcome.is_check:
            why = f"{AGAIN} {seed}: {a.message}"
            resolved.append(GateOutcome(o.gate_id, a.outcome, o.duration_s + a.duration_s, a.exc_type, why[:200]))
        elif a is not None and a.outcome is Outcome.PASSED:
            why = f"red on gate seed 0 ({o.exc_type}: {o.message}), green on gate seed {seed}"
            resolved.append(GateOutcome(o.gate_id, Outcome.PASSED, a.duration_s, STATISTICAL_UNCONFIRMED, why[:200]))
        else:
            then = f"{a.outcome} ({a.exc_type})" if a is not None else "not run"
            why = f"red on gate seed 0 ({o.exc_type}), then {then} on gate seed {seed}"
            resolved.append(GateOutcome(o.gate_id, Outcome.NOT_RUN, o.duration_s, "Unconfirmed", why[:200]))
    seen = {o.gate_id for o in first}
    for a in again:
        if a.gate_id in seen:
            continue
        if a.outcome.is_conclusive:
            resolved.append(a)
        else:
            why = f"red once only ({a.outcome}: {a.exc_type})"
            resolved.append(GateOutcome(a.gate_id, Outcome.NOT_RUN, a.duration_s, "Unconfirmed", why[:200]))
    return tuple(resolved)


def chance_confirmations(
    run: Run, job: Callable[[Any, tuple[str, ...], float], Job]
) -> tuple[list[Job], Callable[[JobResult], None]]:
    """The children that run every provisional kill's killers again on gate seed CONFIRM_SEED (first-kill
    mode: with the gates its first child never reached), and what records the verdict that follows from one.
    `job(plan, gate_ids, budget)` is the child that runs `gate_ids` against the plan's mutant on the first seed."""
    statistical, conclusive_p = run.config.statistical_gates, run.config.conclusive_p_value
    pending: dict[str, tuple[str, ...]] = {}
    for name, result in run.results.items():
        if name in run.plans and not result.cached and awaits_confirmation(result, statistical, conclusive_p):
            reached = {o.gate_id for o in result.outcomes}
            killers = chance_killers(result, statistical, conclusive_p)
            pending[name] = tuple(g for g in run.plans[name].gate_ids if g in killers or g not in reached)

    def done(again: JobResult) -> None:
        first = run.results[again.key]
        killers = chance_killers(first, statistical, conclusive_p)
        outcomes = confirm_by_seed(first.outcomes, killers, again.outcomes, CONFIRM_SEED)
        ran = tuple(dict.fromkeys((*first.ran, *(o.gate_id for o in again.outcomes))))
        duration, attempts = first.duration_s + again.duration_s, first.attempts + 1
        result = verdict(first.name, outcomes, ran, duration, attempts, frozenset(run.flaky))
        run.add(tampered(result, again.tampered) if again.tampered else result, run.plans[again.key].key)

    jobs = [
        dataclasses.replace(
            job(run.plans[name], gate_ids, budget(run.config, run.baseline, gate_ids)), gate_seed=CONFIRM_SEED
        )
        for name, gate_ids in pending.items()
    ]
    return jobs, done
