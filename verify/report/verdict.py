"""Verdicts and result records of a verify run: what happened, never how it was found out.

A leaf: imports nothing internal. Every record is a frozen dataclass of plain values and StrEnums,
so `dataclasses.asdict` plus `json.dumps` serialise it with no custom encoder. Derived facts (the
score, vacuous gates, killers) are properties, computed from the records rather than stored twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = [
    "Baseline",
    "GateOutcome",
    "MutationResult",
    "Outcome",
    "RunReport",
    "Status",
    "baseline_from_dict",
    "matches_gate",
    "result_from_dict",
]


class Status(StrEnum):
    KILLED = "killed"  # at least one gate went red
    SURVIVED = "survived"  # every gate that ran stayed green (or no gate reaches the mutated lines)
    TIMEOUT = "timeout"  # the child ran past its budget and was killed
    CRASHED = "crashed"  # the child died by a signal or exited without a result
    STALE = "stale"  # the anchor no longer matches exactly once, or the mutant does not compile
    SKIPPED = "skipped"  # not selected this run (--changed-since)


class Outcome(StrEnum):
    PASSED = "passed"
    ASSERTION = "assertion"  # the test body failed on an AssertionError: the gate checked and caught it
    EXCEPTION = "exception"  # the test body raised something else: red, but not by a check
    ERROR = "error"  # setup or teardown failed, or the gate was not collected
    SKIPPED = "skipped"

    @property
    def is_red(self) -> bool:
        return self in (Outcome.ASSERTION, Outcome.EXCEPTION, Outcome.ERROR)


@dataclass(frozen=True, slots=True)
class GateOutcome:
    gate_id: str
    outcome: Outcome
    duration_s: float
    exc_type: str = ""  # the exception's type name when red
    message: str = ""  # the first line of its message, for a human reading why


@dataclass(frozen=True, slots=True)
class MutationResult:
    name: str
    status: Status
    killed_by: tuple[str, ...] = ()
    ran: tuple[str, ...] = ()
    duration_s: float = 0.0
    reason: str = ""
    outcomes: tuple[GateOutcome, ...] = ()
    cached: bool = False

    @property
    def red_by_assertion(self) -> tuple[str, ...]:
        return tuple(o.gate_id for o in self.outcomes if o.outcome is Outcome.ASSERTION)

    @property
    def red_by_exception(self) -> tuple[str, ...]:
        return tuple(o.gate_id for o in self.outcomes if o.outcome in (Outcome.EXCEPTION, Outcome.ERROR))


@dataclass(frozen=True, slots=True)
class Baseline:
    status: str  # "green", or "red" / "flaky" (those end the run before any mutation)
    gates: tuple[GateOutcome, ...]

    @property
    def gate_ids(self) -> tuple[str, ...]:
        return tuple(o.gate_id for o in self.gates)

    def duration_of(self, gate_ids: tuple[str, ...]) -> float:
        wanted = set(gate_ids)
        return sum(o.duration_s for o in self.gates if o.gate_id in wanted)


def matches_gate(gate_id: str, pin: str) -> bool:
    """A pin is a node id or a node-id prefix ("tests/gates/test_draft.py" pins every test in it)."""
    return gate_id == pin or gate_id.startswith(pin.rstrip(":") + "::") or gate_id.startswith(pin + "[")


@dataclass(frozen=True, slots=True)
class RunReport:
    baseline: Baseline
    mutations: tuple[MutationResult, ...]
    required: tuple[str, ...]  # names whose survival fails the run
    pins: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (mutation name, expect_killed_by)
    shard: str = ""  # "K/N" when this is one slice of a sharded run
    interrupted: bool = False

    def count(self, status: Status) -> int:
        return sum(1 for r in self.mutations if r.status is status)

    @property
    def score(self) -> float:
        """killed / (killed + survived + timeout + crashed): the share of run mutants a gate turned red.

        Stale and skipped mutants are not in the denominator: no gate ran against them. Timeouts and
        crashes are: a hang or a dead process is not a gate catching the bug. With nothing run, 1.0.
        """
        judged = sum(self.count(s) for s in (Status.KILLED, Status.SURVIVED, Status.TIMEOUT, Status.CRASHED))
        return self.count(Status.KILLED) / judged if judged else 1.0

    @property
    def gate_kills(self) -> dict[str, int]:
        """How many mutants each baseline gate turned red, in baseline order."""
        kills = dict.fromkeys(self.baseline.gate_ids, 0)
        for result in self.mutations:
            for gate_id in result.killed_by:
                kills[gate_id] = kills.get(gate_id, 0) + 1
        return kills

    @property
    def vacuous_gates(self) -> tuple[str, ...]:
        """Gates no mutant turned red; empty when no mutant ran, since then nothing was tested."""
        if not any(r.ran for r in self.mutations):
            return ()
        return tuple(gate_id for gate_id, kills in self.gate_kills.items() if kills == 0)

    @property
    def lost_pins(self) -> tuple[tuple[str, str], ...]:
        """(mutation, pinned gate) pairs where the pinned gate is no longer among the killers."""
        by_name = {r.name: r for r in self.mutations}
        lost = []
        for name, pins in self.pins:
            result = by_name.get(name)
            if result is None or result.status in (Status.SKIPPED, Status.STALE):
                continue
            lost += [(name, pin) for pin in pins if not any(matches_gate(g, pin) for g in result.killed_by)]
        return tuple(lost)

    def failures(self, fail_under: float = 0.0) -> tuple[str, ...]:
        """Why this run fails (empty: exit 0): a required mutant not killed, a stale one, a lost pin."""
        reasons = []
        required = set(self.required)
        for result in self.mutations:
            if result.status is Status.STALE:
                reasons.append(f"{result.name}: stale ({result.reason})")
            elif result.name in required and result.status not in (Status.KILLED, Status.SKIPPED):
                reasons.append(f"{result.name}: {result.status}")
        reasons += [f"{name}: pinned gate {pin} no longer kills it" for name, pin in self.lost_pins]
        if self.score < fail_under:
            reasons.append(f"score {self.score:.3f} is under --fail-under {fail_under:.3f}")
        if self.interrupted:
            reasons.append("interrupted before every mutation ran")
        return tuple(reasons)


def result_from_dict(data: dict[str, Any]) -> MutationResult:
    """The inverse of `dataclasses.asdict` for a MutationResult (cache entries, shard reports)."""
    outcomes = tuple(
        GateOutcome(
            o["gate_id"], Outcome(o["outcome"]), float(o["duration_s"]), o.get("exc_type", ""), o.get("message", "")
        )
        for o in data.get("outcomes", ())
    )
    return MutationResult(
        name=data["name"],
        status=Status(data["status"]),
        killed_by=tuple(data.get("killed_by", ())),
        ran=tuple(data.get("ran", ())),
        duration_s=float(data.get("duration_s", 0.0)),
        reason=data.get("reason", ""),
        outcomes=outcomes,
        cached=bool(data.get("cached", False)),
    )


def baseline_from_dict(data: dict[str, Any]) -> Baseline:
    gates = tuple(
        GateOutcome(
            g["gate_id"], Outcome(g["outcome"]), float(g["duration_s"]), g.get("exc_type", ""), g.get("message", "")
        )
        for g in data["gates"]
    )
    return Baseline(data["status"], gates)
