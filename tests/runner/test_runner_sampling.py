"""Sampled speculative decoding keeps the target's distribution (Leviathan et al. 2023): the first three tokens
of N seeded requests follow the target's own filtered distribution, exactly computed from transformers'
Qwen3ForCausalLM on the same weights, for temperature, top-k and top-p settings.

The test. With a vocab of 8 and max_tokens 3, the outcome (t1, t2, t3) has at most 512 values; its exact law
P(t1) P(t2 | t1) P(t3 | t1, t2) comes from one batched transformers forward and an independent top-k/top-p
filter written here. max_tokens 3 makes one verify step carry t2 and t3, so every branch of the acceptance rule
is taken (accept, reject and resample from the residual, bonus). Over N = 2000 requests seeded 0..N-1:
  - support: no outcome of probability zero (outside top-k/top-p) is ever sampled;
  - fit: Pearson's chi-square over the outcomes, those with expected count < 5 pooled into one bin, stays
    below its (1 - 1e-4) quantile for the pooled degrees of freedom (Wilson-Hilferty approximation). A
    correct sampler fails this with probability 1e-4 per setting; the seeds are fixed, so the test is
    deterministic.
Plain sampling (no draft) goes through the same check, and a sampler that accepts every drafted token (the
classic bug) must fail it: the harness is proved able to see a wrong distribution.
"""

from __future__ import annotations

import math
from collections import Counter

import pytest
import torch
import transformers

import runner.engine
from runner import Engine, EngineConfig, SamplingParams
from runner.sampling import draw

PROMPT = [1, 2, 3]
NUM_SAMPLES = 2000
ALPHA = 1e-4
Z_ALPHA = 3.719  # the standard normal's (1 - 1e-4) quantile

SETTINGS = {
    "T1": {"temperature": 1.0},
    "T0.7-top_k3": {"temperature": 0.7, "top_k": 3},
    "T1.3-top_p0.8": {"temperature": 1.3, "top_p": 0.8},
    "T1-top_k5-top_p0.9": {"temperature": 1.0, "top_k": 5, "top_p": 0.9},
}


def filtered(logits: torch.Tensor, temperature: float, top_p: float = 1.0, top_k: int = 0) -> torch.Tensor:
    """softmax(logits / T), restricted to the top_k most likely, then to the smallest most-likely set whose
    mass reaches top_p; renormalised. [..., V] float64."""
    probs = torch.softmax(logits.double() / temperature, dim=-1)
    ranked, order = probs.sort(dim=-1, descending=True)
    keep = torch.ones_like(ranked, dtype=torch.bool)
    if top_k > 0:
        keep[..., top_k:] = False
    ranked = ranked * keep
    ranked = ranked / ranked.sum(-1, keepdim=True)
    mass_before = ranked.cumsum(-1) - ranked
    keep &= mass_before < top_p
    ranked = ranked * keep
    return torch.zeros_like(probs).scatter(-1, order, ranked / ranked.sum(-1, keepdim=True))


@pytest.fixture(scope="module")
def exact_law(agreeing_pair):
    """setting -> {(t1, t2, t3): probability} under the target alone."""
    target_dir, _ = agreeing_pair
    hf = transformers.Qwen3ForCausalLM.from_pretrained(target_dir, dtype=torch.float32).eval()
    vocab = hf.config.vocab_size
    pairs = [(a, b) for a in range(vocab) for b in range(vocab)]
    with torch.no_grad():
        logits = hf(torch.tensor([PROMPT + [a, b] for a, b in pairs])).logits  # [V*V, P+2, V]
    n = len(PROMPT)
    laws = {}
    for name, setting in SETTINGS.items():
        p1 = filtered(logits[0, n - 1], **setting)
        p2 = filtered(logits[:, n], **setting)  # row (a, b): P(. | a)
        p3 = filtered(logits[:, n + 1], **setting)  # row (a, b): P(. | a, b)
        law = {}
        for row, (a, b) in enumerate(pairs):
            for c in range(vocab):
                law[a, b, c] = float(p1[a] * p2[row, b] * p3[row, c])
        assert math.isclose(sum(law.values()), 1.0, rel_tol=1e-9)
        laws[name] = law
    return laws


