"""The harness that tests the acceptance rule this runner calls against speculative sampling's closed form
(the shipped gate kit's verify.gatekit.rule: the law, the counting and the fit; this module is the runner's
side of it: which functions give p, q and the rule, and the dense reference that computes the law's inputs).

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

import runner.dflash2
import runner.engine
import runner.proposer
from verify import (
    FitResult,
    RuleFit,
    case_level,
    law_power,
    normalise,
    pearson_fit,
    rule_counts,
    speculative_law,
    spread,
)

Rule = Callable[..., tuple[torch.Tensor, torch.Tensor]]
ProbsFn = Callable[..., torch.Tensor]


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
    counts = rule_counts(
        lambda g: pipeline.accept(drafted, p, q, indices, g), case.num_drafted, case.vocab, num_draws, generator
    )
    return drafted, counts


def case_power(case: RuleCase, num_draws: int, alpha: float) -> float:
    """The total-variation distance the case's test detects with probability >= 0.99 (no draws needed)."""
    drafted, *_ = case_inputs(case, RulePipeline(), torch.Generator().manual_seed(case.seed))
    return law_power(closed_form(case, drafted), num_draws, alpha)


@dataclass(frozen=True, slots=True)
class CaseResult:
    case: RuleCase
    drafted: tuple[int, ...]
    fit: FitResult

    def describe(self) -> str:
        return RuleFit(self.case.name, self.drafted, self.case.vocab, self.fit).describe()


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
