"""Verdict records read back from JSON data (cache entries, shard and last-run reports): the inverse of
`dataclasses.asdict` for the records in `verify.report.verdict`. A leaf beside the verdict model.
"""

from __future__ import annotations

from typing import Any

from verify.report.verdict import Baseline, BaselineStatus, Corroboration, GateOutcome, MutationResult, Outcome, Status

__all__ = ["baseline_from_dict", "outcome_from_dict", "result_from_dict"]


def outcome_from_dict(data: dict[str, Any]) -> GateOutcome:
    """One gate's outcome, as a report's `outcomes` and a child's journal both write it."""
    fields = (data["gate_id"], Outcome(data["outcome"]), float(data["duration_s"]))
    p_value = data.get("p_value")
    return GateOutcome(
        *fields,
        data.get("exc_type", ""),
        data.get("message", ""),
        None if p_value is None else float(p_value),
        Corroboration(data.get("corroboration", Corroboration.ONCE)),  # a child's journal says nothing of it
    )


def result_from_dict(data: dict[str, Any]) -> MutationResult:
    """The inverse of `dataclasses.asdict` for a MutationResult (cache entries, shard reports)."""
    return MutationResult(
        name=data["name"],
        status=Status(data["status"]),
        killed_by=tuple(data.get("killed_by", ())),
        ran=tuple(data.get("ran", ())),
        duration_s=float(data.get("duration_s", 0.0)),
        reason=data.get("reason", ""),
        outcomes=tuple(outcome_from_dict(o) for o in data.get("outcomes", ())),
        cached=bool(data.get("cached", False)),
        attempts=int(data.get("attempts", 1)),
        crash_kind=str(data.get("crash_kind", "")),
        tampered=str(data.get("tampered", "")),
    )


def baseline_from_dict(data: dict[str, Any]) -> Baseline:
    return Baseline(BaselineStatus(data["status"]), tuple(outcome_from_dict(g) for g in data["gates"]))
