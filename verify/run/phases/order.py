"""The order of things in a verify run: which of a mutant's gates run first in first-kill mode, how long a
mutant is expected to take, so the slowest start first, and the least a whole run can take (its floor, which
`make bench` sets beside the measured time). Pure functions of gate times; it knows nothing
of children or verdicts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from verify.report.verdict import Baseline, matches_gate

__all__ = ["expected_s", "floor_s", "kill_order", "pinned", "pins_first"]


def pinned(gate_ids: tuple[str, ...], pins: tuple[str, ...]) -> tuple[str, ...]:
    """The gates among `gate_ids` that a mutation's pins name (a node id or a prefix of one)."""
    return tuple(g for g in gate_ids if any(matches_gate(g, pin) for pin in pins))


def pins_first(gate_ids: tuple[str, ...], pins: tuple[str, ...]) -> tuple[str, ...]:
    """Full-matrix order: the pinned gates, then the rest as collected. A mutant that hangs a later gate (one
    that starves the engine of pages loops until its budget) must not keep its pins from being judged: with
    them first, a pin's kill is in the journal before the hang, and the verdict needs no confirming child."""
    first = pinned(gate_ids, pins)
    return (*first, *(g for g in gate_ids if g not in first))


def kill_order(gate_ids: tuple[str, ...], pins: tuple[str, ...], baseline: Baseline) -> tuple[str, ...]:
    """First-kill order: the pinned gates (each must run, so a lost pin is still seen), then the rest from the
    fastest to the slowest, so the first kill comes as cheaply as it can."""
    seconds = {o.gate_id: o.duration_s for o in baseline.gates}
    first = pinned(gate_ids, pins)
    rest = sorted((g for g in gate_ids if g not in first), key=lambda g: seconds.get(g, 0.0))
    return (*first, *rest)


def expected_s(gate_ids: tuple[str, ...], pins: tuple[str, ...], baseline: Baseline, first_kill: bool) -> float:
    """A mutant's expected time from its gates' baseline times: all of them; in first-kill mode (`gate_ids` in
    kill order) the pinned gates, which all run, and the first gate after them, since the kill usually comes
    early, never the whole list its budget allows for."""
    if not first_kill:
        return baseline.duration_of(gate_ids)
    first = pinned(gate_ids, pins)
    return baseline.duration_of((*first, *gate_ids[len(first) : len(first) + 1]))


def floor_s(gate_s: Mapping[str, float], gate_sets: Iterable[tuple[str, ...]], num_jobs: int) -> float:
    """The least a run can take: one run of every gate (`gate_s`: gate id -> seconds, best taken from a plain,
    untraced pytest run, since the baseline's own times include coverage tracing) plus, for each mutant, the
    gates it must run (`gate_sets`: the full matrix's selection, or what a first-kill run ran), spread without a
    gap over
    `num_jobs` children. Nothing a harness adds is in it: no start-up, fork, import or collection, no
    confirming child, no idle worker at the end."""
    total = sum(gate_s.values())
    total += sum(gate_s.get(gate_id, 0.0) for gate_ids in gate_sets for gate_id in gate_ids)
    return total / max(1, num_jobs)
