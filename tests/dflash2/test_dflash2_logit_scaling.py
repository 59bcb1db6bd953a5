"""The walk reads the draft logits after `output_multiplier` and `final_logit_softcapping`: its unary term is the
scaled logit, weighed against the unscaled pairwise term, so changing either setting alone (in the draft's
config.json, weights unchanged) moves the drafted blocks. A per-slot argmax would not move: a positive multiplier
and the (monotone) soft cap keep every slot's argmax. Under each changed config the reference agrees with us.
"""

from __future__ import annotations

from typing import Any

import pytest
from dflash2kit import result_of

from runner import Engine, EngineConfig, SamplingParams

PROMPTS = [(1, 2, 3, 4, 5), (0, 3), (5, 4, 3, 2, 1, 0, 1), (3, 2, 4), (2,)]
BLOCK_SIZE = 6

VARIANTS: dict[str, dict[str, Any]] = {
    "multiplier-0.25": {"output_multiplier": 0.25},
    "multiplier-4": {"output_multiplier": 4.0},
    "softcap-0.3": {"final_logit_softcapping": 0.3},
    "softcap-1": {"final_logit_softcapping": 1.0},
}


def first_drafts(pair) -> tuple[list[tuple[int, ...]], list[list[int]]]:
    """Per prompt: the first drafted block and the per-slot argmax of the draft logits it was walked from."""
    engine = Engine.from_pretrained(*pair, config=EngineConfig(block_size=BLOCK_SIZE, trace=True))
    assert engine.draft is not None
    draft, argmaxes = engine.draft, []
    logits_of = draft.logits

    def logits(hidden, lm_head):
        out = logits_of(hidden, lm_head)
        argmaxes.append(out[0].argmax(-1).tolist())
        return out

    draft.logits = logits
    blocks, firsts = [], []
    for prompt in PROMPTS:
        first_call = len(argmaxes)
        # max_tokens = B + 1: one full draft after the prefill token, then a shorter one.
        (out,) = engine.generate([list(prompt)], SamplingParams(max_tokens=BLOCK_SIZE + 1))
        assert engine.trace is not None
        blocks.append(engine.trace.drafted_blocks(out.request_id)[0])
        firsts.append(argmaxes[first_call])
    assert all(len(block) == BLOCK_SIZE - 1 for block in blocks)
    return blocks, firsts


@pytest.fixture(scope="module")
def base_drafts(walk_pair):
    return first_drafts(walk_pair)


@pytest.mark.parametrize("changes", list(VARIANTS.values()), ids=list(VARIANTS))
def test_scaling_moves_the_walk_but_not_the_argmax(base_drafts, edited_pair, changes: dict[str, Any]) -> None:
    blocks, argmaxes = first_drafts(edited_pair(changes))
    base_blocks, base_argmaxes = base_drafts
    assert argmaxes == base_argmaxes, "the per-slot argmax must not depend on these settings"
    assert blocks != base_blocks, "the drafts ignore the scaled logits"


@pytest.mark.reference
@pytest.mark.parametrize("changes", list(VARIANTS.values()), ids=list(VARIANTS))
def test_scaled_config_equals_reference(walk_pair, edited_pair, reference_decode, changes: dict[str, Any]) -> None:
    """Ids, acceptance lengths and drafts equal the reference's; the greedy ids are the unscaled pair's."""
    pair = edited_pair(changes)
    engine = Engine.from_pretrained(*pair, config=EngineConfig(block_size=4, trace=True))
    base = Engine.from_pretrained(*walk_pair, config=EngineConfig(block_size=4))
    params = SamplingParams(max_tokens=16)
    outs = engine.generate([list(p) for p in PROMPTS], params)
    for prompt, out, base_out in zip(PROMPTS, outs, base.generate([list(p) for p in PROMPTS], params), strict=True):
        assert result_of(out, engine) == reference_decode(pair, prompt, 16, (), 4), prompt
        assert out.token_ids == base_out.token_ids, "greedy output must not depend on the draft"
