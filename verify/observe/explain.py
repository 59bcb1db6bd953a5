"""An explanation: a mutant's comparison with the pristine tree, told for a person who must decide what to do.

The first diverging observable (workload, step, row, what, by how much), what else diverges after it (each
observable's first divergence and count), what stays equal (committed tokens equal means the verify hid the
bug), and the kind of gate that would see the first divergence. With no divergence: observably equivalent on
these workloads, with the list of what was compared and the coverage of the changed lines, only where the
workloads ran every changed line and took every way of a changed branch (`verify.observe.reach`); otherwise
"not observed", naming what was not reached: observations that never ran the change say nothing of it. Plain
text (no rich): every renderer can show it. Knows nothing of how the observations were made.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from verify.observe import reach as reach_mod
from verify.observe.compare import Comparison, Divergence

__all__ = ["EQUIVALENT", "NOT_OBSERVED", "Explanation", "GateFacts", "explain"]

EQUIVALENT = "observably equivalent on these fixtures"
NOT_OBSERVED = "not observed"
_OUTPUTS = ("output tokens",)  # what a user of the engine receives (an observer names it so)
_SHOWN = 8  # later divergences listed one per line; the rest by name


@dataclass(frozen=True, slots=True)
class Explanation:
    name: str
    first: Divergence | None
    later: tuple[tuple[str, str, int], ...]  # (observable, where it first diverges, how many times)
    equal: tuple[str, ...]
    gate: str  # the kind of gate that would see the first divergence
    workloads: tuple[str, ...]
    compared: tuple[str, ...]
    tolerance: str
    within_tolerance: tuple[str, ...] = ()
    duplicate_of: str = ""  # another mutant whose observation is identical, bit for bit
    # What the mutant's observation reached of its changed lines (verify.observe.reach.collect's data)
    reach: Mapping[str, Any] = field(default_factory=dict)
    recorded: tuple[tuple[str, str], ...] = ()  # (workload, observable) pairs recorded; () when unknown
    # With the gates as workloads (`verify.observe.gate_record`), measured in this run: where the first diverging
    # function is defined ("file:line", "" when the first divergence is an observer's), the gates that ran the
    # changed lines, the gates whose recorded values differ, and what the recording's limits left out
    where: str = ""
    gates_reached: tuple[str, ...] = ()
    gates_diverging: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def not_reached(self) -> tuple[str, ...]:
        return reach_mod.unreached(self.reach)

    @property
    def is_equivalent(self) -> bool:
        """No divergence, and the workloads ran every changed line and took every way of a changed branch."""
        return self.first is None and not self.not_reached

    @property
    def is_unobserved(self) -> bool:
        return self.first is None and bool(self.not_reached)

    @property
    def coverage(self) -> str:
        return reach_mod.describe(self.reach) if self.reach else "not measured"

    @property
    def outputs_equal(self) -> bool:
        """The mutant diverges, and every output observable compared stayed equal."""
        outputs = [what for what in _OUTPUTS if what in self.compared]
        return self.first is not None and bool(outputs) and all(what in self.equal for what in outputs)

    @property
    def output_workloads(self) -> tuple[str, ...]:
        """The workloads that record an output observable (all of them when what was recorded is unknown)."""
        if not self.recorded:
            return self.workloads
        return tuple(dict.fromkeys(w for w, what in self.recorded if what in _OUTPUTS))

    @property
    def hidden_by_verify(self) -> bool:
        """Outputs equal where the mutant first diverges. A workload that records no output (a sampled one, whose
        tokens an observer names otherwise) shows nothing of what a user receives: equal outputs elsewhere do not
        say that the verify hid a divergence there."""
        return self.outputs_equal and self.first is not None and self.first.workload in self.output_workloads

    def summary(self) -> str:
        """One line: the first divergence, or the equivalence, as a report's cell shows it."""
        if self.is_unobserved:
            missing = self.not_reached
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            return f"{NOT_OBSERVED}: {missing[0]}{more} in {len(self.workloads)} workloads: no claim either way"
        if self.first is None:
            return (
                f"{EQUIVALENT} ({len(self.workloads)} workloads, {len(self.compared)} observables compared), "
                f"{self.coverage}"
            )
        hidden = "; output tokens equal: hidden by the verify" if self.hidden_by_verify else ""
        return f"first divergence: {self.first.where}: {self.first.amount}{hidden}"

    def text(self) -> str:
        lines = [f"{self.name}: {self.summary()}"]
        if self.first is None:
            lines.append(f"coverage of the changed lines: {self.coverage}")
            lines += [f"  not reached: {what}" for what in self.not_reached]
            lines.append(f"compared: {', '.join(self.compared)}")
            lines.append(f"workloads: {'; '.join(self.workloads)}")
            lines.append(f"tolerance: {self.tolerance}")
            if self.within_tolerance:
                lines.append(f"moved in their last bits, within tolerance: {', '.join(self.within_tolerance)}")
            if self.is_unobserved:
                lines.append("no divergence, but the workloads never ran the change: add one that reaches it")
            else:
                lines.append("this proves no equivalence beyond these workloads, seeds and this machine's float order")
        else:
            first = self.first
            if self.where:
                lines.append(f"first function whose result differs: {first.what} ({self.where}), its return "
                             f"number {first.step + 1} in {first.workload}")  # fmt: skip
            lines.append(f"  pristine: {first.pristine}")
            lines.append(f"  mutant:   {first.mutant}")
            lines.append(f"a gate that would see it: {self.gate}")
            if self.later:
                lines.append("also diverging (first place, count):")
                lines += [f"  {what}: {where} ({count}x)" for what, where, count in self.later[:_SHOWN]]
                if len(self.later) > _SHOWN:
                    lines.append(
                        f"  and {len(self.later) - _SHOWN} more: {', '.join(w for w, _, _ in self.later[_SHOWN:])}"
                    )
            lines.append(f"equal everywhere: {', '.join(self.equal) or 'nothing'}")
            lines += self._outputs_lines()
            lines.append(f"tolerance: {self.tolerance}")
        if self.gates_reached:
            lines.append(f"gates that ran the changed lines (measured): {_names(self.gates_reached)}")
        lines += [f"recording capped: {note}" for note in self.notes]
        if self.duplicate_of:
            lines.append(f"duplicate of {self.duplicate_of}: identical observations")
        return "\n".join(lines)

    def _outputs_lines(self) -> list[str]:
        if not self.outputs_equal or self.first is None:
            return []
        recording = self.output_workloads
        if not self.hidden_by_verify:
            return [
                f"output tokens are equal where recorded ({', '.join(recording)}), but the workload "
                f"{self.first.workload!r}, where it first diverges, records none: no claim that the verify hides it"
            ]
        if set(recording) >= set(self.workloads):
            return ["output tokens are equal on every workload: the loss is hidden by the verify"]
        return [f"output tokens are equal on every workload that records them ({', '.join(recording)}): the loss "
                "is hidden by the verify there"]  # fmt: skip

    def to_dict(self) -> dict[str, object]:
        first = self.first
        return {
            "equivalent": self.is_equivalent,
            "observed": not self.is_unobserved,
            "summary": self.summary(),
            "coverage": dict(self.reach),
            "not_reached": list(self.not_reached),
            "first": None if first is None else {
                "workload": first.workload, "step": first.step, "row": first.row, "what": first.what,
                "amount": first.amount, "pristine": first.pristine, "mutant": first.mutant,
            },
            "also_diverging": [{"what": w, "first_at": at, "count": n} for w, at, n in self.later],
            "equal": list(self.equal),
            "gate": self.gate,
            "workloads": list(self.workloads),
            "compared": list(self.compared),
            "tolerance": self.tolerance,
            "duplicate_of": self.duplicate_of,
            "where": self.where,
            "gates_reached": list(self.gates_reached),
            "gates_diverging": list(self.gates_diverging),
            "notes": list(self.notes),
        }  # fmt: skip


