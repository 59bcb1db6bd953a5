"""Gate: sampled speculative decoding away from temperature 1. The p and q handed to the acceptance rule are
the target's and the draft's own tempered, filtered distributions (recomputed by the independent dense
implementation), and the output tokens are distributed as plain sampling of the target.

Speculative sampling is lossless for any q the draft really drew from, so a draft q at the wrong temperature
or without the top-p/top-k filter costs acceptance and never changes the output distribution: only the
recomputation of q sees it. A q (or p) that differs from the one the tokens were drawn from changes the output
distribution: the statistical test sees that, and the recomputation sees it exactly.
"""

from __future__ import annotations

import pytest
import torch
from dense_reference import Checkpoint, draft_block_logits, filtered_probs, target_forward
from gatekit import FIXTURE, make_engine, rejection_calls

from runner import SamplingParams
from verify import reseed

pytestmark = pytest.mark.gate

PROB_ATOL = 2e-5
SETTINGS = [
    pytest.param(0.6, 0.9, 0, id="t0.6-top-p"),
    pytest.param(1.5, 1.0, 6, id="t1.5-top-k"),
    pytest.param(1.5, 0.95, 12, id="t1.5-both"),
]


@pytest.fixture(scope="module")
def checkpoints() -> tuple[Checkpoint, Checkpoint]:
    return Checkpoint(FIXTURE / "target"), Checkpoint(FIXTURE / "draft")


def off_language_prompts(count: int, seed: int) -> list[list[int]]:
    """Random prompts (not the fixture's language): the target is unsure what follows, so a sampled token has
    several likely values and a wrong distribution shows in the counts."""
    generator = torch.Generator().manual_seed(seed)
    mask = int(Checkpoint(FIXTURE / "draft").cfg["dflash_config"]["mask_token_id"])
    vocab = int(Checkpoint(FIXTURE / "target").cfg["vocab_size"])
    ids = [t for t in range(vocab) if t != mask]
    return [[ids[int(i)] for i in torch.randint(len(ids), (3 + k % 4,), generator=generator)] for k in range(count)]


@pytest.mark.parametrize(("temperature", "top_p", "top_k"), SETTINGS)
def test_rule_gets_the_tempered_filtered_p_and_q(checkpoints, monkeypatch, temperature, top_p, top_k) -> None:
    target_ck, draft_ck = checkpoints
    prompts = off_language_prompts(6, seed=11)
    params = [
        SamplingParams(max_tokens=12, temperature=temperature, top_p=top_p, top_k=top_k, seed=300 + i)
        for i in range(len(prompts))
    ]
    engine = make_engine(max_num_seqs=4, page_size=4)
    calls = rejection_calls(engine, prompts, params, monkeypatch)
    full = {i: list(engine.output(i).prompt_ids) + list(engine.output(i).token_ids) for i in range(len(prompts))}
    checked_q = 0
    for rid, prefix, drafted, p, q, indices in calls:
        L = len(prefix) - 1
        assert prefix == full[rid][: L + 1], f"request {rid}: the rule ran on ids that are not the output's"
        # p: the target's distribution at the anchor and after each drafted token, on the block it verified.
        logits, _ = target_forward(target_ck, prefix + drafted)
        want_p = filtered_probs(logits[L:], temperature, top_p, top_k)
        assert p.shape == want_p.shape, f"request {rid} at L={L}: p has shape {tuple(p.shape)}"
        diff = (p.float().cpu() - want_p).abs().max().item()
        assert diff <= PROB_ATOL, (
            f"request {rid} at L={L}: p differs from the target's {temperature=} {top_p=} {top_k=} "
            f"distribution by {diff:.2e}"
        )
        if not drafted:
            continue
        # q: the draft's block distribution after the same context, with the same temperature and filters.
        assert indices is None and q is not None, f"request {rid} at L={L}: no dense q handed to the rule"
        want_q = filtered_probs(
            draft_block_logits(draft_ck, target_ck, prefix[:L], prefix[L], len(drafted) + 1), temperature, top_p, top_k
        )
        diff = (q.float().cpu() - want_q).abs().max().item()
        assert diff <= PROB_ATOL, (
            f"request {rid} at L={L}: q differs from the draft's own {temperature=} {top_p=} {top_k=} "
            f"distribution by {diff:.2e}"
        )
        assert all(want_q[i, t] > 0 for i, t in enumerate(drafted)), f"request {rid}: drafted a token q excludes"
        checked_q += 1
    assert checked_q >= 12, f"only {checked_q} drafted blocks checked"


