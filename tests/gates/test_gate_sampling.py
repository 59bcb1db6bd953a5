"""Gate: the sampled path. Top-k 1 and a tiny top-p reduce sampling to greedy; a seeded request samples the
same alone or batched; and the acceptance rule accepts a drafted token with probability min(1, p/q)
(checked statistically on the rule itself with a stated tolerance).
"""

from __future__ import annotations

import pytest
import torch
from gatekit import assert_same_drafts, greedy, make_engine

from runner import SamplingParams
from runner.sampling import rejection_accept
from verify import proportion_p_value, reseed

pytestmark = pytest.mark.gate


@pytest.fixture  # function scope on purpose: see gatekit.py
def greedy_tokens(prompts: list[list[int]]) -> list[tuple[int, ...]]:
    return [o.token_ids for o in make_engine(draft=False).generate(prompts[:4], greedy())]


@pytest.mark.parametrize(
    "params",
    [
        {"temperature": 1.0, "top_k": 1},
        {"temperature": 1.5, "top_p": 1e-6},
        {"temperature": 0.7, "top_k": 1, "top_p": 0.5},
    ],
    ids=["top-k-1", "tiny-top-p", "both"],
)
def test_degenerate_filters_reduce_to_greedy(prompts, greedy_tokens, params: dict) -> None:
    engine = make_engine()
    outs = engine.generate(prompts[:4], SamplingParams(max_tokens=24, seed=7, **params))
    assert [o.token_ids for o in outs] == greedy_tokens
    plain = make_engine(draft=False).generate(prompts[:4], SamplingParams(max_tokens=24, seed=7, **params))
    assert [o.token_ids for o in plain] == greedy_tokens
    # The draft samples from the same filtered distribution, so it drafts its greedy blocks too.
    reference = make_engine()
    greedy_outs = reference.generate(prompts[:4], greedy())
    for i, (out, greedy_out) in enumerate(zip(outs, greedy_outs, strict=True)):
        assert_same_drafts(
            engine.trace.drafted_blocks(out.request_id),
            reference.trace.drafted_blocks(greedy_out.request_id),
            f"request {i}: sampled {params} vs greedy",
        )


@pytest.mark.parametrize("temperature", [1.0, 2.5])
def test_seeded_sampling_batched_equals_solo(prompts: list[list[int]], temperature: float) -> None:
    # At 2.5 the target is flat enough that rejections and residual draws happen: every draw must come from
    # the request's own generator, or batched and solo runs part ways.
    params = [SamplingParams(max_tokens=16, temperature=temperature, seed=100 + i) for i in range(4)]
    batched = make_engine(max_num_seqs=2).generate(prompts[:4], params)
    for i, p in enumerate(params):
        (solo,) = make_engine().generate([prompts[i]], p)
        assert solo.token_ids == batched[i].token_ids
        assert solo.acceptance_lengths == batched[i].acceptance_lengths


def test_acceptance_rule_accepts_with_probability_min_one_p_over_q(record_property) -> None:
    """p(x) = 0.2, q(x) = 0.5: accept with probability 0.4. Over 4000 trials the standard error is 0.0077;
    the bound 0.035 is 4.5 standard errors, so a correct rule fails it with probability < 1e-5. Each check
    states its red's p-value first (Hoeffding's bound; 0 where a correct rule cannot fail), which
    `dflash verify` reads (docs/concepts/sampling-gates.md)."""
    vocab = 4
    p = torch.tensor([[0.2, 0.3, 0.3, 0.2], [0.25, 0.25, 0.25, 0.25]])
    q = torch.tensor([[0.5, 0.2, 0.2, 0.1]])
    generator = torch.Generator().manual_seed(reseed(0))  # the harness's stream (verify.seeds)
    trials, accepted, residual_hits = 4000, 0, torch.zeros(vocab)
    for _ in range(trials):
        count, token = rejection_accept([0], p, q, None, generator)
        accepted += count
        if count == 0:
            residual_hits[token] += 1
    rate = accepted / trials
    record_property("p_value", proportion_p_value(trials, abs(rate - 0.4)))
    assert abs(rate - 0.4) < 0.035, f"acceptance rate {rate:.3f}, expected 0.4"
    # On rejection, the token comes from norm(max(p - q, 0)) = [0, 0.1, 0.1, 0.1] / 0.3.
    record_property("p_value", 0.0)
    assert residual_hits[0] == 0
    share = residual_hits[1:] / residual_hits.sum()
    deviation = float((share - 1 / 3).abs().max())
    record_property("p_value", proportion_p_value(int(residual_hits.sum()), deviation, num_checks=3))
    assert deviation < 0.05
