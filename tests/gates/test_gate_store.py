"""Gate: the draft store holds exactly the committed context, and a misplaced context is refused by name.

After every step, for every running request: store length = committed length - pending rows, the pending
rows sit at [store length, L), and the trace says the same. Corrupting the store's length must raise
PositionInvariantError before any draft is made from the wrong context.
"""

from __future__ import annotations

import pytest
from gatekit import greedy, make_engine

from runner import PositionInvariantError

pytestmark = pytest.mark.gate


def test_store_length_tracks_committed_length(prompts: list[list[int]]) -> None:
    engine = make_engine(max_num_seqs=3, page_size=4)
    for i, p in enumerate(prompts[:5]):
        engine.add_request(p, greedy(max_tokens=6 + 5 * i))
    checked = 0
    while engine.has_unfinished():
        engine.step()
        rows = engine.rows
        for row in range(rows.num_rows):
            request = rows.requests[row]
            assert request is not None
            pending = rows.pending_positions[row]
            assert pending is not None and pending.numel() > 0, f"row {row}: nothing pending after a step"
            store = rows.store_lens[row]
            assert store == request.num_committed - pending.numel(), (
                f"request {request.request_id}: store holds {store}, committed {request.num_committed}, "
                f"pending {pending.numel()}"
            )
            assert pending.tolist() == list(range(store, request.num_committed))
            features = rows.pending[row]
            assert features is not None and features.shape[0] == pending.numel(), (
                f"request {request.request_id}: {features.shape[0] if features is not None else None} pending "
                f"feature rows for {pending.numel()} pending positions"
            )
            checked += 1
    assert checked >= 10
    assert engine.trace is not None
    for record in engine.trace.records:
        assert record.store_len_after == record.committed_len, "the draft must leave the store at L"
        assert record.positions[0] == record.committed_len, "the block must start at the anchor's position L"


@pytest.mark.parametrize("delta", [1, -1], ids=["store-ahead", "store-behind"])
def test_corrupted_store_raises_position_invariant(prompts: list[list[int]], delta: int) -> None:
    engine = make_engine(max_num_seqs=2)
    engine.add_request(prompts[0], greedy(max_tokens=20))
    engine.add_request(prompts[1], greedy(max_tokens=20))
    engine.step()
    engine.step()
    engine.rows.store_lens[1] += delta
    with pytest.raises(PositionInvariantError, match="draft store holds"):
        engine.step()
    engine.abort_all()
    # The engine is usable again after the refusal.
    (out,) = engine.generate([prompts[0]], greedy(max_tokens=8))
    assert len(out.token_ids) == 8


def test_pages_are_conserved(prompts: list[list[int]]) -> None:
    engine = make_engine(max_num_seqs=3, page_size=4, num_pages=64)
    target_pool, draft_pool = engine.scheduler.target_pool, engine.scheduler.draft_pool
    assert draft_pool is not None
    engine.generate(prompts[:6], greedy(max_tokens=12))
    assert target_pool.num_free == target_pool.num_pages and target_pool.num_used == 0
    assert draft_pool.num_free == draft_pool.num_pages and draft_pool.num_used == 0