# The statistical test. 8 prompts x 40 seeds = 320 requests of 5 tokens; tokens 2..5 of each (1280 tokens)
# come from speculative verify steps (the first from prefill). For each of them the exact distribution it must
# have been drawn from, given the tokens before it, is the target's tempered, filtered distribution p (dense
# reference). Four statistics, each a sum over the tokens of an increment with mean 0 under p:
#   - the surprisal log p(x) + H(p): the score of a temperature change (too sharp > 0, too flat < 0);
#   - the indicators "x is p's most likely token", "second", "any other", minus their probabilities.
# Under a correct sampler each sum S is a martingale with predictable variance V (the sum of the increments'
# variances under p), so z = S / sqrt(V) is approximately standard normal (martingale CLT). |z| > Z_MAX = 4.0
# has probability 6.3e-5; over 4 statistics and 2 runs (speculative and plain) the normal approximation's union
# bound is 5.1e-4 a case, but the skewed surprisal's tail is heavier: simulated (test_exact_simulated.py) at
# about 4e-4 a run for t0.6-top-p, 8e-4 a case. Seeded, so the verdict is deterministic.
# A token outside the filter (reference probability 0) fails outright.
NUM_PROMPTS, SEEDS_PER_PROMPT, NUM_TOKENS = 8, 40, 5
Z_MAX = 4.0


def output_z_scores(target_ck: Checkpoint, outs, temperature: float, top_p: float, top_k: int) -> list[float]:
    """z of the surprisal statistic and of the three rank bins over every speculative token of `outs`.

    Requests that sampled the same sequence add the same increments: each distinct sequence is recomputed once
    (the dense reference's per-row filter is most of this gate's time) and counted as often as it was drawn.
    """
    # Columns: log p(x) + H(p) (the score of a temperature change), then the indicators of rank 0, 1, >= 2.
    centred, variance = torch.zeros(4, dtype=torch.float64), torch.zeros(4, dtype=torch.float64)
    drawn: dict[tuple[tuple[int, ...], tuple[int, ...]], list] = {}  # (prompt, output) -> the requests
    for out in outs:
        assert len(out.token_ids) == NUM_TOKENS
        drawn.setdefault((tuple(out.prompt_ids), tuple(out.token_ids)), []).append(out)
    for (prompt_ids, token_ids), same in drawn.items():
        full, start, count = [*prompt_ids, *token_ids], len(prompt_ids), len(same)
        logits, _ = target_forward(target_ck, full[:-1])
        probs = filtered_probs(logits[start - 1 :], temperature, top_p, top_k).double()  # row t: token t
        for t in range(1, NUM_TOKENS):  # token t was committed by a verify step, given full[: start + t]
            token, p = full[start + t], probs[t]
            assert p[token] > 0, f"request {same[0].request_id}: token {t} = {token} lies outside the filter"
            support = p > 0
            log_p = torch.where(support, p.clamp_min(1e-300).log(), torch.zeros_like(p))
            entropy = -(p * log_p).sum()
            order = p.argsort(descending=True)
            rank = int((order == token).nonzero()[0, 0])
            bins = torch.stack([p[order[0]], p[order[1]], 1 - p[order[0]] - p[order[1]]])
            hit = torch.zeros(3, dtype=torch.float64)
            hit[min(rank, 2)] = 1
            centred[0] += count * (log_p[token] + entropy)
            variance[0] += count * (p * (log_p + entropy) ** 2).sum()
            centred[1:] += count * (hit - bins)
            variance[1:] += count * bins * (1 - bins)
    return (centred / variance.clamp_min(1e-12).sqrt()).tolist()


@pytest.mark.parametrize(("temperature", "top_p", "top_k"), SETTINGS)
def test_sampled_output_is_distributed_as_plain_sampling(
    prompts: list[list[int]], checkpoints, temperature: float, top_p: float, top_k: int
) -> None:
    target_ck, _ = checkpoints
    # In-language prompts (the draft is good, so drafted tokens are both accepted and rejected) and off-language
    # ones (the target is unsure, so its distribution is wide).
    base = prompts[4:8] + off_language_prompts(NUM_PROMPTS - 4, seed=23)
    prompts = [p for p in base for _ in range(SEEDS_PER_PROMPT)]
    params = [
        SamplingParams(max_tokens=NUM_TOKENS, temperature=temperature, top_p=top_p, top_k=top_k, seed=reseed(1000 + i))
        for i in range(len(prompts))
    ]
    # Pages for every request at once: a bug that leaks pages then fails a page gate instead of hanging this one.
    speculative = make_engine(max_num_seqs=64, num_pages=4 * len(prompts), trace=False)
    outs = speculative.generate(prompts, params)
    lengths = [a for o in outs for a in o.acceptance_lengths]
    assert max(lengths) > 1 and min(lengths) < 4, f"acceptance {set(lengths)}: the rule was never really exercised"
    z = output_z_scores(target_ck, outs, temperature, top_p, top_k)
    assert max(map(abs, z)) <= Z_MAX, f"speculative output: z (surprisal, rank 0, 1, >= 2) {[round(v, 1) for v in z]}"
    # The same test on plain sampling of the target: it must hold there too, or the statistic is the problem.
    plain = make_engine(draft=False, max_num_seqs=64, num_pages=4 * len(prompts), trace=False).generate(prompts, params)
    z_plain = output_z_scores(target_ck, plain, temperature, top_p, top_k)
    assert max(map(abs, z_plain)) <= Z_MAX, (
        f"plain sampling: z (surprisal, rank 0, 1, >= 2) {[round(v, 1) for v in z_plain]}"
    )
