"""The statistical gates' seed: which random stream a gate draws from, set by the harness per child.

A statistical gate (one that passes or fails by chance, at a stated false-alarm rate: listed in `[tool.dflash]
statistical_gates`) builds every seed it uses through `reseed`. Stream 0, the default and what plain pytest
runs, leaves each seed as written, so a gate run outside the harness is unchanged. The harness sets
DFLASH_GATE_SEED in each child it starts (job data, so every executor does the same); a kill by statistical
gates alone is confirmed by running them again on stream CONFIRM_SEED, whose seeds are independent of
stream 0's (`verify.run.phases.run`). A leaf: imports nothing internal, so a gate may import it.
"""

from __future__ import annotations

import hashlib
import os

__all__ = ["CONFIRM_SEED", "GATE_SEED_ENV", "gate_seed", "reseed"]

GATE_SEED_ENV = "DFLASH_GATE_SEED"
CONFIRM_SEED = 1  # the stream a statistical kill is confirmed on (fixed: a re-run reaches the same verdict)


def gate_seed() -> int:
    """The stream this process's gates draw from: DFLASH_GATE_SEED, 0 when unset."""
    text = os.environ.get(GATE_SEED_ENV, "0").strip() or "0"
    try:
        stream = int(text)
    except ValueError:
        raise ValueError(f"{GATE_SEED_ENV} must be an integer >= 0, got {text!r}") from None
    if stream < 0:
        raise ValueError(f"{GATE_SEED_ENV} must be an integer >= 0, got {text!r}")
    return stream


def reseed(base: int) -> int:
    """`base` on stream 0; on any other stream a seed drawn from (stream, base) by a hash, below 2**31 so that
    a gate may still derive seeds from it arithmetically (seed * 1_000_003 + i stays a valid torch seed)."""
    stream = gate_seed()
    if stream == 0:
        return base
    digest = hashlib.blake2b(f"{stream}:{base}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % 2**31
