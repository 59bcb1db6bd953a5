"""Gate: the trace tells the truth. Per request, the steps' produced counts add up to the output, each step's
block starts at the committed length it reports, and the drafted ids are the block the target verified.
"""

from __future__ import annotations

import pytest
from gatekit import greedy, make_engine

pytestmark = pytest.mark.gate


def test_trace_agrees_with_outputs(prompts: list[list[int]]) -> None:
    engine = make_engine(max_num_seqs=3)
    outs = engine.generate(prompts[:5], greedy())
    assert engine.trace is not None
    for out in outs:
        records = engine.trace.for_request(out.request_id)
        assert [r.produced for r in records] == list(out.acceptance_lengths)
        committed = len(out.prompt_ids)
        full = list(out.prompt_ids) + list(out.token_ids)
        for r in records:
            assert r.committed_len == committed
            assert len(r.drafted_ids) == r.positions[1] - r.positions[0]
            assert 0 <= r.accepted <= len(r.drafted_ids)
            # The accepted drafted tokens are exactly the committed ones after the anchor.
            kept = min(r.accepted, r.produced)
            assert list(r.drafted_ids[:kept]) == full[committed + 1 : committed + 1 + kept]
            committed += r.produced
        assert committed + 1 == len(full)
        steps = [r.step for r in records]
        assert steps == sorted(steps) and len(set(steps)) == len(steps)
