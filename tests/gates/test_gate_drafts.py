"""Gate: a request's drafts do not depend on its neighbours.

In a concurrent batch where requests finish at different steps, rows move and new requests join, each
request's drafted blocks (and tokens) must equal those of its solo run, step by step. A survivor whose store,
block table or pending context did not move with it drafts from the wrong context: the tokens stay right
(verification is lossless) but the drafted blocks change.
"""

from __future__ import annotations

import pytest
from gatekit import assert_same_drafts, greedy, make_engine

pytestmark = pytest.mark.gate


@pytest.fixture  # function scope on purpose: see gatekit.py
def solo(prompts: list[list[int]]) -> dict[int, tuple[tuple[int, ...], list[tuple[int, ...]]]]:
    engine = make_engine()
    out = {}
    for i, prompt in enumerate(prompts[:6]):
        (result,) = engine.generate([prompt], greedy(max_tokens=14 + 4 * i))
        assert engine.trace is not None
        out[i] = (result.token_ids, engine.trace.drafted_blocks(result.request_id))
    return out


def test_concurrent_batch_drafts_equal_solo(prompts: list[list[int]], solo: dict) -> None:
    # Three rows for six requests: the short ones finish first, survivors move down, waiting ones join.
    engine = make_engine(max_num_seqs=3, page_size=4)
    ids = [engine.add_request(p, greedy(max_tokens=14 + 4 * i)) for i, p in enumerate(prompts[:6])]
    while engine.has_unfinished():
        engine.step()
    assert engine.trace is not None
    assert engine.trace.row_moves, "the scenario must move rows, or it does not test compaction"
    for i, request_id in enumerate(ids):
        tokens, blocks = solo[i]
        assert engine.output(request_id).token_ids == tokens, f"request {i}: tokens differ from its solo run"
        assert_same_drafts(engine.trace.drafted_blocks(request_id), blocks, f"request {i} batched vs solo")


def test_late_joiner_drafts_equal_solo(prompts: list[list[int]], solo: dict) -> None:
    engine = make_engine(max_num_seqs=4, page_size=4)
    first = [engine.add_request(p, greedy(max_tokens=14 + 4 * i)) for i, p in enumerate(prompts[:2])]
    engine.step()
    engine.step()
    late = engine.add_request(prompts[2], greedy(max_tokens=22))
    while engine.has_unfinished():
        engine.step()
    assert engine.trace is not None
    for i, request_id in enumerate(first):
        assert_same_drafts(engine.trace.drafted_blocks(request_id), solo[i][1], f"request {i} with a late joiner")
    assert_same_drafts(engine.trace.drafted_blocks(late), solo[2][1], "the late joiner")
