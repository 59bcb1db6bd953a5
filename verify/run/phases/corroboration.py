"""How many independent reds make a kill: the corroboration policy, in one place.

A gate's red is evidence only once it has been seen often enough that chance, a busy machine or a flaky gate is
no longer the likelier cause. Three re-runs apply that one rule, each with its own exemptions, all decided here:

1. A crash, a named invariant or a hang must happen twice (a second fresh child, the same budget and
   deadlines); a gate that did not run is retried once (`needs_second_attempt`, `Policy.resolve`). A red once,
   then green or red another way, gives no verdict (UNCONFIRMED), never a kill and never a survival.
2. A statistical gate (`[tool.dflash] statistical_gates`) fails by chance at a stated rate (about 1e-3 for
   each of this project's exact gates). A mutant that only reshuffles the random stream the gates draw from
   meets them all afresh, so with 25 of them its chance of a false kill on one run is about 2.5%. A kill by
   statistical gates alone therefore awaits (`Policy.awaiting`: never cached, said so in a partial report)
   until its killers run again on gate seed CONFIRM_SEED, a stream independent of the first (`verify.seeds`):
   it stands only if one of them is red by its check again (RESEEDED); one green there is a chance red (CHANCE).
   A false kill then needs two independent false alarms: about 2.5e-2 x 1e-3 = 2.5e-5 per mutant. A real bug
   the killer detects with probability P is confirmed with probability P again (`Policy.reseeded`).
3. The flake check re-runs every gate that turned a verdict red on the pristine tree; one red there is flaky
   and its reds count nowhere. A red the second seed reproduced is not re-run: it was seen twice, which a gate
   failing at random with probability p does with probability p^2, below one red and one green re-run
   (p(1 - p)) for every p < 1/2. Nor is a killer the second seed is about to run (a red it reproduces was
   seen twice; one it does not turns no verdict red), nor a conclusive red (`Policy.flake_suspects`).

The conclusive p-value: a statistical gate that states its red's p-value (`verify.run.child.p_value`) can
spare both the second seed and the flake check: a red by its check with p <= `conclusive_p_value` (default
1e-9) stands at once (CONCLUSIVE). With 25 such gates a false kill then has probability at most 25 x 1e-9 =
2.5e-8 per mutant, below the two-seed rule's 2.5e-5 even if the gate's p-value understates its tail a
thousandfold (a chi-square approximation's does, a few times, at 2.5e-4).

What each outcome's red established travels on it as `GateOutcome.corroboration`, so every later rejudging, a
cache replay included, reaches the same verdict and reason. Only a final verdict may be cached (`Policy.recorded`,
`may_replay`). Pure functions of records: knows no children, no files and no run; `verify.run.phases.verdicts`
runs what this module asks for.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from verify.config.settings import ProjectConfig
from verify.report.verdict import Corroboration, GateOutcome, MutationResult, Outcome, Status, matches_gate
from verify.seeds import CONFIRM_SEED

__all__ = ["AWAITING", "Policy", "may_replay", "needs_second_attempt", "reason"]

AWAITING = "red only in statistical gates: to be confirmed on an independent gate seed"
# Corroborated reds the flake check never re-runs: each is already as strong as two independent reds.
_SEEN_ENOUGH = (Corroboration.RESEEDED, Corroboration.CONCLUSIVE)


def needs_second_attempt(outcomes: Iterable[GateOutcome]) -> bool:
    """A first attempt decides alone only when a gate's check fired or every gate is conclusive."""
    seen = tuple(outcomes)
    if any(o.outcome.is_check for o in seen):
        return False
    return any(not o.outcome.is_conclusive for o in seen)


def may_replay(status: Status) -> bool:
    """Whether a verdict of this status may be cached and replayed: crashes, timeouts and errors are re-run
    next time (what the harness suffered once may not happen again), never replayed."""
    return status in (Status.KILLED, Status.CAUGHT, Status.SURVIVED)


def reason(status: Status, counted: Sequence[GateOutcome]) -> str:
    """Why a kill or a survival follows from how its statistical reds were corroborated, or "" (the verdict then
    says its own reason). `counted`: the outcomes the verdict counts (flaky gates left out)."""
    if status is Status.KILLED:
        confirmed = [o.gate_id for o in counted if o.outcome.is_check and o.corroboration is Corroboration.RESEEDED]
        if confirmed:
            return f"statistical kill confirmed: {', '.join(confirmed)} red again on an independent gate seed"
    elif status is Status.SURVIVED:
        chance = [o for o in counted if o.corroboration is Corroboration.CHANCE]
        if chance:
            more = f" (and {len(chance) - 1} more)" if len(chance) > 1 else ""
            return f"statistical kill not confirmed: {chance[0].gate_id} {chance[0].message}{more}"
    return ""


