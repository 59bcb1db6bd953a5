"""The engine this example project owns: block speculative decoding with a DFlash draft.

The models are not ours: the target is transformers' Qwen3ForCausalLM and the draft the upstream reference's
`DFlashDraftModel` (PyPI `dflash==0.1.0`). What this module owns is the decode loop around them, and that is
where a port goes wrong without changing a single output token: which target features the draft sees as its
context and at which positions, the draft's block attention mask, when the draft's and the target's KV caches
are cropped, and the greedy acceptance rule. `engine_mutations.py` plants those bugs; `tests/` must see them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from dflash.model import DFlashDraftModel, _crop_to, _make_cache, extract_context_feature
from torch.nn import functional as F
from transformers import Qwen3ForCausalLM

__all__ = ["Generation", "SpecEngine"]


@dataclass(frozen=True)
class Generation:
    token_ids: tuple[int, ...]  # generated after the prompt
    acceptance_lengths: tuple[int, ...]  # tokens committed per verify step (accepted drafts + the bonus)
    drafted_blocks: tuple[tuple[int, ...], ...]  # the draft's proposal at each verify step


class SpecEngine:
    def __init__(self, target: Qwen3ForCausalLM, draft: DFlashDraftModel) -> None:
        self.target, self.draft = target.eval(), draft.eval()
        self.block_size = int(draft.block_size)

    @classmethod
    def from_folders(cls, target_dir: str | Path, draft_dir: str | Path) -> SpecEngine:
        target = Qwen3ForCausalLM.from_pretrained(target_dir, dtype=torch.float32)
        return cls(target, DFlashDraftModel.from_pretrained(draft_dir, dtype=torch.float32))

    def block_mask(self, num_keys: int, num_block: int) -> torch.Tensor | None:
        """The draft's mask over [cached context, new context, block]: None when its layers are non-causal (every
        block slot sees all context and the whole block); otherwise causal, aligned so block slot i sits at key
        position num_keys - num_block + i."""
        if not self.draft.layers[0].self_attn.is_causal:
            return None
        query = num_keys - num_block + torch.arange(num_block)[:, None]
        return (torch.arange(num_keys)[None, :] <= query)[None, None]

    def draft_block(
        self, block_ids: torch.Tensor, context: torch.Tensor, positions: torch.Tensor, cache: object, start: int
    ) -> torch.Tensor:
        """Greedy draft of block slots 1.. for `block_ids` [1, B] (slot 0 the anchor at `start`, the rest mask
        tokens) from `context` [1, C, F]: the target features of the C tokens before `start` not yet in the
        draft's `cache`, at `positions` [1, C + B]."""
        noise = F.embedding(block_ids, self.target.get_input_embeddings().weight)
        mask = self.block_mask(start + block_ids.shape[1], block_ids.shape[1])
        hidden = self.draft(
            target_hidden=context,
            noise_embedding=noise,
            position_ids=positions,
            attention_mask=mask,
            past_key_values=cache,
            use_cache=True,
        )
        _crop_to(cache, start)  # the cache keeps the context; the block's K/V are written for this read only
        logits = self.draft.compute_logits(hidden[:, 1:, :], self.target.lm_head)
        return logits.argmax(dim=-1)

    @torch.inference_mode()
    def generate(
        self, prompt_ids: Sequence[int], max_new_tokens: int, stop_token_ids: Sequence[int] = ()
    ) -> Generation:
        prompt = torch.tensor([list(prompt_ids)], dtype=torch.long)
        num_prompt = prompt.shape[1]
        max_length = num_prompt + max_new_tokens
        layer_ids = self.draft.target_layer_ids
        ids = torch.full((1, max_length + 1), int(self.draft.mask_token_id), dtype=torch.long)
        positions = torch.arange(max_length + 1)[None]
        target_cache, draft_cache = _make_cache(self.target.config), _make_cache(self.draft.config)

        out = self.target(
            prompt,
            position_ids=positions[:, :num_prompt],
            past_key_values=target_cache,
            use_cache=True,
            output_hidden_states=True,
        )
        ids[:, :num_prompt] = prompt
        ids[:, num_prompt] = out.logits[:, -1].argmax(dim=-1)
        context = extract_context_feature(out.hidden_states, layer_ids)  # [1, num_prompt, F]
        start, stops = num_prompt, set(stop_token_ids)
        acceptance, drafted = [], []
        while start + 1 < max_length and int(ids[0, start]) not in stops:
            size = min(self.block_size, max_length - start)
            block = ids[:, start : start + size].clone()
            block_positions = positions[:, start - context.shape[1] : start + size]
            block[:, 1:] = self.draft_block(block, context, block_positions, draft_cache, start)
            drafted.append(tuple(block[0, 1:].tolist()))
            out = self.target(
                block,
                position_ids=positions[:, start : start + size],
                past_key_values=target_cache,
                use_cache=True,
                output_hidden_states=True,
            )
            posterior = out.logits.argmax(dim=-1)  # [1, size]: the target's token after each block slot
            # Greedy acceptance: the longest prefix of drafts equal to the target's own choice, then its bonus.
            accepted = int((block[:, 1:] == posterior[:, :-1]).cumprod(dim=1).sum())
            ids[:, start : start + accepted + 1] = block[:, : accepted + 1]
            ids[:, start + accepted + 1] = posterior[:, accepted]
            produced = min(accepted + 1, max_length - start - 1)
            hits = [i for i, t in enumerate(ids[0, start + 1 : start + produced + 1].tolist()) if t in stops]
            produced = hits[0] + 1 if hits else produced
            start += produced
            _crop_to(target_cache, start)  # drop the target K/V of rejected drafts
            acceptance.append(produced)
            # The next draft's context: features of the tokens just committed, none of the rejected ones.
            context = extract_context_feature(out.hidden_states, layer_ids)[:, :produced, :]
        end = min(start + 1, max_length)
        return Generation(tuple(ids[0, num_prompt:end].tolist()), tuple(acceptance), tuple(drafted))
