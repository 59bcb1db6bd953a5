"""The exact law of a speculative acceptance rule, and the check of a rule against it.

Closed form (Leviathan et al. 2023), for drafted tokens x_0..x_{n-1}, the target's rows p_0..p_n and the draft's
q_0..q_{n-1} (all [V]): with r_i = min(1, p_i(x_i) / q_i(x_i)) (1 where q_i(x_i) = 0 < p_i(x_i)), one call of
the rule returns (a, y) with
    P(a = j, y = v) = r_0 ... r_{j-1} * (1 - r_j) * res_j(v)    for j < n,  res_j = norm(max(0, p_j - q_j))
    P(a = n, y = v) = r_0 ... r_{n-1} * p_n(v)                   (all accepted: the bonus from p_n)
(res_j falls back to p_j when p_j - q_j has no positive mass). That is the joint law of the acceptance length
and the token after it over the whole block: a rule that reuses one uniform across positions, resamples from
an unnormalised or shifted residual, or draws the bonus from the wrong row has a different law even where each
position's marginal is right.

A rule is any callable; this module knows tensors and generators, not engines, drafters or models. A drafter
that proposes over a candidate set hands q over its candidates: `spread` turns that into the vocabulary-wide q
the closed form needs (0 off the candidates, so the residual keeps all of p's mass there).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from verify.gatekit.stats import ALPHA_CHECK, FitResult, LawMismatch, detectable_tv, pearson_fit, pooling
from verify.seeds import reseed

__all__ = [
    "RULE_DRAWS",
    "AcceptanceRule",
    "RuleFit",
    "acceptance_rule_fit",
    "assert_acceptance_rule_exact",
    "law_power",
    "normalise",
    "rule_counts",
    "speculative_law",
    "spread",
]

RULE_DRAWS = 2000  # calls of the rule per case: 0.07-0.10 detectable total variation on 8-32 cells

# rule(p [n + 1, V], q [n, V], drafted [n], generator) -> (number accepted, the token after them)
AcceptanceRule = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Generator], tuple[object, object]]


def speculative_law(p: torch.Tensor, q: torch.Tensor, drafted: torch.Tensor) -> torch.Tensor:
    """p: [n + 1, V], q: [n, V] (vocabulary-wide), drafted: [n] -> P(a = j, y = v) as [n + 1, V] (float64)."""
    p, q = p.double(), q.double()
    n = drafted.numel()
    px = p[:n].gather(1, drafted[:, None])[:, 0]
    qx = q.gather(1, drafted[:, None])[:, 0]
    ratio = torch.where(qx > 0, (px / qx.clamp_min(1e-300)).clamp(max=1.0), (px > 0).double())
    residual = (p[:n] - q).clamp_min(0)
    mass = residual.sum(-1, keepdim=True)
    residual = torch.where(mass > 0, residual / mass.clamp_min(1e-300), p[:n])
    reach = torch.cat([torch.ones(1, dtype=torch.float64), ratio.cumprod(0)])  # P(a >= j), j = 0..n
    law = torch.empty_like(p)
    law[:n] = (reach[:n] * (1 - ratio))[:, None] * residual
    law[n] = reach[n] * p[n]
    return law


def spread(q: torch.Tensor, candidates: torch.Tensor, vocab: int) -> torch.Tensor:
    """q over each slot's distinct candidates [n, k] as a vocabulary-wide law [n, V] (float64)."""
    return torch.zeros(q.shape[0], vocab, dtype=torch.float64).scatter_add(1, candidates, q.double())


def normalise(probs: torch.Tensor) -> torch.Tensor:
    """Rows rescaled to sum to 1 in float64 (a float32 softmax sums to 1 within 1e-7, the fit wants 1e-9)."""
    probs = probs.double()
    return probs / probs.sum(-1, keepdim=True)