def _names(gates: tuple[str, ...], shown: int = 4) -> str:
    more = f" and {len(gates) - shown} more" if len(gates) > shown else ""
    return ", ".join(gates[:shown]) + more


@dataclass(frozen=True, slots=True)
class GateFacts:
    """What the gates run as workloads measured for one mutant: the gates it ran, their comparison where an
    observer made the main one (None: the main comparison is the gates'), where each recorded function is
    defined, and what the recording left out (gate -> phrase; unstable values among them)."""

    ran: tuple[str, ...]
    comparison: Comparison | None = None
    functions: Mapping[str, str] = field(default_factory=dict)
    capped: Mapping[str, str] = field(default_factory=dict)
    unstable: tuple[tuple[str, str], ...] = ()


def _measured_gate(first: Divergence | None, diverging: tuple[str, ...], reached: tuple[str, ...],
                   facts: GateFacts) -> str:  # fmt: skip
    """The gate hint, measured in this run: the gates whose recorded values differ, else those that ran the
    change and saw nothing differ, else none."""
    if diverging:
        return (f"{_names(diverging)} (measured in this run: the values recorded there differ; a check on what "
                "they already compute would see it)")  # fmt: skip
    if reached:
        return (f"none seen: {_names(reached)} ran the changed lines and every value they record stayed equal; "
                "a gate comparing what the first divergence shows is missing")  # fmt: skip
    if first is not None and not facts.ran:
        return "none: no gate runs the changed lines (measured in the pristine run)"
    return "none: no gate runs the changed lines"


