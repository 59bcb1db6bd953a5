"""The Qwen3 target over the paged cache computes what transformers' Qwen3ForCausalLM computes on the same
weights: prefill logits, the tapped hidden states, and the logits of later steps that read their context back
from pages (small pages, scattered page ids, rows of different lengths, stale K/V left by a rejected block).
"""

from __future__ import annotations

import pytest
import torch
import transformers

from runner.kv_cache import PagedKVCache
from runner.loader import load_target
from runner.target import PagedInputs, Qwen3Target

PAGE_SIZE = 4
NUM_PAGES = 16
ATOL = 1e-5
PROMPTS = [[3, 17, 42, 8, 8, 60], [51, 2, 9]]  # lengths 6 and 3: the batch is padded
CONTINUATIONS = [[5, 33, 12, 47, 20, 1, 61], [40, 7, 7, 19, 28, 30, 2]]
TAPS = (0, 2)  # inner layers; the last layer has its own test below


@pytest.fixture(scope="module", params=[False, True], ids=["untied", "tied"])
def models(request, make_pair) -> tuple[Qwen3Target, transformers.Qwen3ForCausalLM]:
    target_dir, _ = make_pair(tie_word_embeddings=request.param)
    ours = load_target(target_dir, torch.device("cpu"), torch.float32)
    theirs = transformers.Qwen3ForCausalLM.from_pretrained(target_dir, dtype=torch.float32).eval()
    return ours, theirs


def reference_outputs(
    hf: transformers.Qwen3ForCausalLM, ids: list[int], taps: tuple[int, ...] = TAPS
) -> tuple[torch.Tensor, torch.Tensor]:
    """transformers' logits [T, V] and the tapped layers' hidden_states[i + 1], concatenated, of one sequence:
    what the reference DFlash feeds its draft."""
    with torch.no_grad():
        out = hf(torch.tensor([ids]), output_hidden_states=True)
    tapped = torch.cat([out.hidden_states[i + 1][0] for i in taps], dim=-1)
    return out.logits[0], tapped


class PagedRun:
    """Drives our target over a batch of rows the way the engine does: one forward per chunk of tokens."""

    def __init__(self, model: Qwen3Target, num_rows: int) -> None:
        cfg = model.config
        self.model = model
        self.cache = PagedKVCache(
            cfg.num_hidden_layers,
            NUM_PAGES,
            PAGE_SIZE,
            cfg.num_key_value_heads,
            cfg.head_dim,
            torch.float32,
            torch.device("cpu"),
        )
        # Scattered, descending page ids: a slot computed from the position alone would land elsewhere.
        pages = list(range(NUM_PAGES - 1, -1, -1))
        per_row = NUM_PAGES // num_rows
        self.block_table = torch.tensor([pages[i::num_rows][:per_row] for i in range(num_rows)])
        self.lens = [0] * num_rows

    def forward(
        self, chunks: list[list[int]], starts: list[int] | None = None, taps: tuple[int, ...] = TAPS
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Writes each row's chunk at `starts` (default: its current length). Returns logits [R, T, V], taps."""
        starts = list(self.lens) if starts is None else starts
        width = max(len(c) for c in chunks)
        ids = torch.zeros(len(chunks), width, dtype=torch.long)
        valid = torch.zeros(len(chunks), width, dtype=torch.bool)
        for row, chunk in enumerate(chunks):
            ids[row, : len(chunk)] = torch.tensor(chunk)
            valid[row, : len(chunk)] = True
        positions = torch.tensor(starts)[:, None] + torch.arange(width)
        seq_lens = torch.tensor([s + len(c) for s, c in zip(starts, chunks, strict=True)])
        inputs = PagedInputs(ids, positions, valid, self.block_table, seq_lens)
        with torch.inference_mode():
            logits, tapped = self.model(inputs, self.cache, taps)
        self.lens = seq_lens.tolist()
        return logits, tapped


def test_prefill_logits_and_taps_match_transformers(models) -> None:
    ours, hf = models
    run = PagedRun(ours, len(PROMPTS))
    logits, taps = run.forward(PROMPTS)
    assert taps is not None
    for row, prompt in enumerate(PROMPTS):
        expected_logits, expected_taps = reference_outputs(hf, prompt)
        n = len(prompt)
        torch.testing.assert_close(logits[row, :n], expected_logits, atol=ATOL, rtol=0)
        torch.testing.assert_close(taps[row, :n], expected_taps, atol=ATOL, rtol=0)


@pytest.mark.parametrize("chunk", [1, 3], ids=["one-token-steps", "three-token-blocks"])
def test_decode_through_pages_matches_transformers(models, chunk: int) -> None:
    """Prompt, then the continuation in chunks: every chunk's logits read the whole history from pages."""
    ours, hf = models
    run = PagedRun(ours, len(PROMPTS))
    run.forward(PROMPTS)
    full = [p + c for p, c in zip(PROMPTS, CONTINUATIONS, strict=True)]
    expected = [reference_outputs(hf, ids)[0] for ids in full]
    assert max(len(ids) for ids in full) > 3 * PAGE_SIZE  # the history spans several pages
    for offset in range(0, len(CONTINUATIONS[0]), chunk):
        starts = list(run.lens)
        chunks = [c[offset : offset + chunk] for c in CONTINUATIONS]
        logits, _ = run.forward(chunks)
        for row, (start, piece) in enumerate(zip(starts, chunks, strict=True)):
            torch.testing.assert_close(
                logits[row, : len(piece)], expected[row][start : start + len(piece)], atol=ATOL, rtol=0
            )


def test_rejected_block_leaves_no_trace(models) -> None:
    """A verified block whose tail is rejected leaves stale K/V past the committed length: the next forward,
    which rewrites those positions, must not see them (the engine never clears pages)."""
    ours, hf = models
    run = PagedRun(ours, len(PROMPTS))
    run.forward(PROMPTS)
    committed = list(run.lens)
    run.forward([[11, 12, 13, 14], [21, 22, 23, 24]])  # drafted block: only its first token is kept
    kept = [[11], [21]]
    run.forward(kept, starts=committed)
    starts = list(run.lens)
    logits, _ = run.forward([[30, 31], [32, 33]])
    for row in range(len(PROMPTS)):
        ids = PROMPTS[row] + kept[row] + [[30, 31], [32, 33]][row]
        expected = reference_outputs(hf, ids)[0]
        torch.testing.assert_close(logits[row, :2], expected[starts[row] : starts[row] + 2], atol=ATOL, rtol=0)


def test_tap_of_the_last_layer_matches_transformers(models) -> None:
    ours, hf = models
    last = (ours.config.num_hidden_layers - 1,)
    _, taps = PagedRun(ours, 1).forward(PROMPTS[:1], taps=last)
    assert taps is not None
    torch.testing.assert_close(taps[0], reference_outputs(hf, PROMPTS[0], last)[1], atol=ATOL, rtol=0)


def test_tied_head_shares_the_embedding(make_pair) -> None:
    target_dir, _ = make_pair(tie_word_embeddings=True)
    ours = load_target(target_dir, torch.device("cpu"), torch.float32)
    assert ours.lm_head.weight.data_ptr() == ours.model.embed_tokens.weight.data_ptr()
