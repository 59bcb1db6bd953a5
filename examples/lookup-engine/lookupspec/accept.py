"""Speculative sampling's acceptance rule: which drafted tokens to keep, and the token after them."""

from __future__ import annotations

import torch


def accept(p: torch.Tensor, q: torch.Tensor, drafted: torch.Tensor, generator: torch.Generator) -> tuple[int, int]:
    """p [k + 1, V] the target's law per row, q [k, V] the drafter's, drafted [k] -> (accepted, next token).

    Drafted token i is kept with probability min(1, p_i(x) / q_i(x)); at the first rejection the next token
    comes from norm(max(0, p_i - q_i)); when all are kept, the bonus comes from the last row p_k.
    """
    n = drafted.numel()
    for i in range(n):
        x = int(drafted[i])
        ratio = p[i, x] / q[i, x]
        if float(torch.rand((), generator=generator)) >= float(ratio):
            residual = (p[i] - q[i]).clamp(min=0)
            if float(residual.sum()) <= 0:
                residual = p[i]
            return i, int(torch.multinomial(residual, 1, generator=generator))
    return n, int(torch.multinomial(p[n], 1, generator=generator))