def explain(
    name: str,
    comparison: Comparison,
    gates: Mapping[str, str],
    duplicate_of: str = "",
    reach: Mapping[str, Any] | None = None,
    gate_facts: GateFacts | None = None,
) -> Explanation:
    first = comparison.first
    by_what = comparison.first_by_what()
    later = tuple(
        (what, divergence.place, count)
        for what, (divergence, count) in by_what.items()
        if first is None or what != first.what.partition("#")[0]
    )
    gate = ""
    if first is not None and gate_facts is None:  # no gate measured: the observer's own word, said as such
        base = first.what.partition("#")[0]
        kind = gates.get(base) or f"a gate comparing {base!r} with its unmutated value"
        gate = f"{kind}, on the workload {first.workload!r} (the observer's mapping, not measured)"
    if gate_facts is None:
        return Explanation(
            name, first, later, comparison.equal, gate, comparison.workloads, comparison.compared,
            str(comparison.tolerance), comparison.within_tolerance, duplicate_of, dict(reach or {}),
            comparison.recorded,
        )  # fmt: skip
    facts = gate_facts
    reached = tuple(dict.fromkeys(g for file in (reach or {}).values() for g in file.get("gates", ())))
    by_gates = facts.comparison if facts.comparison is not None else comparison
    diverging = tuple(dict.fromkeys(d.workload for d in by_gates.divergences))
    if first is not None:
        gate = _measured_gate(first, diverging, reached, facts)
    where = facts.functions.get(first.what, "") if first is not None and facts.comparison is None else ""
    notes = tuple(f"{gate_id}: {phrase}" for gate_id, phrase in facts.capped.items() if gate_id in facts.ran)
    if facts.unstable:
        notes += (f"{len(facts.unstable)} values that differ between two pristine runs compared nowhere "
                  f"(first: {facts.unstable[0][1]} in {facts.unstable[0][0]})",)  # fmt: skip
    return Explanation(
        name, first, later, comparison.equal, gate, comparison.workloads, comparison.compared,
        str(comparison.tolerance), comparison.within_tolerance, duplicate_of, dict(reach or {}), comparison.recorded,
        where, reached, diverging, notes,
    )  # fmt: skip
