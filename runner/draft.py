"""The DFlash block drafter: Qwen3-style layers whose keys and values come from the committed context's tapped
target features and whose queries come only from the block [anchor, MASK x (B - 1)].

Context K/V are written to the draft's own paged store at their absolute positions and stay there; block K/V
are written with them for the read and are never kept (the store's length does not cover them). The draft
reuses the target's embedding and LM head. It knows slots and block tables, not requests or scheduling.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from runner.config import DraftConfig
from runner.dflash2 import CandidateSelector, GroupedDynamicCausalConv
from runner.errors import RunnerError
from runner.kv_cache import PagedKVCache
from runner.layers import RMSNorm, Rotary, SwiGLU, additive_mask, attend, attention_mask
from runner.target import QKNormAttention

# The reference saves the two codebooks without the `.weight` suffix of an nn.Embedding.
CODEBOOK_KEYS = {
    f"candidate_selector.{name}": f"candidate_selector.{name}.weight"
    for name in ("predecessor_codebook", "successor_codebook")
}


@dataclass(frozen=True, slots=True)
class DraftInputs:
    """One draft call over R rows: C context tokens and B block tokens per row (both padded)."""

    features: torch.Tensor  # [R, C, len(target_layer_ids) * target_hidden] tapped target states
    ctx_positions: torch.Tensor  # [R, C]
    ctx_valid: torch.Tensor  # [R, C] bool
    block_ids: torch.Tensor  # [R, B] anchor, then MASK
    block_positions: torch.Tensor  # [R, B] = committed length L + 0 .. B-1
    block_valid: torch.Tensor  # [R, B] bool
    block_table: torch.Tensor | None = None  # [R, max_pages]; None selects the dense (unpaged) path
    read_lens: torch.Tensor | None = None  # [R] keys the block reads: store length after the context + B
    max_read_len: int | None = None  # max(read_lens) known on the host (else read from the device: a sync)


class DraftLayer(nn.Module):
    def __init__(self, cfg: DraftConfig, layer_idx: int) -> None:
        super().__init__()
        shapes = cfg.target
        self.self_attn = QKNormAttention(shapes)
        self.mlp = SwiGLU(shapes.hidden_size, shapes.intermediate_size)
        self.input_layernorm = RMSNorm(shapes.hidden_size, shapes.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(shapes.hidden_size, shapes.rms_norm_eps)
        self.is_causal = cfg.layer_is_causal(layer_idx)
        self.sliding_window = cfg.layer_window(layer_idx)
        self.attention_conv: GroupedDynamicCausalConv | None = None
        self.mlp_conv: GroupedDynamicCausalConv | None = None
        if cfg.kind == "dflash2":
            self.attention_conv = GroupedDynamicCausalConv(
                shapes.hidden_size, cfg.conv_kernel_size, cfg.conv_group_size
            )
            self.mlp_conv = GroupedDynamicCausalConv(shapes.hidden_size, cfg.conv_kernel_size, cfg.conv_group_size)


class DFlashDraft(nn.Module):
    def __init__(self, cfg: DraftConfig) -> None:
        super().__init__()
        self.config = cfg
        shapes = cfg.target
        self.layers = nn.ModuleList(DraftLayer(cfg, i) for i in range(shapes.num_hidden_layers))
        self.norm = RMSNorm(shapes.hidden_size, shapes.rms_norm_eps)
        self.fc = nn.Linear(len(cfg.target_layer_ids) * shapes.hidden_size, shapes.hidden_size, bias=False)
        self.hidden_norm = RMSNorm(shapes.hidden_size, shapes.rms_norm_eps)
        self.rotary = Rotary(shapes.head_dim, shapes.rope_theta)
        self.candidate_selector: CandidateSelector | None = None
        if cfg.kind == "dflash2":
            self.candidate_selector = CandidateSelector(
                shapes.vocab_size, shapes.hidden_size, cfg.selector_rank, cfg.selector_top_k
            )

    def expected_shapes(self) -> dict[str, tuple[int, ...]]:
        """What a checkpoint of this config must hold: every tensor's name and shape."""
        return {name: tuple(p.shape) for name, p in self.state_dict().items()}

    @staticmethod
    def rename_weights(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {CODEBOOK_KEYS.get(name, name): tensor for name, tensor in weights.items()}

    def forward(self, inputs: DraftInputs, embed: nn.Module, store: PagedKVCache | None) -> torch.Tensor:
        """Block hidden states after the final norm: [R, B, hidden]. Writes the context K/V into `store`."""
        cfg = self.config
        ctx = self.hidden_norm.forward(self.fc.forward(inputs.features))
        h = embed.forward(inputs.block_ids)
        if cfg.input_embedding_scale != 1.0:  # x * 1.0 is x: the op is skipped, not the maths
            h = h * cfg.input_embedding_scale
        num_ctx, num_block = inputs.ctx_positions.shape[1], inputs.block_positions.shape[1]
        # Context and block are normed, rotated and written together: [R, C + B] tokens, context first, as the
        # reference's keys are. One q/k norm, rotation and K/V write a layer instead of one per part; the
        # context's query rows are computed and dropped (one stacked weight for both parts).
        positions = torch.cat((inputs.ctx_positions, inputs.block_positions), dim=1)  # [R, C + B]
        paged = store is not None
        # Context positions end before the committed length, block positions (padding too) before the read
        # length + B: all are < max_read_len + B.
        bound = None if inputs.max_read_len is None else inputs.max_read_len + num_block
        cos, sin = self.rotary(positions, h.dtype, bound)
        if paged and (inputs.block_table is None or inputs.read_lens is None):
            # Never fall back to the dense path silently: it is taken only when asked for (store None).
            raise RunnerError("a paged draft call needs block_table and read_lens")
        if paged:
            num_rows = h.shape[0]
            max_len = int(inputs.read_lens.max()) if inputs.max_read_len is None else inputs.max_read_len
            key_positions = torch.arange(max_len, device=h.device).expand(num_rows, max_len)
            key_valid = key_positions < inputs.read_lens[:, None]
            read_slots = store.slots(inputs.block_table, key_positions)
            write_slots = store.write_slots(
                inputs.block_table, positions, torch.cat((inputs.ctx_valid, inputs.block_valid), dim=1)
            )
        else:
            # Dense path: every context token is passed in and its K/V recomputed; no store is read or written.
            key_positions = positions
            key_valid = torch.cat([inputs.ctx_valid, inputs.block_valid], dim=1)
        masks: dict[tuple[bool, int | None], torch.Tensor] = {}  # one additive mask per kind of layer
        for idx, layer in enumerate(self.layers):
            attn = layer.self_attn
            residual = h
            x = layer.input_layernorm.forward(h)
            kernel = None
            if layer.attention_conv is not None:
                x, kernel = layer.attention_conv.prepare(x)
            # The context enters every layer as it is (no input norm): only the block's states change. Two matmuls,
            # as the reference's: a matmul's rows depend in their last bits on how many rows it has.
            q, k, v = attn.split(torch.cat((attn.project(ctx), attn.project(x)), dim=1), cos, sin)
            if paged:
                store.write(idx, k.flatten(0, 1), v.flatten(0, 1), write_slots)
                keys, values = store.read(idx, read_slots)
            else:
                keys, values = k, v
            kind = (layer.is_causal, layer.sliding_window)
            if kind not in masks:
                masks[kind] = additive_mask(
                    attention_mask(
                        inputs.block_positions,
                        key_positions,
                        key_valid,
                        is_causal=layer.is_causal,
                        sliding_window=layer.sliding_window,
                    ),
                    h.dtype,
                )
            out = attn.output(attend(q[:, num_ctx:], keys, values, masks[kind], attn.scale))
            if kernel is not None:
                out = layer.attention_conv.finish(out, kernel)
            h = residual + out
            residual = h
            x = layer.post_attention_layernorm.forward(h)
            kernel = None
            if layer.mlp_conv is not None:
                x, kernel = layer.mlp_conv.prepare(x)
            x = layer.mlp.forward(x)
            if kernel is not None:
                x = layer.mlp_conv.finish(x, kernel)
            h = residual + x
        return self.norm.forward(h)

    def logits(self, hidden: torch.Tensor, lm_head: nn.Module) -> torch.Tensor:
        """Draft logits through the target's head, scaled and soft-capped as the draft's config says."""
        cfg = self.config
        logits = lm_head(hidden) * cfg.output_multiplier
        if cfg.final_logit_softcapping is not None and cfg.final_logit_softcapping > 0:
            logits = torch.tanh(logits / cfg.final_logit_softcapping) * cfg.final_logit_softcapping
        return logits
