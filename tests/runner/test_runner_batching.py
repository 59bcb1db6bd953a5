"""Continuous batching changes nothing a request can see: finishing at different steps, joining between
steps, waiting for a free row and moving down when rows free up, every request gets the tokens, acceptance
lengths and drafted blocks (with their positions and draft-store lengths) of its solo run. Pages are
conserved throughout and all free at the end.
"""

from __future__ import annotations

from dataclasses import asdict

import pytest

from runner import Engine, EngineConfig, SamplingParams
from runner.trace import StepRecord

CONFIG = {"page_size": 4, "block_size": 4}  # pages of 4: blocks and pages cross each other's boundaries

# (prompt, params, step after which it is added; 0 = before the first step)
REQUESTS = [
    ([1, 2, 3, 4, 5], SamplingParams(max_tokens=14), 0),
    ([0, 3], SamplingParams(max_tokens=3), 0),
    ([5, 4, 3, 2, 1, 0, 1], SamplingParams(max_tokens=10, temperature=0.9, seed=7), 0),
    ([4], SamplingParams(max_tokens=12), 1),
    ([3, 2, 4], SamplingParams(max_tokens=16, stop_token_ids=(0,)), 1),
    ([6, 6, 2, 1], SamplingParams(max_tokens=9, temperature=1.2, top_k=3, seed=3), 3),
    ([2, 6], SamplingParams(max_tokens=7), 3),
]


def comparable(records: list[StepRecord]) -> list[dict[str, object]]:
    """A request's trace without what depends on the batch (step number, row, request id)."""
    return [{k: v for k, v in asdict(r).items() if k not in ("step", "row", "request_id")} for r in records]


def check_pages(engine: Engine) -> None:
    """Free + used == all pages, and the used ones are exactly the running requests' pages."""
    held_target = [p for r in engine.rows.active() for p in r.target_pages]
    held_draft = [p for r in engine.rows.active() for p in r.draft_pages]
    for pool, held in ((engine.scheduler.target_pool, held_target), (engine.scheduler.draft_pool, held_draft)):
        assert pool is not None
        assert pool.num_free + pool.num_used == pool.num_pages
        assert sorted(held) == sorted(pool._used)


@pytest.fixture(scope="module")
def solo(agreeing_pair):
    target_dir, draft_dir = agreeing_pair
    results = []
    for prompt, params, _ in REQUESTS:
        engine = Engine.from_pretrained(target_dir, draft_dir, config=EngineConfig(trace=True, **CONFIG))
        (out,) = engine.generate([prompt], params)
        assert engine.trace is not None
        results.append((out, comparable(engine.trace.for_request(out.request_id))))
    return results


@pytest.mark.parametrize("max_num_seqs", [2, 3, 16], ids=lambda n: f"rows{n}")
def test_continuous_batching_equals_solo_runs(agreeing_pair, solo, max_num_seqs: int) -> None:
    target_dir, draft_dir = agreeing_pair
    config = EngineConfig(trace=True, max_num_seqs=max_num_seqs, **CONFIG)
    engine = Engine.from_pretrained(target_dir, draft_dir, config=config)
    ids: dict[int, int] = {}  # request id -> index in REQUESTS
    finished_at: dict[int, int] = {}
    step = 0
    while step == 0 or engine.has_unfinished() or len(ids) < len(REQUESTS):
        for index, (prompt, params, join) in enumerate(REQUESTS):
            if join == step:
                ids[engine.add_request(prompt, params)] = index
        for request_id in engine.step():
            finished_at[request_id] = step
        step += 1
        assert engine.rows.num_rows <= max_num_seqs
        for row in range(engine.rows.num_rows):
            engine.check_position_invariant(row)
        check_pages(engine)

    assert engine.trace is not None
    for request_id, index in ids.items():
        out, records = solo[index]
        batched = engine.output(request_id)
        assert batched.token_ids == out.token_ids, f"request {index}"
        assert batched.acceptance_lengths == out.acceptance_lengths, f"request {index}"
        assert batched.finish_reason == out.finish_reason, f"request {index}"
        assert comparable(engine.trace.for_request(request_id)) == records, f"request {index}"

    # Not blind: requests finished at different steps, rows moved, some steps accepted several tokens.
    assert len(set(finished_at.values())) >= 4
    assert engine.trace.row_moves
    assert max(n for out, _ in solo for n in out.acceptance_lengths) >= 3
    assert {o.finish_reason for o, _ in solo} == {"length", "stop"}
    # Everything is released.
    for pool in (engine.scheduler.target_pool, engine.scheduler.draft_pool):
        assert pool is not None and pool.num_free == pool.num_pages and pool.num_used == 0
    assert engine.rows.num_rows == 0 and engine.scheduler.num_running == 0 and not engine.scheduler.waiting


def test_generate_batched_equals_solo(agreeing_pair, solo) -> None:
    """engine.generate over all prompts at once, with fewer rows than prompts."""
    target_dir, draft_dir = agreeing_pair
    engine = Engine.from_pretrained(target_dir, draft_dir, config=EngineConfig(trace=True, max_num_seqs=3, **CONFIG))
    outs = engine.generate([p for p, _, _ in REQUESTS], [params for _, params, _ in REQUESTS])
    assert engine.trace is not None
    for out, (solo_out, records) in zip(outs, solo, strict=True):
        assert (out.token_ids, out.acceptance_lengths) == (solo_out.token_ids, solo_out.acceptance_lengths)
        assert comparable(engine.trace.for_request(out.request_id)) == records
    assert engine.scheduler.target_pool.num_free == engine.config.num_pages


def test_pages_wait_for_free_ones(agreeing_pair) -> None:
    """With pages for one request at a time, the others wait in the queue and still get their solo result."""
    target_dir, draft_dir = agreeing_pair
    prompt, max_tokens = [1, 2, 3, 4, 5], 14
    need = -(-(len(prompt) + max_tokens + CONFIG["block_size"]) // CONFIG["page_size"])
    config = EngineConfig(num_pages=need, **CONFIG)
    engine = Engine.from_pretrained(target_dir, draft_dir, config=config)
    (alone,) = engine.generate([prompt], SamplingParams(max_tokens=max_tokens))
    outs = engine.generate([prompt] * 3, SamplingParams(max_tokens=max_tokens))
    assert all(o.token_ids == alone.token_ids for o in outs)
    assert engine.scheduler.target_pool.num_free == need


PREFILL_FINISHES = {
    # (params of the request that finishes at prefill, given its solo first token)
    "max-tokens-1": lambda first: SamplingParams(max_tokens=1),
    "stop-at-first-token": lambda first: SamplingParams(max_tokens=8, stop_token_ids=(first,)),
}


@pytest.mark.parametrize("case", list(PREFILL_FINISHES))
def test_request_finished_at_prefill_is_not_decoded(agreeing_pair, case: str) -> None:
    target_dir, draft_dir = agreeing_pair
    engine = Engine.from_pretrained(target_dir, draft_dir, config=EngineConfig(**CONFIG))
    (probe,) = engine.generate([[4]], SamplingParams(max_tokens=1))
    params = PREFILL_FINISHES[case](probe.token_ids[0])
    (alone,) = engine.generate([[4]], params)
    assert len(alone.token_ids) == 1 and alone.acceptance_lengths == ()
    together = engine.generate([[4], [1, 2, 3]], [params, SamplingParams(max_tokens=8)])
    assert (together[0].token_ids, together[0].acceptance_lengths) == (alone.token_ids, alone.acceptance_lengths)
