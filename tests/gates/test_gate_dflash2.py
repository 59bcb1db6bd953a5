"""Gates on the DFlash2 fixture: the candidate walk (never the per-slot argmax), the grouped dynamic causal
conv, batched equals solo, and the walk's q feeding rejection sampling.

Each draft call of a real run (rows moving) is replayed by the independent dense implementation, conv and
walk included; the walk must differ from the argmax somewhere on this fixture, or a silent argmax fallback
would go unseen.
"""

from __future__ import annotations

import json

import pytest
import torch
from dense_reference import Checkpoint, draft_block, filtered_probs, target_forward, walk, walk_distributions
from gatekit import FIXTURE2, assert_same_drafts, greedy, make_engine, rejection_calls, row_owners

import runner.engine
from runner import SamplingParams

pytestmark = pytest.mark.gate

ATOL = 2e-4


@pytest.fixture(scope="module")
def prompts2() -> list[list[int]]:
    return [list(p) for p in json.loads((FIXTURE2 / "manifest.json").read_text())["audit_prompts"]]


@pytest.fixture  # function scope on purpose: see gatekit.py
def replayed(prompts2: list[list[int]]):
    """(ours, reference walk, reference argmax, max logit diff) per drafted block of a batched run."""
    engine = make_engine(fixture=FIXTURE2, max_num_seqs=3, page_size=4)
    calls = []
    engine.draft.register_forward_hook(
        lambda m, a, out: calls.append((a[0], out.clone(), row_owners(engine, out.shape[0])))
    )
    ids = [engine.add_request(p, greedy(max_tokens=10 + 3 * i)) for i, p in enumerate(prompts2[:6])]
    while engine.has_unfinished():
        engine.step()
    full = {i: list(engine.output(i).prompt_ids) + list(engine.output(i).token_ids) for i in ids}
    tc, dc = Checkpoint(FIXTURE2 / "target"), Checkpoint(FIXTURE2 / "draft")
    traced = {i: iter(engine.trace.for_request(i)) for i in ids}
    rows = []
    with torch.inference_mode():
        for inputs, hidden, owner in calls:
            logits = engine.draft.logits(hidden[:, 1:], engine.target.lm_head).float()
            for row, rid in enumerate(owner):
                L, size = int(inputs.block_positions[row, 0]), int(inputs.block_valid[row].sum())
                ref_hidden, ref_logits = draft_block(dc, tc, full[rid][:L], full[rid][L], size)
                diff = (logits[row, : size - 1].cpu() - ref_logits).abs().max().item()
                ours = next(traced[rid]).drafted_ids
                rows.append(
                    (
                        ours,
                        tuple(walk(dc, ref_hidden, ref_logits, full[rid][L])),
                        tuple(ref_logits.argmax(-1).tolist()),
                        diff,
                    )
                )
    return engine, rows


def test_dflash2_block_logits_match_dense_reference(replayed) -> None:
    _, rows = replayed
    assert len(rows) >= 15
    worst = max(r[3] for r in rows)
    assert worst <= ATOL, f"DFlash2 block logits differ from the dense reference by {worst:.2e}"


def test_dflash2_drafts_match_the_dense_walk(replayed) -> None:
    _, rows = replayed
    ours, walked, argmax = [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]
    assert_same_drafts(ours, walked, "DFlash2 drafts vs the dense walk")
    differ = sum(w != a for w, a in zip(walked, argmax, strict=True))
    assert differ >= 1, "on this fixture the walk never departs from the argmax: a fallback would be invisible"


def test_dflash2_batch_drafts_equal_solo(prompts2: list[list[int]], replayed) -> None:
    batched, _ = replayed
    solo = make_engine(fixture=FIXTURE2)
    for i, prompt in enumerate(prompts2[:6]):
        (out,) = solo.generate([prompt], greedy(max_tokens=10 + 3 * i))
        assert out.token_ids == batched.output(i).token_ids
        assert_same_drafts(batched.trace.drafted_blocks(i), solo.trace.drafted_blocks(out.request_id), f"request {i}")


def test_sampled_dflash2_rejects_with_the_walks_q(prompts2: list[list[int]], monkeypatch: pytest.MonkeyPatch) -> None:
    """With temperature > 0, rejection sampling must get the walk's per-step q over its candidates."""
    seen = []
    accept = runner.engine.rejection_accept

    def spy(drafted, target_probs, draft_probs, draft_indices, generator):
        seen.append((list(drafted), draft_probs, draft_indices))
        return accept(drafted, target_probs, draft_probs, draft_indices, generator)

    monkeypatch.setattr(runner.engine, "rejection_accept", spy)
    engine = make_engine(fixture=FIXTURE2)
    top_k = engine.draft.config.selector_top_k
    engine.generate(prompts2[:3], SamplingParams(max_tokens=12, temperature=1.0, seed=5))
    assert len(seen) >= 6
    for drafted, q, candidates in seen:
        assert candidates is not None, "no candidates passed: q is not the walk's distribution"
        assert q.shape == candidates.shape == (len(drafted), top_k)
        assert torch.allclose(q.sum(-1).cpu(), torch.ones(len(drafted)), atol=1e-5)
        for token, row_q, row_c in zip(drafted, q, candidates, strict=True):
            assert token in row_c.tolist() and float(row_q[row_c.tolist().index(token)]) > 0


