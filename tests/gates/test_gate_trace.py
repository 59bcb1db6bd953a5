"""Gate: the trace tells the truth. Each record's committed length, block positions, accepted and produced
counts are re-derived from the outputs, the budget and the plain target's greedy tokens, and they add up to
the output.
"""

from __future__ import annotations

import pytest
from gatekit import greedy, make_engine

pytestmark = pytest.mark.gate


def test_trace_agrees_with_outputs(prompts: list[list[int]]) -> None:
    """Every field of every record is re-derived from the outputs and the plain target's greedy tokens, never from
    another field of the trace or the engine's own counters."""
    max_tokens = 24
    engine = make_engine(max_num_seqs=3)
    outs = engine.generate(prompts[:5], greedy(max_tokens=max_tokens))
    plain = make_engine(draft=False).generate(prompts[:5], greedy(max_tokens=max_tokens))
    block_size = engine.draft.config.block_size
    assert engine.trace is not None
    accepted_counts = set()
    for out, reference in zip(outs, plain, strict=True):
        assert out.token_ids == reference.token_ids, "speculative greedy tokens differ from plain decoding"
        full = list(out.prompt_ids) + list(out.token_ids)
        max_length = len(out.prompt_ids) + max_tokens
        records = engine.trace.for_request(out.request_id)
        committed = len(out.prompt_ids)
        for r in records:
            assert r.committed_len == committed
            size = min(block_size, max_length - committed)  # the block is cut where the budget ends
            assert r.positions == (committed, committed + size - 1)
            assert len(r.drafted_ids) == size - 1
            # Greedy verification keeps the longest drafted prefix equal to the target's own continuation.
            truth = full[committed + 1 : committed + size]
            accepted = next(
                (i for i, (d, t) in enumerate(zip(r.drafted_ids, truth, strict=True)) if d != t), len(truth)
            )
            assert r.accepted == accepted, f"request {out.request_id} at L={committed}: accepted {r.accepted}"
            produced = min(accepted + 1, max_length - committed - 1)  # plus the bonus, cut by the budget
            assert r.produced == produced
            accepted_counts.add(accepted)
            committed += produced
        assert committed + 1 == len(full), "the steps' records do not add up to the output"
        steps = [r.step for r in records]
        assert steps == sorted(steps) and len(set(steps)) == len(steps)
    assert len(accepted_counts) > 1, f"every step accepted {accepted_counts}: the comparison would be blind"
