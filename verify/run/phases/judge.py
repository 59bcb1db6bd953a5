"""Turning what children reported into a mutation's verdict: which attempts are needed, and what they mean.

A gate's first outcome stands when it is conclusive (green, or its own check fired). Anything else is
asked again in a fresh child: a crash, a named invariant or a timeout must happen twice to count (the second
child has the same budget and deadlines), and a gate that did not run is retried once. What is still unresolved
after the second attempt is an error, never a kill and never a survival; so is a child that found the harness
changed under its gates (`tampered`), whatever they reported. Gates found flaky on the
unmutated tree are left out of every verdict.

A kill by statistical gates alone is confirmed on an independent seed (`verify.run.phases.chance`); what that
established is kept on the gates' outcomes (a confirmed killer's message opens with AGAIN, a chance red is
passed with exc_type STATISTICAL_UNCONFIRMED), so every later rejudging reaches the same verdict and reason.
Pure functions of records: no processes, no files.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from verify.report.crashes import crash_kind
from verify.report.verdict import GateOutcome, MutationResult, Outcome, Status, status_from

__all__ = ["AGAIN", "STATISTICAL_UNCONFIRMED", "needs_second_attempt", "resolve", "tampered", "verdict", "voided"]

# exc_type of a passed outcome whose gate was red by its check on the first seed and green on the confirming one
STATISTICAL_UNCONFIRMED = "StatisticalUnconfirmed"
AGAIN = "red again on gate seed"  # how a confirmed killer's message opens


def needs_second_attempt(outcomes: Iterable[GateOutcome], flaky: frozenset[str] = frozenset()) -> bool:
    """A first attempt decides alone only when a gate's check fired or every gate is conclusive."""
    counted = [o for o in outcomes if o.gate_id not in flaky]
    if any(o.outcome.is_check for o in counted):
        return False
    return any(not o.outcome.is_conclusive for o in counted)


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
        return second  # the retry stands on its own, and is confirmed below if it is red by an exception
    if second.outcome is first.outcome:
        return second  # confirmed: the same kind of red twice
    if second.outcome is Outcome.PASSED:
        why = f"red once ({first.outcome}: {first.exc_type} {first.message}), green on a second run"
        return GateOutcome(first.gate_id, Outcome.NOT_RUN, first.duration_s, "Unconfirmed", why[:200])
    why = f"red two ways: {first.outcome} ({first.exc_type}), then {second.outcome} ({second.exc_type})"
    return GateOutcome(first.gate_id, Outcome.NOT_RUN, first.duration_s, "Unconfirmed", why[:200])


def resolve(first: tuple[GateOutcome, ...], second: tuple[GateOutcome, ...] | None) -> tuple[GateOutcome, ...]:
    """Per gate, what two attempts establish (second may be None: the first decided alone)."""
    again = {o.gate_id: o for o in second or ()}
    resolved = [_resolve_gate(o, again.get(o.gate_id) if second is not None else None) for o in first]
    if second is not None:
        # A retried not-run gate red by an exception on its only real run is still unconfirmed.
        firsts = {o.gate_id: o for o in first}
        resolved = [
            GateOutcome(o.gate_id, Outcome.NOT_RUN, o.duration_s, "Unconfirmed", f"red once only ({o.exc_type})")
            if firsts[o.gate_id].outcome is Outcome.NOT_RUN and o.outcome.is_red and not o.outcome.is_check
            else o
            for o in resolved
        ]
    return tuple(resolved)


def verdict(
    name: str,
    outcomes: tuple[GateOutcome, ...],
    ran: tuple[str, ...],
    duration_s: float,
    attempts: int,
    flaky: frozenset[str] = frozenset(),
    never_imported: str = "",
) -> MutationResult:
    """The mutation's status from resolved outcomes, leaving out flaky gates."""
    counted = tuple(o for o in outcomes if o.gate_id not in flaky)
    status = status_from(counted)
    kind = {
        Status.KILLED: lambda o: o.outcome.is_check,
        Status.CAUGHT: lambda o: o.outcome is Outcome.INVARIANT,
        Status.CRASHED: lambda o: o.outcome is Outcome.EXCEPTION,
        Status.TIMEOUT: lambda o: o.outcome is Outcome.TIMEOUT,
    }.get(status)
    killed_by = tuple(o.gate_id for o in counted if kind(o)) if kind else ()
    reason, crashed_kind = "", ""
    if status is Status.ERROR:
        stuck = [o for o in counted if o.outcome is Outcome.NOT_RUN]
        reason = f"no verdict from {stuck[0].gate_id}: {stuck[0].message}" + (
            f" (and {len(stuck) - 1} more)" if len(stuck) > 1 else ""
        )
    elif status in (Status.CRASHED, Status.TIMEOUT, Status.CAUGHT):
        first = next(o for o in counted if kind and kind(o))
        reason = f"{first.exc_type}: {first.message}"[:200]
        if status is Status.CRASHED:
            # A crash past a ceiling says which, in every report; the first such gate names it.
            named = next((k for o in counted if kind and kind(o) and (k := crash_kind(o)) is not None), None)
            if named is not None:
                crashed_kind, reason = str(named), f"{named}: {reason}"[:200]
    elif status is Status.SURVIVED:
        dropped = sorted({o.gate_id for o in outcomes if o.gate_id in flaky and o.outcome.is_red})
        chance = [o for o in counted if o.exc_type == STATISTICAL_UNCONFIRMED]
        if dropped:
            reason = f"red only in flaky gates: {', '.join(dropped)}"
        elif chance:
            reason = f"statistical kill not confirmed: {chance[0].gate_id} {chance[0].message}" + (
                f" (and {len(chance) - 1} more)" if len(chance) > 1 else ""
            )
        elif never_imported:
            reason = f"the gates never imported {never_imported}"
    elif status is Status.KILLED:
        confirmed = [o.gate_id for o in counted if o.outcome.is_check and o.message.startswith(AGAIN)]
        if confirmed:
            reason = f"statistical kill confirmed: {', '.join(confirmed)} red again on an independent gate seed"
    return MutationResult(
        name, status, killed_by, ran, round(duration_s, 3), reason, outcomes, False, attempts, crashed_kind
    )


def tampered(result: MutationResult, why: str) -> MutationResult:
    """No verdict for a mutant whose child found the harness changed under its gates (or whose journal lost its
    seals): an error naming what changed, whatever its gates reported, since the report itself was in its hands."""
    return dataclasses.replace(
        result,
        status=Status.ERROR,
        killed_by=(),
        crash_kind="",
        reason=f"tampered with the harness: {why}"[:300],
        tampered=why,
    )


def voided(result: MutationResult, paths: Sequence[str]) -> MutationResult:
    """No verdict for a mutant that changed the user's files while it ran: an error (never cached), so the next
    run tries it again and finds it again."""
    why = f"changed the user's files while it ran: {', '.join(paths[:3])}" + ("..." if len(paths) > 3 else "")
    return dataclasses.replace(result, status=Status.ERROR, reason=why)
