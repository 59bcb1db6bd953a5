"""Comparing two observations: every diverging observable, the first one first, and by how much.

Discrete values (ids, counts, lengths, page ids, messages) must be equal. Float tensors must agree within the
stated tolerance, |mutant - pristine| <= atol + rtol * max |pristine| along the last dimension (a row of
logits or probabilities is one scale: a value near zero in it moves by the row's rounding, not its own). On a
CPU the same float32 operations give the same bits (two runs of one tree are bit-identical, tests/observe
checks it); the bound forgives a rewrite that reorders float operations (a * (b * c) for (a * b) * c, silu(x)
for x * sigmoid(x)), whose last bits move. Floats that differ in their bits but within the bound are listed
apart, never hidden. Complex values compare as their real and imaginary parts. A comparison travels between
processes as JSON (`Comparison.to_data`, `Comparison.from_data`). Knows nothing of the runner or of how
observations were made.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from verify.observe.record import Key, Observation, render_value

__all__ = ["ATOL", "RTOL", "Comparison", "Divergence", "Tolerance", "compare"]

ATOL, RTOL = 1e-6, 1e-5


@dataclass(frozen=True, slots=True)
class Tolerance:
    atol: float = ATOL
    rtol: float = RTOL

    def __post_init__(self) -> None:
        for name in ("atol", "rtol"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0 or math.isinf(value):
                raise ValueError(f"tolerance {name} must be a finite number >= 0, got {value!r}")

    def __str__(self) -> str:
        return (
            f"|mutant - pristine| <= {self.atol:g} + {self.rtol:g} x max |pristine| along the last dimension for "
            "floats; everything else exact"
        )

    def close(self, pristine: torch.Tensor, mutant: torch.Tensor) -> torch.Tensor:
        """Elementwise: within the bound (NaN where both are NaN, an infinity where both are the same one)."""
        magnitude = pristine.abs().nan_to_num(nan=0.0, posinf=0.0, neginf=0.0)
        if magnitude.dim() > 0 and magnitude.numel() > 0:
            magnitude = magnitude.amax(dim=-1, keepdim=True)
        within = (mutant - pristine).abs() <= self.atol + self.rtol * magnitude
        return within | (pristine == mutant) | (pristine.isnan() & mutant.isnan())


@dataclass(frozen=True, slots=True)
class Divergence:
    """One observable that differs: where, what, both values in short, and by how much."""

    workload: str
    step: int
    row: int
    what: str
    pristine: str
    mutant: str
    amount: str

    @property
    def place(self) -> str:
        """The workload, step and row, without the observable's name."""
        step = "" if self.step < 0 else f", step {self.step}"
        row = "" if self.row < 0 else f", row {self.row}"
        return f"{self.workload}{step}{row}"

    @property
    def where(self) -> str:
        return f"{self.place}: {self.what}"

    def line(self) -> str:
        return f"{self.where}: {self.amount} (pristine {self.pristine}, mutant {self.mutant})"


@dataclass(frozen=True, slots=True)
class Comparison:
    """Every diverging observable of a mutant against the pristine tree, in the order the pristine run met them."""

    divergences: tuple[Divergence, ...]
    compared: tuple[str, ...]  # the observables' names compared
    workloads: tuple[str, ...]
    tolerance: Tolerance = field(default_factory=Tolerance)
    within_tolerance: tuple[str, ...] = ()  # observables whose floats moved in their bits, within the bound
    # (workload, observable) for every observable either run recorded in each workload: what a claim about an
    # observable (say, equal output tokens) covers; () when unknown
    recorded: tuple[tuple[str, str], ...] = ()

    @property
    def first(self) -> Divergence | None:
        return self.divergences[0] if self.divergences else None

    @property
    def is_equivalent(self) -> bool:
        return not self.divergences

    def first_by_what(self) -> dict[str, tuple[Divergence, int]]:
        """Per diverging observable: its first divergence and how many times it diverges."""
        found: dict[str, tuple[Divergence, int]] = {}
        for divergence in self.divergences:
            base = divergence.what.partition("#")[0]
            first, count = found.get(base, (divergence, 0))
            found[base] = (first, count + 1)
        return found

    @property
    def equal(self) -> tuple[str, ...]:
        diverging = self.first_by_what()
        return tuple(what for what in self.compared if what not in diverging)

    def to_data(self) -> dict[str, Any]:
        """JSON-ready: every field as plain lists, strings and numbers."""
        return {
            "divergences": [list(dataclasses.astuple(d)) for d in self.divergences],
            "compared": list(self.compared),
            "workloads": list(self.workloads),
            "tolerance": [self.tolerance.atol, self.tolerance.rtol],
            "within_tolerance": list(self.within_tolerance),
            "recorded": [list(pair) for pair in self.recorded],
        }

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> Comparison:
        """`to_data`'s inverse; raises ValueError (or TypeError, KeyError) on anything else."""
        divergences = tuple(
            Divergence(str(w), int(step), int(row), str(what), str(p), str(m), str(amount))
            for w, step, row, what, p, m, amount in data["divergences"]
        )
        strings = {name: tuple(str(item) for item in data[name]) for name in ("compared", "workloads",
                                                                             "within_tolerance")}  # fmt: skip
        atol, rtol = data["tolerance"]
        recorded = tuple((str(workload), str(what)) for workload, what in data.get("recorded", ()))
        return cls(divergences, strings["compared"], strings["workloads"], Tolerance(float(atol), float(rtol)),
                   strings["within_tolerance"], recorded)  # fmt: skip


