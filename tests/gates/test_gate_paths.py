"""Gate: the paged draft path, the dense (materialized) path and every page size draft the same blocks, and a
forced-causal block mask drafts different ones.

The dense path recomputes the context's K/V from every committed feature, so it shares nothing with the paged
store: a skipped K/V write, a read bound that drops block rows or a wrong slot shows up as a difference.
"""

from __future__ import annotations

import copy

import pytest
from gatekit import assert_not_degenerate, assert_same_drafts, greedy, make_engine

pytestmark = pytest.mark.gate


def drafted(engine, prompts: list[list[int]]) -> list[tuple[int, ...]]:
    outs = engine.generate(prompts, greedy())
    return [b for o in outs for b in engine.trace.drafted_blocks(o.request_id)]


@pytest.fixture(scope="module")
def paged_blocks(prompts: list[list[int]]) -> list[tuple[int, ...]]:
    return drafted(make_engine(page_size=16), prompts[:6])


def test_dense_path_drafts_like_paged(prompts: list[list[int]], paged_blocks: list) -> None:
    dense = drafted(make_engine(draft_attention="dense"), prompts[:6])
    assert_same_drafts(paged_blocks, dense, "paged vs dense draft attention")


@pytest.mark.parametrize("page_size", [1, 3, 4])
def test_page_size_does_not_change_drafts(prompts: list[list[int]], paged_blocks: list, page_size: int) -> None:
    blocks = drafted(make_engine(page_size=page_size), prompts[:6])
    assert_same_drafts(blocks, paged_blocks, f"page size {page_size} vs 16")


def test_forced_causal_mask_drafts_differently(prompts: list[list[int]], paged_blocks: list) -> None:
    engine = make_engine()
    forced = copy.deepcopy(engine.draft)
    for layer in forced.layers:
        layer.is_causal = True
    engine.draft = forced
    causal = drafted(engine, prompts[:6])
    assert_not_degenerate(causal, "forced-causal drafts")
    changed = sum(a != b for a, b in zip(causal, paged_blocks, strict=False)) / len(paged_blocks)
    # The fixture's layers are non-causal: forcing the mask causal must move a clear share of blocks.
    assert changed >= 0.2, f"only {changed:.0%} of blocks changed under a forced-causal mask"
