"""Greedy speculative decoding is lossless: its output equals plain greedy decoding of the target (draft_dir
None), token for token, alone and batched, whatever the draft proposes; and plain decoding equals a greedy
loop over transformers' Qwen3ForCausalLM.
"""

from __future__ import annotations

import pytest
import torch
import transformers

from runner import Engine, EngineConfig, SamplingParams

PROMPTS = [[1, 2, 3, 4, 5], [0, 3], [5, 4, 3, 2, 1, 0, 1, 2, 3], [4], [3, 2, 4]]
MAX_TOKENS = [14, 11, 9, 12, 16]
STOP = (0,)


def greedy(engine: Engine, stop: tuple[int, ...] = ()) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    params = [SamplingParams(max_tokens=m, stop_token_ids=stop) for m in MAX_TOKENS]
    return [(o.token_ids, o.acceptance_lengths) for o in engine.generate(PROMPTS, params)]


@pytest.mark.parametrize("kind", ["dflash", "dflash2"])
@pytest.mark.parametrize("block_size", [2, 4, 8], ids=lambda b: f"B{b}")
@pytest.mark.parametrize("stop", [(), STOP], ids=["no-stop", "stop"])
def test_greedy_speculative_equals_plain(make_agreeing_pair, kind: str, block_size: int, stop) -> None:
    target_dir, draft_dir = make_agreeing_pair(kind=kind)
    plain = greedy(Engine.from_pretrained(target_dir, config=EngineConfig(page_size=4)), stop)
    engine = Engine.from_pretrained(target_dir, draft_dir, config=EngineConfig(block_size=block_size, page_size=4))
    speculative = greedy(engine, stop)
    assert [ids for ids, _ in speculative] == [ids for ids, _ in plain]
    assert all(set(lengths) == {1} for _, lengths in plain)
    if stop:
        assert any(ids[-1] in stop and len(ids) < m for (ids, _), m in zip(plain, MAX_TOKENS, strict=True))
    if kind == "dflash" and block_size > 2:
        # Not blind: the draft was right often enough for multi-token steps.
        assert max(n for _, lengths in speculative for n in lengths) >= 3


def test_greedy_speculative_equals_plain_on_a_wide_vocab(make_pair) -> None:
    """The default pair (vocab 64): the draft is almost always wrong, so every step rejects and resamples."""
    target_dir, draft_dir = make_pair()
    plain = greedy(Engine.from_pretrained(target_dir))
    speculative = greedy(Engine.from_pretrained(target_dir, draft_dir))
    assert [ids for ids, _ in speculative] == [ids for ids, _ in plain]


def test_plain_greedy_equals_a_transformers_greedy_loop(make_pair) -> None:
    target_dir, _ = make_pair()
    hf = transformers.Qwen3ForCausalLM.from_pretrained(target_dir, dtype=torch.float32).eval()
    plain = greedy(Engine.from_pretrained(target_dir, config=EngineConfig(page_size=4)))
    for prompt, max_tokens, (ids, _) in zip(PROMPTS, MAX_TOKENS, plain, strict=True):
        sequence = list(prompt)
        with torch.no_grad():
            for _ in range(max_tokens):
                sequence.append(int(hf(torch.tensor([sequence])).logits[0, -1].argmax()))
        assert list(ids) == sequence[len(prompt) :]
    assert len({ids for ids, _ in plain}) == len(PROMPTS)  # the prompts are not all decoded alike