def rule_counts(
    draw: Callable[[torch.Generator], tuple[object, object]],
    num_drafted: int,
    vocab: int,
    num_draws: int,
    generator: torch.Generator,
) -> torch.Tensor:
    """Counts [n + 1, V] of (accepted, token) over `num_draws` calls of `draw(generator)`, one generator
    threaded through every call (a rule that reseeds per call shows as a law of one draw repeated)."""
    accepted, tokens = [], []
    for _ in range(num_draws):
        count, token = draw(generator)
        accepted.append(torch.as_tensor(count))
        tokens.append(torch.as_tensor(token))
    counts_flat = torch.stack(accepted).long().flatten()
    tokens_flat = torch.stack(tokens).long().flatten()
    if bool((counts_flat < 0).any()) or bool((counts_flat > num_drafted).any()):
        raise AssertionError(f"the rule accepted {sorted(set(counts_flat.tolist()))} of {num_drafted} drafted tokens")
    if bool((tokens_flat < 0).any()) or bool((tokens_flat >= vocab).any()):
        raise AssertionError(f"the rule emitted tokens outside the vocabulary of {vocab}")
    cells = counts_flat * vocab + tokens_flat
    return torch.bincount(cells, minlength=(num_drafted + 1) * vocab).view(num_drafted + 1, vocab)


def law_power(law: torch.Tensor, num_draws: int, alpha: float) -> float:
    """The total-variation distance from `law` that its test on `num_draws` draws at level `alpha` detects with
    probability >= 0.99, whatever the direction (stats.py). Needs no draws: state it beside the check."""
    flat = law.double().flatten()
    return detectable_tv(num_draws, int(pooling(flat, num_draws).max()), alpha)


@dataclass(frozen=True, slots=True)
class RuleFit:
    """One rule case's draws against its closed form: what was drafted and the goodness of fit."""

    name: str
    drafted: tuple[int, ...]
    vocab: int
    fit: FitResult

    @property
    def passed(self) -> bool:
        return self.fit.passed

    def describe(self) -> str:
        a, y = divmod(self.fit.worst_cell, self.vocab)
        return (
            f"{self.name}: drafted {self.drafted}, X^2 {self.fit.statistic:.1f} on {self.fit.df} df, "
            f"p-value {self.fit.p_value:.2e} < {self.fit.alpha:.1e} or {self.fit.impossible} draws of probability 0; "
            f"worst cell: {a} accepted then token {y}"
        )


def acceptance_rule_fit(
    rule: AcceptanceRule,
    p: torch.Tensor,
    q: torch.Tensor,
    drafted: torch.Tensor,
    *,
    num_draws: int = RULE_DRAWS,
    alpha: float = ALPHA_CHECK,
    seed: int = 0,
    name: str = "rule",
) -> RuleFit:
    """`num_draws` calls of rule(p, q, drafted, generator) from one generator seeded with `reseed(seed)` (the
    run's gate seed stream: `seed` itself under plain pytest and a verify run's first pass, an independent seed
    on the stream a statistical kill is confirmed on, `verify.seeds`), tested against
    speculative_law(p, q, drafted) at level `alpha` (the default keeps the false-alarm rate at most 1e-3; several
    cases in one test share that: pass stats.case_level(num_cases)). p: [n + 1, V], q: [n, V], rows summing to 1."""
    drafted = torch.as_tensor(drafted, dtype=torch.long).flatten()
    n, vocab = drafted.numel(), p.shape[-1]
    if p.shape != (n + 1, vocab) or q.shape != (n, vocab):
        raise ValueError(f"p must be [{n + 1}, V] and q [{n}, V] for {n} drafted tokens; got {tuple(p.shape)}, "
                         f"{tuple(q.shape)}")  # fmt: skip
    generator = torch.Generator().manual_seed(reseed(seed))
    counts = rule_counts(lambda g: rule(p, q, drafted, g), n, vocab, num_draws, generator)
    law = speculative_law(normalise(p), normalise(q), drafted)
    return RuleFit(name, tuple(drafted.tolist()), vocab, pearson_fit(counts, law, alpha))


def assert_acceptance_rule_exact(
    rule: AcceptanceRule,
    p: torch.Tensor,
    q: torch.Tensor,
    drafted: torch.Tensor,
    *,
    num_draws: int = RULE_DRAWS,
    alpha: float = ALPHA_CHECK,
    seed: int = 0,
    name: str = "rule",
) -> RuleFit:
    """acceptance_rule_fit, raising LawMismatch (an AssertionError with the worst cell and the fit's p-value)
    when the rule's law is not the closed form's. Returns the fit, whose fit.detectable_tv states what the
    check could see."""
    result = acceptance_rule_fit(rule, p, q, drafted, num_draws=num_draws, alpha=alpha, seed=seed, name=name)
    if not result.passed:
        message = f"the rule's joint law differs from speculative sampling's: {result.describe()}"
        raise LawMismatch(message, result.fit.gate_p_value)
    return result
