"""Gate: a request's life ends cleanly, and a paged engine drafts from its paged store.

Aborting a queued or a running request frees its pages, takes it out of the engine, records `abort`, and
leaves every other request drafting and decoding exactly as it would alone (an abort compacts the rows, as a
finish does). `abort_all` leaves an idle engine that serves the next call like a fresh one. A finished
request's output is kept until popped, once. A stop token sampled at prefill ends its request there. With
paged draft attention (the default) every stored context position's K/V sits in the draft store and the
dense history stays unused: a silent fall back to the dense path keeps every token right and is seen only
here.
"""

from __future__ import annotations

import pytest
import torch
from gatekit import assert_same_drafts, greedy, make_engine

from runner import InvalidRequestError
from runner.request import FinishReason

pytestmark = pytest.mark.gate

MAX_TOKENS = 16


def _solo(prompt: list[int]) -> tuple[list[int], list[tuple[int, ...]]]:
    engine = make_engine(max_num_seqs=1, page_size=4)
    (out,) = engine.generate([prompt], greedy(max_tokens=MAX_TOKENS))
    assert engine.trace is not None
    return list(out.token_ids), engine.trace.drafted_blocks(out.request_id)


def _pools_free(engine) -> None:
    for pool in (engine.scheduler.target_pool, engine.scheduler.draft_pool):
        assert pool is not None
        assert pool.num_used == 0 and pool.num_free == pool.num_pages, f"{pool.name}: {pool.num_used} pages kept"


def test_aborted_requests_release_everything_and_survivors_run_as_alone(prompts: list[list[int]]) -> None:
    engine = make_engine(max_num_seqs=2, page_size=4, num_pages=64)
    ids = [engine.add_request(p, greedy(max_tokens=MAX_TOKENS)) for p in prompts[:4]]
    engine.step()
    engine.step()
    running = [r.request_id for r in engine.rows.active()]
    waiting = [r.request_id for r in engine.scheduler.waiting]
    assert len(running) == 2 and len(waiting) == 2, f"running {running}, waiting {waiting}"
    aborted = {running[0], waiting[0]}
    for request_id in (running[0], waiting[0]):
        engine.abort(request_id)
        with pytest.raises(InvalidRequestError, match="not queued or running"):
            engine.abort(request_id)
    assert [r.request_id for r in engine.rows.active()] == running[1:], "the aborted row is still running"
    assert [r.request_id for r in engine.scheduler.waiting] == waiting[1:], "the aborted request is still queued"
    while engine.has_unfinished():
        engine.step()
    _pools_free(engine)
    assert engine.trace is not None
    for request_id, prompt in zip(ids, prompts[:4], strict=True):
        out = engine.pop_output(request_id)
        if request_id in aborted:
            assert out.finish_reason == FinishReason.ABORT, f"request {request_id}: {out.finish_reason}"
            continue
        assert out.finish_reason != FinishReason.ABORT, f"request {request_id} was never aborted"
        tokens, drafts = _solo(prompt)
        assert list(out.token_ids) == tokens, f"request {request_id}: tokens differ from its solo run"
        assert_same_drafts(engine.trace.drafted_blocks(request_id), drafts, f"request {request_id} after an abort")
    with pytest.raises(InvalidRequestError, match="has not finished or is unknown"):
        engine.pop_output(ids[-1])  # popped once: gone
    with pytest.raises(InvalidRequestError, match="unknown request id"):
        engine.output(10_000)


def test_abort_all_leaves_an_idle_engine_that_serves_like_a_fresh_one(prompts: list[list[int]]) -> None:
    engine = make_engine(max_num_seqs=2, page_size=4, num_pages=64)
    ids = [engine.add_request(p, greedy(max_tokens=MAX_TOKENS)) for p in prompts[:3]]
    engine.step()
    engine.step()
    engine.abort_all()
    assert not engine.has_unfinished() and engine.rows.num_rows == 0 and not engine.scheduler.waiting
    _pools_free(engine)
    assert [engine.output(i).finish_reason for i in ids] == [FinishReason.ABORT] * 3
    (out,) = engine.generate([prompts[3]], greedy(max_tokens=MAX_TOKENS))
    tokens, drafts = _solo(prompts[3])
    assert list(out.token_ids) == tokens
    assert engine.trace is not None
    assert_same_drafts(engine.trace.drafted_blocks(out.request_id), drafts, "the first request after abort_all")


def test_paged_engine_drafts_from_its_paged_store(prompts: list[list[int]]) -> None:
    engine = make_engine(max_num_seqs=3, page_size=4, num_pages=64)
    assert engine.config.draft_attention == "paged" and engine.draft_store is not None
    for p in prompts[:3]:
        engine.add_request(p, greedy(max_tokens=MAX_TOKENS))
    checked = 0
    for _ in range(4):
        engine.step()
        store, rows = engine.draft_store, engine.rows
        for row in range(rows.num_rows):
            assert rows.history[row] is None, f"row {row}: the dense history is in use on a paged engine"
            stored = int(rows.store_lens[row])
            if stored == 0:
                continue
            slots = store.slots(
                rows.draft_block_table[row : row + 1], torch.arange(stored, device=engine.device)[None]
            )[0]
            for layer in range(store.k.shape[0]):
                for name, cache in (("K", store.k), ("V", store.v)):
                    written = cache[layer].index_select(0, slots).flatten(1).abs().amax(1) > 0
                    assert bool(written.all()), (
                        f"row {row}, layer {layer}: stored positions {(~written).nonzero().flatten().tolist()} of "
                        f"{stored} have no {name} in the draft store"
                    )
            checked += 1
    assert checked >= 6, f"only {checked} rows with a stored context checked"


def test_a_stop_token_sampled_at_prefill_ends_the_request_there(prompts: list[list[int]]) -> None:
    engine = make_engine(max_num_seqs=2, page_size=4, num_pages=64)
    firsts = [out.token_ids[0] for out in engine.generate(prompts[:2], greedy(max_tokens=MAX_TOKENS))]
    stopped, other = engine.generate(
        prompts[:2], [greedy(max_tokens=MAX_TOKENS, stop_token_ids=(firsts[0],)), greedy(max_tokens=MAX_TOKENS)]
    )
    assert list(stopped.token_ids) == [firsts[0]] and stopped.finish_reason == FinishReason.STOP, (
        f"a stop token sampled at prefill: {list(stopped.token_ids)}, {stopped.finish_reason}"
    )
    assert other.token_ids[0] == firsts[1] and len(other.token_ids) > 1
    _pools_free(engine)
