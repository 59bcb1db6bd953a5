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
    ids = [engine.add_request(p, greedy(max_tokens=6 + 5 * i)) for i, p in enumerate(prompts[:5])]
    # What each request has committed, counted here from the ids it holds, not from the engine's counters.
    seen_records, checked = 0, 0
    while engine.has_unfinished():
        engine.step()
        assert engine.trace is not None
        new_records = engine.trace.records[seen_records:]
        seen_records = len(engine.trace.records)
        rows = engine.rows
        for row in range(rows.num_rows):
            request = rows.requests[row]
            assert request is not None
            committed = len(request.token_ids) - 1  # every id but the anchor has its K/V in the target cache
            pending = rows.pending_positions[row]
            assert pending is not None and pending.numel() > 0, f"row {row}: nothing pending after a step"
            store = rows.store_lens[row]
            assert store == committed - pending.numel(), (
                f"request {request.request_id}: store holds {store}, committed {committed}, pending {pending.numel()}"
            )
            assert pending.tolist() == list(range(store, committed))
            features = rows.pending[row]
            assert features is not None and features.shape[0] == pending.numel(), (
                f"request {request.request_id}: {features.shape[0] if features is not None else None} pending "
                f"feature rows for {pending.numel()} pending positions"
            )
            # The trace's record of this step says what the rows hold.
            (record,) = [r for r in new_records if r.request_id == request.request_id]
            assert record.num_pending_after == pending.numel()
            assert record.store_len_after == store
            checked += 1
    assert checked >= 10
    for request_id in ids:
        out = engine.output(request_id)
        # Replayed from the outputs: step k's block starts at the prompt plus the tokens committed before it,
        # the draft read the whole context before the anchor, and the store had last been filled one step back.
        committed, previous = len(out.prompt_ids), 0
        for record, produced in zip(engine.trace.for_request(request_id), out.acceptance_lengths, strict=True):
            assert record.positions[0] == committed, "the block must start at the anchor's position L"
            assert record.store_len_before == previous, "the store must hold what the last draft left"
            assert record.store_len_after == committed, "the draft must leave the store at L"
            previous = committed
            committed += produced
        assert committed + 1 == len(out.prompt_ids) + len(out.token_ids)


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
