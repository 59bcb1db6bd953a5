"""Sampled decoding with a DFlash2 draft keeps the target's distribution: the candidate walk samples each drafted
token from its own q over the top-k candidates, and rejection sampling must use exactly that q.

The exact distribution of the first three generated tokens (x1, x2, x3) is computed from the target alone
(transformers' Qwen3ForCausalLM on every prefix; softmax(logits / T)). With block size 3 and max_tokens 4, x1 is
the prefill sample and x2, x3 come out of the first verify step: two drafted slots, the second walked from the
first. N requests with seeds 0..N-1 run batched in one engine.

Tolerance, for each pair marginal m in {(x1, x2), (x2, x3)} (36 outcomes each) with exact probabilities p_i
and empirical frequencies f_i of N independent samples:
    E[TV] = 1/2 sum_i E|f_i - p_i| <= 1/2 sum_i sqrt(p_i (1 - p_i) / N)   (Jensen),
and TV moves by at most 1/N per sample, so (McDiarmid) P(TV > E[TV] + t) <= exp(-2 N t^2); with
t = sqrt(ln(1 / delta) / (2 N)) and delta = 1e-4 the bound fails a correct runner with probability <= 1e-4
(and the seeds are fixed, so the test is deterministic). With N = 2000 and T = 0.8 the bound is about 0.10.
The harness is proved on a plain (draft_dir=None) run, which must pass (it lands near 0.4 of the bound, as
the speculative run does), and on a runner whose rejection step uses a uniform q over the candidates instead
of the walk's q, which must fail (it lands near 2.5 times the bound).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter

import pytest
import torch
import transformers

import runner.engine
from runner import Engine, EngineConfig, SamplingParams

PROMPT = [3, 2, 4]
TEMPERATURE = 0.8
NUM_SAMPLES = 2000
DELTA = 1e-4
MARGINALS = {"x1x2": (0, 1), "x2x3": (1, 2)}


@pytest.fixture(scope="module")
def exact_joint(walk_pair) -> dict[tuple[int, ...], float]:
    """P(x1, x2, x3) under the target alone."""
    target = transformers.Qwen3ForCausalLM.from_pretrained(walk_pair[0], dtype=torch.float32).eval()
    vocab = target.config.vocab_size
    joint: dict[tuple[int, ...], float] = {(): 1.0}
    with torch.inference_mode():
        for _ in range(3):
            prefixes = list(joint)
            logits = target(torch.tensor([PROMPT + list(p) for p in prefixes])).logits[:, -1]
            probs = torch.softmax(logits.double() / TEMPERATURE, dim=-1).tolist()
            joint = {p + (x,): joint[p] * probs[i][x] for i, p in enumerate(prefixes) for x in range(vocab)}
    return joint


def marginal(joint: dict[tuple[int, ...], float], axes: tuple[int, ...]) -> dict[tuple[int, ...], float]:
    out: dict[tuple[int, ...], float] = {}
    for outcome, p in joint.items():
        key = tuple(outcome[a] for a in axes)
        out[key] = out.get(key, 0.0) + p
    return out


def tolerance(exact: dict[tuple[int, ...], float], num_samples: int) -> float:
    expected_tv = 0.5 * sum(math.sqrt(p * (1 - p) / num_samples) for p in exact.values())
    return expected_tv + math.sqrt(math.log(1 / DELTA) / (2 * num_samples))


def sample_first_tokens(walk_pair, use_draft: bool) -> tuple[list[tuple[int, ...]], Counter[int]]:
    """The first three generated tokens of NUM_SAMPLES seeded requests, and the first acceptance lengths."""
    config = EngineConfig(block_size=3, max_num_seqs=NUM_SAMPLES, num_pages=NUM_SAMPLES + 8)
    engine = Engine.from_pretrained(walk_pair[0], walk_pair[1] if use_draft else None, config=config)
    params = [SamplingParams(max_tokens=4, temperature=TEMPERATURE, seed=seed) for seed in range(NUM_SAMPLES)]
    outs = engine.generate([PROMPT] * NUM_SAMPLES, params)
    return [out.token_ids[:3] for out in outs], Counter(out.acceptance_lengths[0] for out in outs)


def total_variations(samples: list[tuple[int, ...]], joint: dict[tuple[int, ...], float]) -> dict[str, float]:
    """Per marginal: (TV between the empirical and the exact distribution) / tolerance."""
    ratios = {}
    for name, axes in MARGINALS.items():
        exact = marginal(joint, axes)
        counts = Counter(tuple(s[a] for a in axes) for s in samples)
        tv = 0.5 * sum(abs(counts[k] / len(samples) - exact.get(k, 0.0)) for k in set(exact) | set(counts))
        ratios[name] = tv / tolerance(exact, len(samples))
    return ratios


def test_speculative_sampling_keeps_the_target_distribution(walk_pair, exact_joint) -> None:
    samples, first_lengths = sample_first_tokens(walk_pair, use_draft=True)
    # Not blind: the walk's drafts are accepted whole in some requests and rejected at each slot in others.
    assert set(first_lengths) == {1, 2, 3}, first_lengths
    ratios = total_variations(samples, exact_joint)
    assert all(r <= 1 for r in ratios.values()), f"TV / tolerance: {ratios}"


def test_plain_sampling_passes_the_same_bound(walk_pair, exact_joint) -> None:
    samples, _ = sample_first_tokens(walk_pair, use_draft=False)
    ratios = total_variations(samples, exact_joint)
    assert all(r <= 1 for r in ratios.values()), f"TV / tolerance: {ratios}"


def test_a_wrong_q_fails_the_bound(walk_pair, exact_joint, monkeypatch: pytest.MonkeyPatch) -> None:
    """Proves the harness: rejection sampling with a uniform q over the candidates breaks the distribution."""
    accept = runner.engine.rejection_accept

    def uniform_q(drafted, target_probs, draft_probs, draft_indices, generator):
        assert draft_indices is not None, "a DFlash2 draft passes its candidates"
        uniform = torch.full_like(draft_probs, 1 / draft_probs.shape[-1])
        return accept(drafted, target_probs, uniform, draft_indices, generator)

    monkeypatch.setattr(runner.engine, "rejection_accept", uniform_q)
    samples, _ = sample_first_tokens(walk_pair, use_draft=True)
    ratios = total_variations(samples, exact_joint)
    assert max(ratios.values()) > 1.5, f"TV / tolerance: {ratios}"


def test_the_exact_distribution_is_a_distribution(exact_joint) -> None:
    assert set(exact_joint) == set(itertools.product(range(6), repeat=3))
    assert math.isclose(sum(exact_joint.values()), 1.0, abs_tol=1e-9)
