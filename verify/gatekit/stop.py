"""The law of what a verify step appends when a stop token (EOS) ends the block, and its check.

A step appends the accepted drafted prefix and the token after it (speculative_law's (a, y)), cut after the
first stop token: the tokens past a stop are never a user's. With k the first position where the drafted
block holds the stop token s, every outcome that accepted x_k (a > k) appends x_0 .. x_k and ends there, so
    P(ends after j tokens, last v) = law[j, v]                 for j < k, or j = k and v != s
    P(ends after k tokens, last s) = law[k, s] + sum_{a > k} law[a, :]
and rows past k have probability 0 (a step that goes on past a stop fails at once). Without a stop among the
drafts the law is speculative_law's unchanged (a y equal to s ends the block by itself). The cells are
(tokens before the last, last token), as the rule check's (accepted, token). Knows tensors, not engines.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from verify.gatekit.adapters import loop_step
from verify.gatekit.rule import RULE_DRAWS, RuleFit, normalise, rule_counts, speculative_law
from verify.gatekit.stats import ALPHA_CHECK, LawMismatch, pearson_fit
from verify.seeds import reseed

__all__ = ["assert_stop_law", "stop_fit", "stop_law"]

# step(p [n + 1, V], q [n, V], drafted [n], generator) -> the tokens the step appends (stop included)
Step = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Generator], Sequence[int]]


def stop_law(p: torch.Tensor, q: torch.Tensor, drafted: torch.Tensor, stop_token: int) -> torch.Tensor:
    """P(the step appends j tokens before its last, the last being v) as [n + 1, V] (float64), the block cut
    after the first stop token."""
    law = speculative_law(p, q, drafted)
    hits = (drafted == int(stop_token)).nonzero()
    if hits.numel() == 0:
        return law
    k = int(hits[0, 0])
    cut = torch.zeros_like(law)
    cut[: k + 1] = law[: k + 1]
    cut[k, int(stop_token)] += law[k + 1 :].sum()
    return cut


def stop_fit(
    step: Step,
    p: torch.Tensor,
    q: torch.Tensor,
    drafted: torch.Tensor,
    stop_token: int,
    *,
    num_draws: int = RULE_DRAWS,
    alpha: float = ALPHA_CHECK,
    seed: int = 0,
    name: str = "stop",
) -> RuleFit:
    """`num_draws` calls of step(p, q, drafted, generator) from one generator seeded with reseed(seed), the
    appended tokens counted as (tokens before the last, last token) and tested against stop_law at `alpha`."""
    drafted = torch.as_tensor(drafted, dtype=torch.long).flatten()
    n, vocab = drafted.numel(), p.shape[-1]
    if p.shape != (n + 1, vocab) or q.shape != (n, vocab):
        raise ValueError(f"p must be [{n + 1}, V] and q [{n}, V] for {n} drafted tokens; got {tuple(p.shape)}, "
                         f"{tuple(q.shape)}")  # fmt: skip
    if not 0 <= int(stop_token) < vocab:
        raise ValueError(f"the stop token {stop_token} is outside the vocabulary of {vocab}")
    adapted = loop_step(step)
    generator = torch.Generator().manual_seed(reseed(seed))

    def draw(g: torch.Generator) -> tuple[Any, Any]:
        return adapted(p, q, drafted, g)

    counts = rule_counts(draw, n, vocab, num_draws, generator)
    law = stop_law(normalise(p), normalise(q), drafted, int(stop_token))
    return RuleFit(name, tuple(drafted.tolist()), vocab, pearson_fit(counts, law, alpha))


def assert_stop_law(
    step: Step,
    p: torch.Tensor,
    q: torch.Tensor,
    drafted: torch.Tensor,
    stop_token: int,
    *,
    num_draws: int = RULE_DRAWS,
    alpha: float = ALPHA_CHECK,
    seed: int = 0,
    name: str = "stop",
) -> RuleFit:
    """stop_fit, raising LawMismatch (an AssertionError stating the fit's p-value) when what the step appends
    does not follow the law of a block cut at its first stop token."""
    result = stop_fit(step, p, q, drafted, stop_token, num_draws=num_draws, alpha=alpha, seed=seed, name=name)
    if not result.passed:
        message = f"the tokens appended up to the stop token {stop_token} differ from their law: {result.describe()}"
        raise LawMismatch(message, result.fit.gate_p_value)
    return result
