"""The position invariant: before a draft, a row's pending context starts at its draft-store length and ends
just before the anchor (position L). Any drift is a PositionInvariantError, never a silent draft from a wrong
context, and the engine is usable again afterwards. In a normal run the trace shows the invariant held.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from runner import Engine, EngineConfig, PositionInvariantError, SamplingParams
from runner.batch import BatchRows

PROMPTS = [[1, 2, 3, 4, 5], [0, 3], [3, 2, 4]]
PARAMS = SamplingParams(max_tokens=10)


def _shift(rows: BatchRows, by: int) -> None:
    positions = rows.pending_positions[0]
    assert positions is not None
    rows.pending_positions[0] = positions + by


CORRUPTIONS: dict[str, Callable[[BatchRows], None]] = {
    "store-len-ahead": lambda rows: rows.store_lens.__setitem__(0, rows.store_lens[0] + 1),
    "store-len-behind": lambda rows: rows.store_lens.__setitem__(0, rows.store_lens[0] - 1),
    "pending-shifted-up": lambda rows: _shift(rows, 1),
    "pending-shifted-down": lambda rows: _shift(rows, -1),
    "pending-dropped": lambda rows: rows.pending_positions.__setitem__(0, None),
    "pending-emptied": lambda rows: rows.pending_positions.__setitem__(0, torch.empty(0, dtype=torch.long)),
}


@pytest.fixture(scope="module")
def baseline(agreeing_pair) -> list[tuple[int, ...]]:
    engine = Engine.from_pretrained(*agreeing_pair, config=EngineConfig(page_size=4))
    return [o.token_ids for o in engine.generate(PROMPTS, PARAMS)]


def assert_idle_and_correct(engine: Engine, baseline: list[tuple[int, ...]]) -> None:
    assert not engine.has_unfinished()
    assert engine.rows.num_rows == 0
    for pool in (engine.scheduler.target_pool, engine.scheduler.draft_pool):
        assert pool is not None and pool.num_free == pool.num_pages
    assert [o.token_ids for o in engine.generate(PROMPTS, PARAMS)] == baseline


@pytest.mark.parametrize("corrupt", list(CORRUPTIONS))
@pytest.mark.parametrize("after_steps", [1, 3], ids=lambda n: f"after{n}")
def test_corrupted_context_is_refused_and_engine_recovers(
    agreeing_pair, baseline, corrupt: str, after_steps: int
) -> None:
    engine = Engine.from_pretrained(*agreeing_pair, config=EngineConfig(page_size=4))
    for prompt in PROMPTS:
        engine.add_request(prompt, PARAMS)
    for _ in range(after_steps):
        engine.step()
    committed_before = [r.num_committed for r in engine.rows.active()]
    CORRUPTIONS[corrupt](engine.rows)
    with pytest.raises(PositionInvariantError):
        engine.step()
    # Refused before anything was drafted or committed.
    assert [r.num_committed for r in engine.rows.active()] == committed_before
    engine.abort_all()
    assert_idle_and_correct(engine, baseline)


def test_generate_cleans_up_after_a_violation(agreeing_pair, baseline, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = Engine.from_pretrained(*agreeing_pair, config=EngineConfig(page_size=4))
    real_step = engine.step
    calls = []

    def corrupting_step() -> list[int]:
        calls.append(1)
        if len(calls) == 3:
            engine.rows.store_lens[0] += 1
        return real_step()

    monkeypatch.setattr(engine, "step", corrupting_step)
    with pytest.raises(PositionInvariantError):
        engine.generate(PROMPTS, PARAMS)
    monkeypatch.undo()
    assert_idle_and_correct(engine, baseline)


@pytest.mark.parametrize("draft_attention", ["paged", "dense"])
def test_trace_shows_the_invariant_held(agreeing_pair, draft_attention: str) -> None:
    """Per request: each step starts where the last one ended, the draft store covers exactly the positions
    before the anchor, and the tokens committed in a step are the next draft's pending context."""
    config = EngineConfig(page_size=4, max_num_seqs=2, draft_attention=draft_attention, trace=True)
    engine = Engine.from_pretrained(*agreeing_pair, config=config)
    outs = engine.generate(PROMPTS, PARAMS)
    assert engine.trace is not None
    for out in outs:
        records = engine.trace.for_request(out.request_id)
        assert len(records) == len(out.acceptance_lengths)
        committed, store_len = len(out.prompt_ids), 0
        for record in records:
            assert record.committed_len == committed
            assert record.positions[0] == committed
            assert record.store_len_before == store_len
            assert record.store_len_after == committed  # the draft stored all context up to the anchor
            # Read from the row's pending rows after the step, not from `produced`: the committed tokens' features
            # are exactly what the next draft will read beyond its store.
            assert record.store_len_after + record.num_pending_after == committed + record.produced
            assert record.produced == record.accepted + 1 or record is records[-1]
            committed += record.produced
            store_len = record.store_len_after
        assert committed + 1 == len(out.prompt_ids) + len(out.token_ids)