def _unconfirmed(gate_id: str, duration_s: float, exc_type: str, why: str) -> GateOutcome:
    """A red seen once and not again the same way: no verdict from this gate (an error, never a kill)."""
    return GateOutcome(gate_id, Outcome.NOT_RUN, duration_s, exc_type, why[:200], None, Corroboration.UNCONFIRMED)


@dataclass(frozen=True, slots=True)
class Policy:
    """The corroboration policy for one project's gates: which are statistical, what p-value is conclusive, and
    the independent gate seed a statistical kill is confirmed on."""

    statistical_gates: tuple[str, ...] = ()
    conclusive_p_value: float | None = None  # None: no p-value is enough alone
    confirm_seed: int = CONFIRM_SEED

    @classmethod
    def of(cls, config: ProjectConfig) -> Policy:
        return cls(tuple(config.statistical_gates), config.conclusive_p_value)

    def is_statistical(self, gate_id: str) -> bool:
        return any(matches_gate(gate_id, pattern) for pattern in self.statistical_gates)

    def _weighed(self, outcome: GateOutcome) -> GateOutcome:
        """`outcome`, marked CONCLUSIVE when it is a statistical gate's red by its check with a stated p-value of
        at most `conclusive_p_value`: a correct engine produces it with at most that probability, whatever makes
        the gate vary (its seed, the machine's timing), so it is as strong as two independent reds."""
        conclusive = (
            self.conclusive_p_value is not None
            and outcome.corroboration is Corroboration.ONCE
            and outcome.outcome.is_check
            and outcome.p_value is not None
            and outcome.p_value <= self.conclusive_p_value
            and self.is_statistical(outcome.gate_id)
        )
        return dataclasses.replace(outcome, corroboration=Corroboration.CONCLUSIVE) if conclusive else outcome

    # 1. A crash, an invariant or a hang twice.

    def resolve(
        self, first: tuple[GateOutcome, ...], second: tuple[GateOutcome, ...] | None
    ) -> tuple[GateOutcome, ...]:
        """Per gate, what two attempts establish (`second` None: the first decided alone)."""
        again = {o.gate_id: o for o in second or ()}
        resolved = [_resolve_gate(o, again.get(o.gate_id) if second is not None else None) for o in first]
        if second is not None:
            # A retried not-run gate red by an exception on its only real run is still unconfirmed.
            firsts = {o.gate_id: o for o in first}
            resolved = [
                _unconfirmed(o.gate_id, o.duration_s, o.exc_type, f"red once only ({o.exc_type})")
                if firsts[o.gate_id].outcome is Outcome.NOT_RUN and o.outcome.is_red and not o.outcome.is_check
                else o
                for o in resolved
            ]
        return tuple(self._weighed(o) for o in resolved)

    # 2. A statistical kill on an independent seed.

    def _statistical_kill(self, result: MutationResult) -> bool:
        """A kill every one of whose killers is a statistical gate."""
        if result.status is not Status.KILLED or not result.killed_by or not self.statistical_gates:
            return False
        return all(self.is_statistical(gate_id) for gate_id in result.killed_by)

    def awaiting(self, result: MutationResult) -> tuple[str, ...]:
        """The killers of a kill that only statistical gates made and that still awaits its second seed, or ()
        when the kill needs none (another kind of verdict, a killer outside the statistical gates, a killer
        conclusive by its p-value, one the second seed already reproduced, or a verdict replayed from the
        cache: only a final verdict is cached)."""
        if result.cached or not self._statistical_kill(result):
            return ()
        killers = set(result.killed_by)
        if any(o.gate_id in killers and o.corroboration in _SEEN_ENOUGH for o in result.outcomes):
            return ()
        return result.killed_by

    def second_seed_gates(self, result: MutationResult, planned: tuple[str, ...]) -> tuple[str, ...]:
        """What the second seed runs for an awaiting kill, in the planned order: its killers, and (first-kill
        mode) the gates its first child never reached."""
        reached = {o.gate_id for o in result.outcomes}
        killers = set(self.awaiting(result))
        return tuple(g for g in planned if g in killers or g not in reached)

    def reseeded(
        self, first: tuple[GateOutcome, ...], killers: tuple[str, ...], again: tuple[GateOutcome, ...]
    ) -> tuple[GateOutcome, ...]:
        """The outcomes once the killers ran again on gate seed `confirm_seed`: a killer red by its check again
        stays red (RESEEDED), one green there is a chance red (passed, CHANCE, its first red in the message), and
        one that did anything else has no verdict (UNCONFIRMED). Gates the first attempt never reached
        (first-kill mode) that ran on the second count as one attempt: conclusive ones stand, any other red is
        unconfirmed."""
        seed = self.confirm_seed
        second = {o.gate_id: o for o in again}
        resolved = []
        for o in first:
            a = second.get(o.gate_id)
            if o.gate_id not in killers:
                resolved.append(o)
            elif a is not None and a.outcome.is_check:
                why = f"red again on gate seed {seed}: {a.message}"
                resolved.append(
                    GateOutcome(o.gate_id, a.outcome, o.duration_s + a.duration_s, a.exc_type, why[:200], None,
                                Corroboration.RESEEDED)
                )  # fmt: skip
            elif a is not None and a.outcome is Outcome.PASSED:
                why = f"red on gate seed 0 ({o.exc_type}: {o.message}), green on gate seed {seed}"
                resolved.append(
                    GateOutcome(o.gate_id, Outcome.PASSED, a.duration_s, o.exc_type, why[:200], None,
                                Corroboration.CHANCE)
                )  # fmt: skip
            else:
                then = f"{a.outcome} ({a.exc_type})" if a is not None else "not run"
                why = f"red on gate seed 0 ({o.exc_type}), then {then} on gate seed {seed}"
                resolved.append(_unconfirmed(o.gate_id, o.duration_s, o.exc_type, why))
        seen = {o.gate_id for o in first}
        for a in again:
            if a.gate_id in seen:
                continue
            if a.outcome.is_conclusive:
                resolved.append(self._weighed(a))
            else:
                why = f"red once only ({a.outcome}: {a.exc_type})"
                resolved.append(_unconfirmed(a.gate_id, a.duration_s, a.exc_type, why))
        return tuple(resolved)

    # 3. The flake check's exemptions.

    def flake_suspects(self, results: Iterable[MutationResult], *, seed_to_come: bool) -> set[str]:
        """The gates red in some result that the flake check must re-run on the pristine tree: every red but
        those seen enough (reproduced on the second seed, or conclusive by their p-value) and, while the second
        seed is still to come (`seed_to_come`), the killers it is about to run."""
        return {
            o.gate_id
            for result in results
            for o in result.outcomes
            if o.outcome.is_red and o.corroboration not in _SEEN_ENOUGH
            and not (seed_to_come and o.gate_id in self.awaiting(result))
        }  # fmt: skip

    # What a run records, and what it may cache.

    def recorded(self, result: MutationResult) -> tuple[MutationResult, bool]:
        """The verdict as the run records it, with whether it may be cached: an awaiting kill says so and is
        never cached (it is not final); a statistical kill conclusive on its first seed says why."""
        if self.awaiting(result):
            return dataclasses.replace(result, reason=AWAITING), False
        if why := self._conclusive_reason(result):
            result = dataclasses.replace(result, reason=why)
        return result, may_replay(result.status)

    def _conclusive_reason(self, result: MutationResult) -> str:
        """Why a kill by statistical gates alone stands on its first seed (its killer's p-value), or ""."""
        if not self._statistical_kill(result):
            return ""
        killers = set(result.killed_by)
        stated = [
            o for o in result.outcomes
            if o.gate_id in killers and o.corroboration is Corroboration.CONCLUSIVE and o.p_value is not None
        ]  # fmt: skip
        if not stated:
            return ""
        first = min(stated, key=lambda o: o.p_value or 0.0)
        why = f"statistical kill conclusive on one seed: {first.gate_id} red at p-value {first.p_value:.1e}"
        return f"{why} <= {self.conclusive_p_value:.0e}"[:200]


def _resolve_gate(first: GateOutcome, second: GateOutcome | None) -> GateOutcome:
    if first.outcome.is_conclusive or second is None:
        return first
    if second.outcome.is_check:
        return second
    if first.outcome is Outcome.NOT_RUN:
        if second.outcome is Outcome.NOT_RUN:
            return GateOutcome(
                first.gate_id, Outcome.NOT_RUN, 0.0, second.exc_type, f"did not run twice: {second.message}"
            )
        return second  # the retry stands on its own, and is confirmed in `resolve` if it is red by an exception
    if second.outcome is first.outcome:
        return dataclasses.replace(second, corroboration=Corroboration.REPEATED)  # the same kind of red twice
    if second.outcome is Outcome.PASSED:
        why = f"red once ({first.outcome}: {first.exc_type} {first.message}), green on a second run"
        return _unconfirmed(first.gate_id, first.duration_s, first.exc_type, why)
    why = f"red two ways: {first.outcome} ({first.exc_type}), then {second.outcome} ({second.exc_type})"
    return _unconfirmed(first.gate_id, first.duration_s, first.exc_type, why)
