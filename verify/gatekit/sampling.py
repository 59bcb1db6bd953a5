"""The law of what an engine emits under sampling, tested against the exact law of plain sampling.

Speculative sampling is lossless exactly when its output tokens follow the law plain sampling from the target
gives them: the first emitted token's law is the target's tempered, filtered distribution after the prompt
(that law is the user's to compute, from their target's logits). Token sequences count into cells (one cell
per sequence of k tokens, V**k of them) and the counts are fitted with stats.pearson_fit. Knows token ids and
probability vectors, not engines.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from verify.gatekit.stats import ALPHA_CHECK, FitResult, LawMismatch, pearson_fit
from verify.seeds import reseed

__all__ = ["FIRST_TOKEN_DRAWS", "assert_first_token_law", "cell_tokens", "first_token_fit", "output_fit",
           "sequence_counts"]  # fmt: skip

FIRST_TOKEN_DRAWS = 2000  # seeded requests per check


def sequence_counts(tokens: torch.Tensor, vocab: int) -> torch.Tensor:
    """tokens: [N] or [N, k] ids -> counts [V**k], the cell of (t_1, ..., t_k) being sum t_i * V**(k - i)."""
    tokens = torch.as_tensor(tokens, dtype=torch.long)
    tokens = tokens[:, None] if tokens.dim() == 1 else tokens
    if bool((tokens < 0).any()) or bool((tokens >= vocab).any()):
        raise AssertionError(f"token ids outside the vocabulary of {vocab}: {sorted(set(tokens.flatten().tolist()))}")
    cells = torch.zeros(tokens.shape[0], dtype=torch.long)
    for column in tokens.unbind(1):
        cells = cells * vocab + column
    return torch.bincount(cells, minlength=vocab ** tokens.shape[1])


def cell_tokens(cell: int, vocab: int, length: int) -> tuple[int, ...]:
    """The token sequence of a cell of sequence_counts (a fit's worst_cell, read back)."""
    out = []
    for _ in range(length):
        cell, token = divmod(cell, vocab)
        out.append(token)
    return tuple(reversed(out))


def output_fit(tokens: torch.Tensor, law: torch.Tensor, alpha: float = ALPHA_CHECK) -> FitResult:
    """Sequences [N, k] (or first tokens [N]) against their exact law, a tensor [V] * k."""
    tokens = torch.as_tensor(tokens, dtype=torch.long)
    length = 1 if tokens.dim() == 1 else tokens.shape[1]
    if law.dim() != length or len(set(law.shape)) != 1:
        raise ValueError(f"the law of {length}-token sequences must be [V] * {length}, got {tuple(law.shape)}")
    return pearson_fit(sequence_counts(tokens, law.shape[0]), law.flatten(), alpha)


def first_token_fit(
    sample_first: Callable[[int], int],
    law: torch.Tensor,
    *,
    num_draws: int = FIRST_TOKEN_DRAWS,
    alpha: float = ALPHA_CHECK,
    first_seed: int = 0,
) -> FitResult:
    """sample_first(seed) for seeds s .. s + num_draws - 1 (s = reseed(first_seed): `first_seed` itself under
    plain pytest and a verify run's first pass, an independent start on the stream a statistical kill is
    confirmed on, `verify.seeds`), each the first token the engine emits for a request with that seed (whose
    draft is drawn from q, like every request's: the check assumes nothing else), tested against `law` [V]
    (the target's sampling distribution after the prompt) at level `alpha`. fit.detectable_tv is the smallest
    distance seen with probability >= 0.99."""
    start = reseed(first_seed)
    tokens = torch.tensor([int(sample_first(start + i)) for i in range(num_draws)])
    return output_fit(tokens, law.double().flatten(), alpha)


def assert_first_token_law(
    sample_first: Callable[[int], int],
    law: torch.Tensor,
    *,
    num_draws: int = FIRST_TOKEN_DRAWS,
    alpha: float = ALPHA_CHECK,
    first_seed: int = 0,
) -> FitResult:
    """first_token_fit, raising LawMismatch (an AssertionError with the worst token and the fit's p-value) when the
    law is not the target's."""
    fit = first_token_fit(sample_first, law, num_draws=num_draws, alpha=alpha, first_seed=first_seed)
    if not fit.passed:
        raise LawMismatch(
            f"the first emitted token is not distributed as plain sampling's: X^2 {fit.statistic:.1f} on {fit.df} "
            f"df, p-value {fit.p_value:.2e} < {fit.alpha:.1e} or {fit.impossible} draws of probability 0; worst "
            f"token: {fit.worst_cell}",
            fit.gate_p_value,
        )
    return fit
