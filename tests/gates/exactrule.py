"""The acceptance rule's closed form and the harness that tests the rule the engine calls against it.

Closed form (Leviathan et al. 2023), for drafted tokens x_0..x_{n-1}, the target's rows p_0..p_n and the draft's
q_0..q_{n-1} (all [V]): with r_i = min(1, p_i(x_i) / q_i(x_i)) (1 where q_i(x_i) = 0 < p_i(x_i)), one call of
the rule returns (a, y) with
    P(a = j, y = v) = r_0 ... r_{j-1} * (1 - r_j) * res_j(v)    for j < n,  res_j = norm(max(0, p_j - q_j))
    P(a = n, y = v) = r_0 ... r_{n-1} * p_n(v)                   (all accepted: the bonus from p_n)
(res_j falls back to p_j when p_j - q_j has no positive mass). That is the joint law of the acceptance length
and the token after it over the whole block: a rule that reuses one uniform across positions, resamples from
an unnormalised or shifted residual, or draws the bonus from the wrong row has a different law even where each
position's marginal is right.

DFlash2 (runner/dflash2.py, runner/proposer.py `_walk`): slot i drafts x_i from q_i over its top-k candidates
c_i (distinct ids: torch.topk) and hands the rule q_i [k] with the candidates. The rule applies the same closed
form with the candidate law spread over the vocabulary: qv_i(v) = sum_j q_i[j] * [c_i[j] = v] (0 off the
candidate set, so the residual keeps all of p_i's mass there). The walk's q_i is softmax(score_i / T) without
the request's top-p/top-k (the reference's walk_distributions); p_i is the target's filtered distribution.

The harness calls the rule, the engine's sampling_probs and the walk's sampling_probs through the engine's own
module attributes (runner.engine, runner.proposer, runner.dflash2), so a mutation of the runner is what runs;
the closed form is computed from the independent dense reference's filtered_probs in float64. The rule takes
one row per call (runner/sampling.py): draws are a loop of calls whose results are stacked once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from dense_reference import filtered_probs
from exactstats import FitResult, case_level, detectable_tv, pearson_fit, pooling

import runner.dflash2
import runner.engine
import runner.proposer

Rule = Callable[..., tuple[torch.Tensor, torch.Tensor]]
ProbsFn = Callable[..., torch.Tensor]


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
    """DFlash2's q over its candidates [n, k] as a vocabulary-wide law [n, V]."""
    return torch.zeros(q.shape[0], vocab, dtype=torch.float64).scatter_add(1, candidates, q.double())


def normalise(probs: torch.Tensor) -> torch.Tensor:
    probs = probs.double()
    return probs / probs.sum(-1, keepdim=True)


@dataclass(frozen=True, slots=True)
class RuleCase:
    """One enumerated case. DFlash: draft_scores are the draft's logits [n, V]. DFlash2: the walk's scores
    [n, k] over `candidates` [n, k]. drafted: fixed ids, or None to draw them from q as the draft does."""

    name: str
    target_logits: torch.Tensor  # [n + 1, V]
    draft_scores: torch.Tensor
    temperature: float
    top_p: float = 1.0
    top_k: int = 0
    candidates: torch.Tensor | None = None
    drafted: tuple[int, ...] | None = None
    seed: int = 0

    @property
    def vocab(self) -> int:
        return self.target_logits.shape[-1]

    @property
    def num_drafted(self) -> int:
        return self.target_logits.shape[0] - 1


@dataclass(frozen=True, slots=True)
class RulePipeline:
    """What the engine runs for one verify row: p from the target's logits, q from the draft's scores, and the
    acceptance rule. The defaults read the engine's own functions at call time; power tests pass perturbed ones."""

    accept: Rule = field(default_factory=lambda: lambda *a: runner.engine.rejection_accept(*a))
    target_probs: ProbsFn = field(default_factory=lambda: lambda *a: runner.engine.sampling_probs(*a))
    draft_probs: ProbsFn = field(default_factory=lambda: lambda *a: runner.proposer.sampling_probs(*a))
    walk_probs: ProbsFn = field(default_factory=lambda: lambda *a: runner.dflash2.sampling_probs(*a))


