"""Gate: the paged draft path, the dense (materialized) path and every page size draft the same blocks; a
forced-causal block mask moves the draft's logits, and SDPA's top-left causal mask changes its blocks.

The dense path recomputes the context's K/V from every committed feature, so it shares nothing with the paged
store: a skipped K/V write, a read bound that drops block rows or a wrong slot shows up as a difference.
"""

from __future__ import annotations

import copy
from unittest import mock

import pytest
import torch
from gatekit import assert_same_drafts, greedy, make_engine

import runner.draft
from runner.layers import attention_mask

pytestmark = pytest.mark.gate


def drafted(engine, prompts: list[list[int]]) -> list[tuple[int, ...]]:
    outs = engine.generate(prompts, greedy())
    return [b for o in outs for b in engine.trace.drafted_blocks(o.request_id)]


@pytest.fixture  # function scope on purpose: see gatekit.py
def paged_blocks(prompts: list[list[int]]) -> list[tuple[int, ...]]:
    return drafted(make_engine(page_size=16), prompts[:6])


def test_dense_path_drafts_like_paged(prompts: list[list[int]], paged_blocks: list) -> None:
    dense = drafted(make_engine(draft_attention="dense"), prompts[:6])
    assert_same_drafts(paged_blocks, dense, "paged vs dense draft attention")
    # With rows moving, each request's history (dense) and store (paged) must move with it.
    moving = make_engine(draft_attention="dense", max_num_seqs=2)
    assert_same_drafts(paged_blocks, drafted(moving, prompts[:6]), "dense draft attention with rows moving")
    assert moving.trace.row_moves


@pytest.mark.parametrize("page_size", [1, 3, 4])
def test_page_size_does_not_change_drafts(prompts: list[list[int]], paged_blocks: list, page_size: int) -> None:
    blocks = drafted(make_engine(page_size=page_size), prompts[:6])
    assert_same_drafts(blocks, paged_blocks, f"page size {page_size} vs 16")


def _first_block_logits(engine, prompts: list[list[int]]) -> torch.Tensor:
    """The draft's block logits at each request's first draft (same inputs whatever the mask): [N, B-1, V]."""
    firsts = []
    engine.draft.register_forward_hook(lambda m, args, out: firsts.append(out.clone()) if not firsts else None)
    rows = []
    for prompt in prompts:
        firsts.clear()
        engine.generate([prompt], greedy(max_tokens=6))
        with torch.inference_mode():
            rows.append(engine.draft.logits(firsts[0][0, 1:], engine.target.lm_head))
    return torch.stack(rows)


def test_forced_causal_mask_moves_the_draft(prompts: list[list[int]]) -> None:
    """The fixture's layers are non-causal. A position-aligned causal mask must move the block logits at
    (nearly) every first draft, and SDPA's top-left is_causal mask must change the drafted blocks."""
    engine = make_engine()
    base = _first_block_logits(engine, prompts)
    forced = copy.deepcopy(engine.draft)
    for layer in forced.layers:
        layer.is_causal = True
    engine.draft = forced
    moved = (_first_block_logits(engine, prompts) - base).abs().amax(dim=(1, 2))
    assert (moved > 1e-4).float().mean() >= 0.9, f"a causal mask moved only {moved.tolist()}"


def _sdpa_causal(q_positions, k_positions, k_valid, *, is_causal, sliding_window):
    # SDPA's is_causal with q_len < kv_len is aligned top-left: block slot i sees the first i + 1 keys.
    return attention_mask(q_positions - q_positions[:, :1], k_positions, k_valid, is_causal=True, sliding_window=None)


def test_sdpa_style_causal_mask_changes_the_drafts(prompts: list[list[int]]) -> None:
    def first_blocks() -> list[tuple[int, ...]]:
        engine = make_engine()
        outs = engine.generate(prompts, greedy(max_tokens=6))
        return [engine.trace.drafted_blocks(o.request_id)[0] for o in outs]

    base = first_blocks()
    with mock.patch.object(runner.draft, "attention_mask", _sdpa_causal):
        forced = first_blocks()
    changed = sum(a != b for a, b in zip(base, forced, strict=True)) / len(base)
    assert changed >= 0.5, f"SDPA's causal mask changed only {changed:.0%} of first drafted blocks"
