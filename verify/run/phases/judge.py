"""Turning resolved outcomes into a mutation's verdict, and the two ways a verdict is taken back.

The status follows from the outcomes the corroboration policy resolved (`verify.run.phases.corroboration`:
which reds were seen often enough, and how, travels on each outcome as its `corroboration`), so every later
rejudging (the flake check's, a cache replay's) reaches the same verdict and reason. Gates found flaky on the
unmutated tree are left out of every verdict. A child that found the harness changed under its gates
(`tampered`) or a mutant that changed the user's files (`voided`) gets an error, whatever its gates reported.
Pure functions of records: no processes, no files.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from verify.report.crashes import crash_kind
from verify.report.verdict import GateOutcome, MutationResult, Outcome, Status, status_from
from verify.run.phases import corroboration

__all__ = ["tampered", "verdict", "voided"]


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
        if dropped:
            reason = f"red only in flaky gates: {', '.join(dropped)}"
        elif why := corroboration.reason(status, counted):
            reason = why
        elif never_imported:
            reason = f"the gates never imported {never_imported}"
    elif status is Status.KILLED:
        reason = corroboration.reason(status, counted)
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