def test_sampled_dflash2_batched_equals_solo(prompts2: list[list[int]]) -> None:
    """Seeded sampled DFlash2 rows with different budgets: a row draws only for its own slots, so it samples
    the same alone or padded into a wider batch."""
    params = [SamplingParams(max_tokens=7 + 3 * i, temperature=1.5, seed=40 + i) for i in range(4)]
    batched = make_engine(fixture=FIXTURE2, max_num_seqs=3).generate(prompts2[:4], params)
    for i, p in enumerate(params):
        (solo,) = make_engine(fixture=FIXTURE2).generate([prompts2[i]], p)
        assert solo.token_ids == batched[i].token_ids, f"request {i}"


def test_dflash2_dense_path_with_rows_moving_drafts_like_paged(prompts2: list[list[int]]) -> None:
    """The DFlash2 draft reads old context (not only the pending rows), so a request whose dense history or
    paged store did not move with its row drafts differently here."""

    def drafted(**config: object) -> list[tuple[int, ...]]:
        engine = make_engine(fixture=FIXTURE2, **config)
        outs = engine.generate(prompts2[:6], greedy())
        assert engine.trace.row_moves or config.get("max_num_seqs", 16) >= 6
        return [b for o in outs for b in engine.trace.drafted_blocks(o.request_id)]

    paged = drafted()
    assert_same_drafts(drafted(draft_attention="dense", max_num_seqs=2), paged, "DFlash2 dense, rows moving")
    assert_same_drafts(drafted(max_num_seqs=2, page_size=4), paged, "DFlash2 paged, rows moving")


def test_dflash2_greedy_speculative_equals_plain_decoding(prompts2: list[list[int]]) -> None:
    """Greedy verification is lossless: DFlash2's speculative tokens equal plain greedy decoding of the same target,
    batched (rows finishing and moving) and solo."""
    params = [greedy(max_tokens=10 + 3 * i) for i in range(len(prompts2))]
    plain = make_engine(draft=False, fixture=FIXTURE2).generate(prompts2, params)
    batched_engine = make_engine(fixture=FIXTURE2, max_num_seqs=3, page_size=4)
    batched = batched_engine.generate(prompts2, params)
    assert batched_engine.trace.row_moves, "the batch must move rows"
    solo_engine = make_engine(fixture=FIXTURE2)
    for i, (prompt, p) in enumerate(zip(prompts2, params, strict=True)):
        (solo,) = solo_engine.generate([prompt], p)
        for what, out in (("batched", batched[i]), ("solo", solo)):
            assert out.token_ids == plain[i].token_ids, f"request {i} {what}: speculative tokens differ from plain"
            assert sum(out.acceptance_lengths) + 1 == len(out.token_ids)
    lengths = [a for o in batched for a in o.acceptance_lengths]
    assert max(lengths) > 2, f"acceptance lengths {set(lengths)}: the draft never got a token accepted"


@pytest.mark.parametrize("temperature", [0.6, 1.5])
def test_sampled_dflash2_q_is_the_walks_tempered_distribution(
    prompts2: list[list[int]], monkeypatch: pytest.MonkeyPatch, temperature: float
) -> None:
    """The q handed to the acceptance rule is the walk's own softmax(scores / T) over its candidates along the path
    it drew, recomputed by the dense reference; p is the target's tempered distribution."""
    tc, dc = Checkpoint(FIXTURE2 / "target"), Checkpoint(FIXTURE2 / "draft")
    params = [SamplingParams(max_tokens=12, temperature=temperature, seed=70 + i) for i in range(4)]
    engine = make_engine(fixture=FIXTURE2, max_num_seqs=3)
    calls = rejection_calls(engine, prompts2[:4], params, monkeypatch)
    checked = 0
    for rid, prefix, drafted, p, q, candidates in calls:
        L = len(prefix) - 1
        logits, _ = target_forward(tc, prefix + drafted)
        diff = (p.float().cpu() - filtered_probs(logits[L:], temperature)).abs().max().item()
        assert diff <= 2e-5, f"request {rid} at L={L}: p differs from the target's at T={temperature} by {diff:.2e}"
        if not drafted:
            continue
        assert candidates is not None and q is not None, f"request {rid} at L={L}: no walk q handed to the rule"
        hidden, block_logits = draft_block(dc, tc, prefix[:L], prefix[L], len(drafted) + 1)
        want = walk_distributions(dc, hidden, block_logits, prefix[L], drafted, temperature)
        for t, expected in enumerate(want):
            got = {int(c): float(v) for c, v in zip(candidates[t], q[t], strict=True)}
            assert got.keys() == expected.keys(), f"request {rid} at L={L}, slot {t}: candidates differ"
            worst = max(abs(got[c] - expected[c]) for c in got)
            assert worst <= 2e-5, f"request {rid} at L={L}, slot {t}: walk q differs by {worst:.2e} at T={temperature}"
            assert expected[drafted[t]] > 0
        checked += 1
    assert checked >= 6, f"only {checked} drafted blocks checked"
