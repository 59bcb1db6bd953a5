"""The audit's thresholds, stated once: every figure the audit prints carries the bound it must clear.

A leaf: no internal imports.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Threshold:
    low: float = -math.inf  # the figure must be >= low
    high: float = math.inf  # ... and <= high
    block_size: int | None = None  # the bound holds at this block size only

    @classmethod
    def none(cls) -> Threshold:
        return cls()

    @property
    def text(self) -> str:
        if self.low == -math.inf and self.high == math.inf:
            return "(reported)"
        if self.high == math.inf:
            return f">= {self.low:g}"
        if self.low == -math.inf:
            return f"<= {self.high:g}"
        return f"in [{self.low:g}, {self.high:g}]"


THRESHOLDS: dict[str, Threshold] = {
    # A constant draft scores ~0: every drafted-token comparison would compare one constant with another.
    "block_diversity": Threshold(low=0.8),
    # The draft must depend on its context: an emptied store changes nearly every block.
    "context_sensitivity_reset": Threshold(low=0.9),
    # Forcing the block causal through SDPA's is_causal flag (top-left aligned) must change most drafts.
    "mask_sensitivity_causal_sdpa": Threshold(low=0.5),
    # The position-aligned causal mask (the reference's own notion) is reported, not bounded: a well-trained
    # draft needs no later block slot, so few blocks change, and the gates catch that bug on the logits.
    "acceptance_right": Threshold(low=2.5, block_size=4),
    # With the store reset, acceptance must collapse to at most 60% of the right-context figure.
    "acceptance_reset_ratio": Threshold(high=0.6),
    # The audit's own replay must agree with the engine, or its other figures mean nothing.
    "dense_paged_agreement": Threshold(low=0.99),
    # Drafted blocks must move under a 5% weight perturbation, or the fixture is numerically inert.
    "weight_sensitivity": Threshold(low=0.02),
    # DFlash2 only: if the walk never departs from the per-slot argmax, an argmax fallback is invisible.
    "walk_departs_from_argmax": Threshold(low=0.02),
}


# A fixture whose draft must read its store (the copy pair): the base bounds, tightened, plus what the store
# carries. Figures are shares of steps drafted while the store held something, per block position; `_min` is
# the lowest position's.
STORE_THRESHOLDS: dict[str, Threshold] = {
    **THRESHOLDS,
    "block_diversity": Threshold(low=0.9),
    # (a) Wiping the store and keeping the pending rows (a store reset on a row move) changes nearly every token.
    "store_wiped_min": Threshold(low=0.9),
    # (b) A store that keeps only its last block + 8 positions changes most tokens.
    "store_window_min": Threshold(low=0.5),
    # (c) Stored rows 4 positions early (the first 4 dropped, the rest shifted) change most tokens.
    "store_offset_min": Threshold(low=0.5),
    # With the store wiped, acceptance must fall to at most half of the right-context figure.
    "acceptance_pending_only_ratio": Threshold(high=0.5),
}
PROFILES: dict[str, dict[str, Threshold]] = {"base": THRESHOLDS, "store": STORE_THRESHOLDS}


def thresholds_for(profile: str) -> dict[str, Threshold]:
    if profile not in PROFILES:
        raise ValueError(f"unknown audit profile {profile!r}; known: {sorted(PROFILES)}")
    return PROFILES[profile]


@dataclass(frozen=True, slots=True)
class Figure:
    name: str
    value: float
    threshold: Threshold
    block_size: int | None = None

    @property
    def applies(self) -> bool:
        return self.threshold.block_size is None or self.threshold.block_size == self.block_size

    @property
    def passed(self) -> bool:
        if not self.applies:
            return True
        return self.threshold.low <= self.value <= self.threshold.high

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "value": self.value,
            "threshold": self.threshold.text if self.applies else "(n/a at this block size)",
            "passed": self.passed,
        }
