"""Drafting one block per running row: builds the draft's inputs from the rows' pending context, runs the
draft, and turns its block states into drafted ids (argmax, sampling, or the DFlash2 candidate walk).

After a draft, every row's pending context is in the draft store (paged) or in its history (dense), and the
store length equals the row's committed length L. The block's own K/V are never kept. Drafted ids stay on the
device: the engine moves them to the host once per step, with the verification's results.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn.utils.rnn import pad_sequence

from runner.batch import BatchRows
from runner.draft import DFlashDraft, DraftInputs
from runner.kv_cache import PagedKVCache
from runner.request import Request
from runner.sampling import sampling_probs
from runner.target import Qwen3Target


@dataclass(frozen=True, slots=True)
class Proposal:
    drafted: torch.Tensor  # [R, W - 1] ids after the anchor; a row's slots past its own block are padding
    probs: list[torch.Tensor | None]  # per row: q, [n, V] (or [n, k] over `indices` for DFlash2); None if greedy
    indices: list[torch.Tensor | None]  # per row: DFlash2 candidates [n, k]; None otherwise

    @classmethod
    def empty(cls, num_rows: int, device: torch.device) -> Proposal:
        return cls(torch.empty(num_rows, 0, dtype=torch.long, device=device), [None] * num_rows, [None] * num_rows)


def _context(
    rows: BatchRows, num_rows: int, dense: bool, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Padded context features [R, C, F], positions [R, C] and validity [R, C] for the draft call.

    Positions are host tensors (the invariant is checked on them without a device sync); they cross to the
    device in one copy. Padding repeats a row's last real position and is masked out.
    """
    feats, poss = [], []
    for row in range(num_rows):
        pending, positions = rows.pending[row], rows.pending_positions[row]
        assert pending is not None and positions is not None
        if dense and rows.history[row] is not None:
            history = rows.history[row]
            pending = torch.cat([history, pending])
            positions = torch.cat([torch.arange(history.shape[0]), positions])
        feats.append(pending)
        poss.append(positions)
    lens = [p.numel() for p in poss]
    width = max(lens)
    if min(lens) == width:  # nothing to pad (always so at batch 1): ~7 ops fewer a step
        features, host = torch.stack(feats), torch.stack(poss)
        valid = torch.ones(num_rows, width, dtype=torch.bool, device=device)
    else:
        features = pad_sequence(feats, batch_first=True)
        host = torch.stack([torch.cat([p, p[-1:].expand(width - p.numel())]) for p in poss])
        valid = torch.arange(width, device=device)[None, :] < torch.tensor(lens, device=device)[:, None]
    return features, host.to(device, non_blocking=True), valid


def propose(
    draft: DFlashDraft,
    target: Qwen3Target,
    rows: BatchRows,
    store: PagedKVCache | None,
    requests: list[Request],
    sizes: list[int],
    anchors: torch.Tensor,
    positions: torch.Tensor,
    valid: torch.Tensor,
) -> Proposal:
    """Drafts a block for rows [0, len(requests)). `store` None selects the dense path (only when asked for).

    The target lends its embedding and LM head. anchors: [R]; positions, valid: [R, B] of the block to verify.
    """
    num_rows = len(requests)
    paged = store is not None
    features, ctx_positions, ctx_valid = _context(rows, num_rows, not paged, positions.device)
    block_ids = torch.full_like(positions, draft.config.mask_token_id)
    block_ids[:, 0] = anchors
    committed = positions[:, 0]
    inputs = DraftInputs(
        features=features,
        ctx_positions=ctx_positions,
        ctx_valid=ctx_valid,
        block_ids=block_ids,
        block_positions=positions,
        block_valid=valid,
        block_table=rows.draft_block_table[:num_rows] if paged else None,
        # The block reads the stored context (L positions) plus its own rows.
        read_lens=committed + valid.sum(1) if paged else None,
        max_read_len=max(r.num_committed + s for r, s in zip(requests, sizes, strict=True)),
    )
    hidden = draft(inputs, target.model.embed_tokens, store)
    for row, r in enumerate(requests):
        if not paged:
            rows.history[row] = torch.cat([h for h in (rows.history[row], rows.pending[row]) if h is not None])
        rows.store_lens[row] = r.num_committed
        rows.pending[row] = rows.pending_positions[row] = None
    hidden = hidden[:, 1:]
    logits = draft.logits(hidden, target.lm_head)
    if draft.candidate_selector is not None:
        return _walk(draft, requests, sizes, hidden, logits, anchors)
    drafted = logits.argmax(-1)  # [R, B - 1]
    probs: list[torch.Tensor | None] = []
    for row, r in enumerate(requests):
        n, p = sizes[row] - 1, r.params
        if p.is_greedy:
            probs.append(None)
            continue
        q = sampling_probs(logits[row, :n], p.temperature, p.top_p, p.top_k)
        drafted[row, :n] = torch.multinomial(q, 1, generator=r.generator)[:, 0]
        probs.append(q)
    return Proposal(drafted, probs, [None] * num_rows)


def _walk(
    draft: DFlashDraft,
    requests: list[Request],
    sizes: list[int],
    hidden: torch.Tensor,
    logits: torch.Tensor,
    anchors: torch.Tensor,
) -> Proposal:
    """DFlash2: the candidate selector's walk replaces the per-slot argmax; its q feeds rejection sampling."""
    selector = draft.candidate_selector
    assert selector is not None
    path, candidates, q = selector.walk(
        hidden,
        logits,
        anchors,
        [r.params.temperature for r in requests],
        [r.generator for r in requests],
        [s - 1 for s in sizes],
    )
    probs, indices = [], []
    for row, r in enumerate(requests):
        n = sizes[row] - 1
        probs.append(None if r.params.is_greedy else q[row, :n])
        indices.append(None if r.params.is_greedy else candidates[row, :n])
    return Proposal(path, probs, indices)