def chi_square_quantile(df: int) -> float:
    """Wilson-Hilferty: the (1 - ALPHA) quantile of chi-square with df degrees of freedom."""
    h = 2 / (9 * df)
    return df * (1 - h + Z_ALPHA * math.sqrt(h)) ** 3


def fit(law: dict[tuple[int, int, int], float], samples: Counter) -> tuple[float, float]:
    """(chi-square statistic, its 1 - ALPHA quantile). Outcomes expected fewer than 5 times share one bin."""
    impossible = {k: v for k, v in samples.items() if law.get(k, 0.0) == 0.0}
    assert not impossible, f"sampled outcomes of probability zero: {impossible}"
    total = sum(samples.values())
    bins, rest_expected, rest_observed = [], 0.0, 0
    for outcome, prob in law.items():
        if prob * total >= 5:
            bins.append((prob * total, samples.get(outcome, 0)))
        else:
            rest_expected += prob * total
            rest_observed += samples.get(outcome, 0)
    if rest_expected > 0:
        bins.append((rest_expected, rest_observed))
    statistic = sum((observed - expected) ** 2 / expected for expected, observed in bins)
    return statistic, chi_square_quantile(len(bins) - 1)


def sample(pair, use_draft: bool, setting: dict[str, float]) -> Counter:
    target_dir, draft_dir = pair
    config = EngineConfig(max_num_seqs=1000, num_pages=1000, block_size=4)
    engine = Engine.from_pretrained(target_dir, draft_dir if use_draft else None, config=config)
    params = [SamplingParams(max_tokens=3, seed=seed, **setting) for seed in range(NUM_SAMPLES)]  # type: ignore[arg-type]
    return Counter(out.token_ids for out in engine.generate([PROMPT] * NUM_SAMPLES, params))


# Every setting speculatively; plain sampling as the control on two of them.
RUNS = [(name, True) for name in SETTINGS] + [("T1", False), ("T1-top_k5-top_p0.9", False)]


@pytest.mark.parametrize(
    ("setting", "use_draft"), RUNS, ids=[f"{name}-{'speculative' if d else 'plain'}" for name, d in RUNS]
)
def test_first_tokens_follow_the_target_distribution(agreeing_pair, exact_law, setting: str, use_draft: bool) -> None:
    statistic, limit = fit(exact_law[setting], sample(agreeing_pair, use_draft, SETTINGS[setting]))
    assert statistic < limit


def test_dflash2_candidates_keep_the_target_distribution(agreeing_pair2, exact_law) -> None:
    """DFlash2 drafts through its candidate walk; q lives on the candidates (the draft_indices branch)."""
    statistic, limit = fit(exact_law["T1"], sample(agreeing_pair2, True, SETTINGS["T1"]))
    assert statistic < limit


def _accept_all(drafted, target_probs, draft_probs, draft_indices, generator):
    return len(drafted), draw(target_probs[len(drafted)], generator)


def _resample_from_target(drafted, target_probs, draft_probs, draft_indices, generator):
    """Rejects like the real rule but then draws from p instead of norm(max(p - q, 0))."""
    for i, token in enumerate(drafted):
        q, p = float(draft_probs[i, token]), float(target_probs[i, token])
        if not float(torch.rand((), generator=generator)) * q < p:
            return i, draw(target_probs[i], generator)
    return len(drafted), draw(target_probs[len(drafted)], generator)


WRONG_SAMPLERS = {"accept-all": _accept_all, "resample-from-target": _resample_from_target}


@pytest.mark.parametrize("wrong", list(WRONG_SAMPLERS))
def test_the_check_sees_a_wrong_sampler(agreeing_pair, exact_law, monkeypatch: pytest.MonkeyPatch, wrong: str) -> None:
    monkeypatch.setattr(runner.engine, "rejection_accept", WRONG_SAMPLERS[wrong])
    statistic, limit = fit(exact_law["T1"], sample(agreeing_pair, True, SETTINGS["T1"]))
    assert statistic > limit