def closed_form(case: RuleCase, drafted: torch.Tensor) -> torch.Tensor:
    """The case's law [n + 1, V] from the dense reference's distributions (float64)."""
    p = normalise(filtered_probs(case.target_logits, case.temperature, case.top_p, case.top_k))
    if case.candidates is None:
        q = normalise(filtered_probs(case.draft_scores, case.temperature, case.top_p, case.top_k))
    else:
        q = spread(torch.softmax(case.draft_scores.double() / case.temperature, -1), case.candidates, case.vocab)
    return speculative_law(p, q, drafted)


def case_inputs(
    case: RuleCase, pipeline: RulePipeline, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(drafted ids [n], p, q, candidates) as the engine hands them to the rule; unfixed ids are drawn from q
    with the case's generator, as the draft draws them."""
    t, top_p, top_k = case.temperature, case.top_p, case.top_k
    p = pipeline.target_probs(case.target_logits, t, top_p, top_k)
    if case.candidates is None:
        q, indices = pipeline.draft_probs(case.draft_scores, t, top_p, top_k), None
    else:
        q, indices = pipeline.walk_probs(case.draft_scores, t), case.candidates
    if case.drafted is None:  # the draft's own draw: slot i from q_i
        slots = torch.multinomial(q, 1, generator=generator)[:, 0]
        drafted = slots if indices is None else indices.gather(1, slots[:, None])[:, 0]
    else:
        drafted = torch.tensor(case.drafted, dtype=torch.long)
    return drafted, p, q, indices


def sample_case(case: RuleCase, pipeline: RulePipeline, num_draws: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(drafted ids [n], counts [n + 1, V]) of `num_draws` calls of the pipeline's rule on the case."""
    generator = torch.Generator().manual_seed(case.seed)
    drafted, p, q, indices = case_inputs(case, pipeline, generator)
    accepted, tokens = [], []
    for _ in range(num_draws):
        count, token = pipeline.accept(drafted, p, q, indices, generator)
        accepted.append(count)
        tokens.append(token)
    cells = torch.stack(accepted).long() * case.vocab + torch.stack(tokens).long()
    counts = torch.bincount(cells, minlength=(case.num_drafted + 1) * case.vocab)
    return drafted, counts[: (case.num_drafted + 1) * case.vocab].view(case.num_drafted + 1, case.vocab)


def case_power(case: RuleCase, num_draws: int, alpha: float) -> float:
    """The total-variation distance the case's test detects with probability >= 0.99 (no draws needed)."""
    drafted, *_ = case_inputs(case, RulePipeline(), torch.Generator().manual_seed(case.seed))
    law = closed_form(case, drafted).flatten()
    return detectable_tv(num_draws, int(pooling(law, num_draws).max()), alpha)


@dataclass(frozen=True, slots=True)
class CaseResult:
    case: RuleCase
    drafted: tuple[int, ...]
    fit: FitResult

    def describe(self) -> str:
        a, y = divmod(self.fit.worst_cell, self.case.vocab)
        return (
            f"{self.case.name}: drafted {self.drafted}, X^2 {self.fit.statistic:.1f} on {self.fit.df} df, "
            f"p-value {self.fit.p_value:.2e} < {self.fit.alpha:.1e} or {self.fit.impossible} draws of probability 0; "
            f"worst cell: {a} accepted then token {y}"
        )


def rule_fits(
    cases: list[RuleCase],
    num_draws: int,
    pipeline: RulePipeline | None = None,
    stop_at_first: bool = False,
    alpha: float | None = None,
) -> list[CaseResult]:
    """The gates' core: each case's draws against its closed form at level `alpha` (case_level(len(cases)),
    Bonferroni, unless a check of part of a gate passes the gate's own level)."""
    pipeline = pipeline or RulePipeline()
    alpha = case_level(len(cases)) if alpha is None else alpha
    results = []
    for case in cases:
        drafted, counts = sample_case(case, pipeline, num_draws)
        fit = pearson_fit(counts, closed_form(case, drafted), alpha)
        results.append(CaseResult(case, tuple(drafted.tolist()), fit))
        if stop_at_first and not fit.passed:
            break
    return results