def _real(tensor: torch.Tensor) -> torch.Tensor:
    """float64, a complex value as its (real, imaginary) pair."""
    return (torch.view_as_real(tensor.resolve_conj()) if tensor.is_complex() else tensor).double()


def _amount(pristine: Any, mutant: Any, tolerance: Tolerance) -> tuple[str | None, bool]:
    """(how they differ, or None when equal within tolerance; whether floats moved in their bits only)."""
    if isinstance(pristine, torch.Tensor) and isinstance(mutant, torch.Tensor):
        if pristine.shape != mutant.shape:
            return f"shape {tuple(pristine.shape)} -> {tuple(mutant.shape)}", False
        if pristine.dtype != mutant.dtype:
            return f"dtype {pristine.dtype} -> {mutant.dtype}", False
        a, b = _real(pristine), _real(mutant)
        same_nan = a.isnan() & b.isnan()
        close = tolerance.close(a, b)
        if bool(close.all()):
            bits = not torch.equal(a[~same_nan], b[~same_nan])
            return None, bits
        diff = (a - b).abs().nan_to_num(nan=math.inf)
        position = tuple(int(i) for i in (~close).nonzero()[0]) if close.dim() else ()
        at = f"; first at {position}: {float(a[position]):.6g} -> {float(b[position]):.6g}" if close.dim() else ""
        return f"max |diff| {float(diff.max()):.3g} in {int((~close).sum())} of {close.numel()} values{at}", False
    if type(pristine) is not type(mutant):
        return f"{type(pristine).__name__} -> {type(mutant).__name__}", False
    if isinstance(pristine, tuple):
        if len(pristine) != len(mutant):
            return f"length {len(pristine)} -> {len(mutant)}", False
        differing = []
        bits = False
        for index, (p, m) in enumerate(zip(pristine, mutant, strict=True)):
            amount, moved = _amount(p, m, tolerance)
            bits |= moved
            if amount is not None:
                differing.append(index)
        if not differing:
            return None, bits
        i = differing[0]
        first = f"item {i}: {render_value(pristine[i], 40)} -> {render_value(mutant[i], 40)}"
        return f"{len(differing)} of {len(pristine)} items differ; first {first}", False
    if isinstance(pristine, float) and isinstance(mutant, float):
        if math.isclose(mutant, pristine, rel_tol=tolerance.rtol, abs_tol=tolerance.atol) or (
            math.isnan(pristine) and math.isnan(mutant)
        ):
            return None, pristine != mutant and not math.isnan(pristine)
        return f"by {mutant - pristine:+.3g}", False
    if pristine == mutant:
        return None, False
    if isinstance(pristine, int) and isinstance(mutant, int):
        return f"by {mutant - pristine:+d}", False
    return "differs", False


def _ordered_keys(pristine: Observation, mutant: Observation) -> Iterator[Key]:
    """The pristine run's keys in its order, each mutant-only key placed after the last key it followed."""
    mutant_keys = [key for key, _ in mutant.entries]
    pristine_keys = {key for key, _ in pristine.entries}
    extra_after: dict[Key | None, list[Key]] = {}
    previous: Key | None = None
    for key in mutant_keys:
        if key in pristine_keys:
            previous = key
        else:
            extra_after.setdefault(previous, []).append(key)
    yield from extra_after.get(None, [])
    for key, _ in pristine.entries:
        yield key
        yield from extra_after.get(key, [])


def compare(pristine: Observation, mutant: Observation, tolerance: Tolerance | None = None) -> Comparison:
    tolerance = tolerance or Tolerance()
    before, after = dict(pristine.entries), dict(mutant.entries)
    divergences: list[Divergence] = []
    moved: dict[str, None] = {}
    missing = object()
    for key in _ordered_keys(pristine, mutant):
        p, m = before.get(key, missing), after.get(key, missing)
        workload, step, row, what = key
        if p is missing or m is missing:
            absent = "absent in the pristine run" if p is missing else "absent in the mutant's run"
            shown = "-" if p is missing else render_value(p), "-" if m is missing else render_value(m)
            divergences.append(Divergence(workload, step, row, what, shown[0], shown[1], absent))
            continue
        amount, bits = _amount(p, m, tolerance)
        if bits:
            moved[what.partition("#")[0]] = None
        if amount is not None:
            divergences.append(Divergence(workload, step, row, what, render_value(p), render_value(m), amount))
    compared = tuple(dict.fromkeys(pristine.whats + mutant.whats))
    workloads = tuple(dict.fromkeys(pristine.workloads + mutant.workloads))
    keys = [key for key, _ in pristine.entries + mutant.entries]
    recorded = tuple(dict.fromkeys((workload, what.partition("#")[0]) for workload, _, _, what in keys))
    return Comparison(tuple(divergences), compared, workloads, tolerance, tuple(moved), recorded)
