"""Greedy acceptance: the longest prefix of the drafted tokens that the target's own argmax agrees with."""

from __future__ import annotations

import torch


def greedy_accept(target_ids: torch.Tensor, drafted: torch.Tensor) -> int:
    """How many drafted tokens equal the target's argmax, up to the first that does not."""
    accepted = 0
    for d, t in zip(drafted.tolist(), target_ids.tolist(), strict=False):
        if d != t:
            break
        accepted += 1
    return accepted
