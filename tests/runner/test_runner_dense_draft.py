"""The dense draft path (EngineConfig(draft_attention="dense"): context K/V recomputed from every committed
feature, no store) drafts what the paged path drafts: the same draft logits (to float32 rounding), the same
blocks, the same trace, alone and batched with rows moving.
"""

from __future__ import annotations

import pytest
import torch

from runner import Engine, EngineConfig, SamplingParams

PROMPTS = [[0, 3], [1, 2, 3, 4, 5], [3, 2, 4], [4], [6, 1, 1]]
PARAMS = [  # the first finishes first, so the second moves down to row 0
    SamplingParams(max_tokens=5),
    SamplingParams(max_tokens=14),
    SamplingParams(max_tokens=12, stop_token_ids=(0,)),
    SamplingParams(max_tokens=10, temperature=0.8, seed=11),
    SamplingParams(max_tokens=9, temperature=1.0, top_p=0.9, seed=5),
]


def run(pair, draft_attention: str, block_size: int):
    """Outputs, trace records and every draft call's logits of one batched run."""
    config = EngineConfig(
        draft_attention=draft_attention, block_size=block_size, page_size=4, max_num_seqs=2, trace=True
    )
    engine = Engine.from_pretrained(*pair, config=config)
    assert engine.draft is not None
    draft_logits: list[torch.Tensor] = []
    real_logits = engine.draft.logits

    def recording_logits(hidden: torch.Tensor, lm_head: torch.nn.Module) -> torch.Tensor:
        logits = real_logits(hidden, lm_head)
        draft_logits.append(logits.clone())
        return logits

    engine.draft.logits = recording_logits  # type: ignore[method-assign]
    outs = engine.generate(PROMPTS, PARAMS)
    assert engine.trace is not None
    return outs, engine.trace, draft_logits


@pytest.mark.parametrize("kind", ["dflash", "dflash2"])
@pytest.mark.parametrize("block_size", [3, 4], ids=lambda b: f"B{b}")
def test_dense_drafts_what_paged_drafts(make_agreeing_pair, kind: str, block_size: int) -> None:
    pair = make_agreeing_pair(kind=kind)
    paged_outs, paged_trace, paged_logits = run(pair, "paged", block_size)
    dense_outs, dense_trace, dense_logits = run(pair, "dense", block_size)
    assert len(paged_logits) == len(dense_logits)
    for paged, dense in zip(paged_logits, dense_logits, strict=True):
        torch.testing.assert_close(dense, paged, atol=1e-5, rtol=1e-5)
    assert dense_trace.records == paged_trace.records
    assert dense_trace.row_moves == paged_trace.row_moves and paged_trace.row_moves
    assert [(o.token_ids, o.acceptance_lengths) for o in dense_outs] == [
        (o.token_ids, o.acceptance_lengths) for o in paged_outs
    ]
    # Not blind: the draft's context grew over many steps and some blocks were accepted beyond one token.
    assert len(paged_logits) >= 8
    assert any(r.accepted >= 1 for r in paged_trace.records)
