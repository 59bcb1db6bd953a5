"""The adapter `dflash fixtures audit --adapter refengine.audit:make_adapter` drives: this engine's own draft
step (`SpecEngine.draft_block`), fed one verify step's context at a time, proves the fixture can tell a right
draft context from a wrong one through this engine's code, not only through dflash-verify's runner."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from dflash.model import _make_cache

from refengine.engine import SpecEngine


def make_adapter(pair) -> Callable[[object], Sequence[int]]:
    """`pair` is a verify.FixturePair; the adapter maps a DraftContext to the drafted ids."""
    engine = SpecEngine.from_folders(pair.target_dir, pair.draft_dir)

    def draft(context) -> Sequence[int]:
        num_context, size = len(context.token_ids), context.block_size
        block = torch.full((1, size), int(engine.draft.mask_token_id), dtype=torch.long)
        block[0, 0] = context.anchor_id
        anchor = context.anchor_position
        positions = torch.tensor([[*context.positions, *range(anchor, anchor + size)]])
        with torch.inference_mode():
            # A fresh cache holds nothing: the whole context is passed as new rows, so keys = context + block.
            drafted = engine.draft_block(block, context.features[None], positions, _make_cache(engine.draft.config),
                                         num_context)  # fmt: skip
        return drafted[0].tolist()

    return draft
