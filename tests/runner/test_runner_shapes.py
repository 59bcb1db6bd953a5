"""Model shapes the shipped fixtures never use, against the upstream reference: greedy output ids, acceptance
lengths and every drafted block equal `dflash_generate`'s, alone and batched.

The fixtures are all hidden 64, 4 heads over 2 KV heads of 16, block 4. A runner can be right there and wrong
on a real checkpoint: heads whose width is not hidden / heads, one KV head or none shared, widths that are
not powers of two, a vocabulary that is not a multiple of anything, a draft with its own head layout, taps
that include the last layer, other block sizes.
"""

from __future__ import annotations

import time

import pytest
import torch
import transformers

from runner import Engine, EngineConfig
from tests.runner.test_runner_reference import CASES, ours, params_of, run_reference

pytestmark = pytest.mark.reference

SHAPES: dict[str, dict[str, object]] = {
    "no-gqa": {"num_key_value_heads": 4},
    "one-kv-head": {"num_key_value_heads": 1},
    "heads-wider-than-hidden": {"head_dim": 32},
    "odd-widths": {
        "hidden_size": 48, "intermediate_size": 80, "num_attention_heads": 3, "num_key_value_heads": 1,
        "vocab_size": 11,
    },
    "deep-taps-with-last": {"num_target_layers": 5, "target_layer_ids": (0, 2, 4), "num_draft_layers": 3},
    "draft-own-heads": {"draft_num_heads": 2, "draft_num_kv_heads": 1, "draft_head_dim": 24},
    "tied-block-6": {"tie_word_embeddings": True, "block_size": 6},
    "dflash2-odd-widths": {"kind": "dflash2", "hidden_size": 48, "intermediate_size": 96, "block_size": 5},
}  # fmt: skip


@pytest.fixture(autouse=True)
def _cpu_timer(reference, monkeypatch: pytest.MonkeyPatch) -> None:
    if not torch.cuda.is_available():  # the reference's stats time with torch.cuda.synchronize
        monkeypatch.setattr(reference, "_cuda_time", time.perf_counter)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_greedy_equals_reference_on_unusual_shapes(reference, make_agreeing_pair, shape: str) -> None:
    changes = SHAPES[shape]
    target_dir, draft_dir = make_agreeing_pair(**changes)
    block_size = int(changes.get("block_size", 4))  # type: ignore[call-overload]
    target = transformers.Qwen3ForCausalLM.from_pretrained(target_dir, dtype=torch.float32).eval()
    cls = reference.DFlash2DraftModel if changes.get("kind") == "dflash2" else reference.DFlashDraftModel
    draft = cls.from_pretrained(draft_dir, dtype=torch.float32).eval()
    engine = Engine.from_pretrained(target_dir, draft_dir, config=EngineConfig(block_size=block_size, trace=True))

    names = ["p5-max13", "p7-max9", "p2-max12"]
    expected = {name: run_reference(reference, target, draft, CASES[name], block_size) for name in names}
    assert any(len(blocks) > 1 for _, _, blocks in expected.values()), "the reference never drafted"
    for name in names:
        (out,) = engine.generate([list(CASES[name].prompt)], params_of(CASES[name]))
        assert ours(out, engine) == expected[name], f"{shape}: {name} alone"
    batched = engine.generate([list(CASES[n].prompt) for n in names], [params_of(CASES[n]) for n in names])
    for name, out in zip(names, batched, strict=True):
        assert ours(out, engine) == expected[name], f"{shape}: {name} batched"
