"""The Qwen3 target: a dense decoder over the paged KV cache that can also tap its layers' hidden states.

Parameter names follow HF `Qwen3ForCausalLM`, so a checkpoint's state dict loads as it is. It knows the paged
cache's slot addressing but not requests, rows or scheduling.

Inside the target and the draft, submodules run through `.forward` (or F.linear on their weights): nn.Module's
__call__ costs ~2.5 us, ~30 times a decode step of a few ms. Forward hooks therefore see the target and the
draft as wholes, not their norms, MLPs or projections.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from runner.config import TargetConfig
from runner.kv_cache import PagedKVCache
from runner.layers import (
    RMSNorm,
    Rotary,
    StackedWeights,
    SwiGLU,
    additive_mask,
    apply_rotary,
    attend,
    attention_mask,
    rms_normalize,
)


@dataclass(frozen=True, slots=True)
class PagedInputs:
    """One forward's view of the batch. Shapes: R rows, T tokens per row (padded), S = max(seq_lens)."""

    input_ids: torch.Tensor  # [R, T]
    positions: torch.Tensor  # [R, T] absolute positions
    valid: torch.Tensor  # [R, T] bool: real tokens, not padding
    block_table: torch.Tensor  # [R, max_pages]
    seq_lens: torch.Tensor  # [R] cache length once this forward's tokens are written
    max_seq_len: int | None = None  # max(seq_lens) known on the host (else read from the device: a sync)


class QKNormAttention(nn.Module):
    """Qwen3 attention projections: per-head RMSNorm on q and k before RoPE."""

    def __init__(self, cfg: TargetConfig) -> None:
        super().__init__()
        self.num_heads = cfg.num_attention_heads
        self.num_kv_heads = cfg.num_key_value_heads
        self.head_dim = cfg.head_dim
        self.scale = cfg.head_dim**-0.5
        self.eps = cfg.rms_norm_eps  # q_norm's and k_norm's, read here without a submodule lookup
        bias = cfg.attention_bias
        self.q_proj = nn.Linear(cfg.hidden_size, self.num_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(cfg.hidden_size, self.num_kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(cfg.hidden_size, self.num_kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, cfg.hidden_size, bias=bias)
        self.q_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)
        self.k_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)
        # One matmul for q, k, v (bit-identical columns), and q and k normed and rotated as one tensor of heads.
        projections = [self.q_proj, self.k_proj, self.v_proj]
        self._qkv = StackedWeights([p.weight for p in projections])
        self._qkv_bias = StackedWeights([p.bias for p in projections]) if bias else None
        self._qk_norm = StackedWeights([self.q_norm.weight, self.k_norm.weight], [self.num_heads, self.num_kv_heads])

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """x: [R, T, hidden] -> the q, k and v heads side by side, unnormed: [R, T, heads + 2 * kv_heads, head_dim]."""
        bias = None if self._qkv_bias is None else self._qkv_bias.get()
        # Head counts stated, not inferred: an empty context (T = 0, an audit's wiped store) must still reshape.
        num_heads = self.num_heads + 2 * self.num_kv_heads
        return F.linear(x, self._qkv.get(), bias).view(*x.shape[:-1], num_heads, self.head_dim)

    def split(
        self, heads: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """`project`'s heads -> q, k (each head RMS-normed, then rotated) and v: [R, T, heads, head_dim]."""
        qk, v = heads.split_with_sizes([self.num_heads + self.num_kv_heads, self.num_kv_heads], dim=-2)
        qk = rms_normalize(qk, self.eps) * self._qk_norm.get()
        q, k = apply_rotary(qk, cos, sin).split_with_sizes([self.num_heads, self.num_kv_heads], dim=-2)
        return q, k, v

    def project_qkv(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k (each head RMS-normed, then rotated) and v: [R, T, heads, head_dim]."""
        return self.split(self.project(x), cos, sin)

    def output(self, attn: torch.Tensor) -> torch.Tensor:
        o_proj = self.o_proj
        return F.linear(attn.reshape(*attn.shape[:2], self.num_heads * self.head_dim), o_proj.weight, o_proj.bias)


class TargetLayer(nn.Module):
    def __init__(self, cfg: TargetConfig) -> None:
        super().__init__()
        self.self_attn = QKNormAttention(cfg)
        self.mlp = SwiGLU(cfg.hidden_size, cfg.intermediate_size)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class _Decoder(nn.Module):
    def __init__(self, cfg: TargetConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(TargetLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class Qwen3Target(nn.Module):
    def __init__(self, cfg: TargetConfig) -> None:
        super().__init__()
        self.config = cfg
        self.model = _Decoder(cfg)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        self.rotary = Rotary(cfg.head_dim, cfg.rope_theta)

    def expected_shapes(self) -> dict[str, tuple[int, ...]]:
        """What a checkpoint of this config must hold: every tensor's name and shape (a tied head is not stored)."""
        shapes = {name: tuple(p.shape) for name, p in self.state_dict().items()}
        if self.config.tie_word_embeddings:
            shapes.pop("lm_head.weight")
        return shapes

    def load_weights(self, weights: dict[str, torch.Tensor]) -> None:
        if self.config.tie_word_embeddings:
            weights = {**weights, "lm_head.weight": weights["model.embed_tokens.weight"]}
        self.load_state_dict(weights, strict=True)

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model.embed_tokens.forward(input_ids)

    def forward(
        self,
        inputs: PagedInputs,
        cache: PagedKVCache,
        tap_layer_ids: tuple[int, ...] = (),
        logit_index: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Runs the tokens, writes their K/V into the cache, returns (logits, taps).

        logits: [R, T, V], or [R, 1, V] at `logit_index` ([R]) when given. taps: the outputs of the layers in
        `tap_layer_ids` (HF `hidden_states[i + 1]`), concatenated: [R, T, len(taps) * hidden], or None.
        """
        h = self.embed(inputs.input_ids)
        num_rows = h.shape[0]
        max_len = int(inputs.seq_lens.max()) if inputs.max_seq_len is None else inputs.max_seq_len
        # A row's positions end before its cache length, padding at most T - 1 past it: all are < max_len + T.
        cos, sin = self.rotary(inputs.positions, h.dtype, max_len + inputs.positions.shape[1])
        key_positions = torch.arange(max_len, device=h.device).expand(num_rows, max_len)
        read_slots = cache.slots(inputs.block_table, key_positions)
        mask = additive_mask(
            attention_mask(
                inputs.positions,
                key_positions,
                key_positions < inputs.seq_lens[:, None],
                is_causal=True,
                sliding_window=None,
            ),
            h.dtype,
        )
        write_slots = cache.write_slots(inputs.block_table, inputs.positions, inputs.valid)
        taps: dict[int, torch.Tensor] = {}
        last = len(self.model.layers) - 1
        for idx, layer in enumerate(self.model.layers):
            attn = layer.self_attn
            x = layer.input_layernorm.forward(h)
            q, k, v = attn.project_qkv(x, cos, sin)
            cache.write(idx, k.flatten(0, 1), v.flatten(0, 1), write_slots)
            keys, values = cache.read(idx, read_slots)
            h = h + attn.output(attend(q, keys, values, mask, attn.scale))
            h = h + layer.mlp.forward(layer.post_attention_layernorm.forward(h))
            if idx in tap_layer_ids:
                # HF's hidden_states[i + 1]: the last layer's entry is taken after the final norm.
                taps[idx] = self.model.norm.forward(h) if idx == last else h
        # The final norm is per token: a tapped last layer has computed it already (gathered rows keep their bits).
        normed = taps.get(last)
        if logit_index is not None:
            index = logit_index[:, None, None].expand(-1, 1, h.shape[-1])
            h = h.gather(1, index)
            normed = None if normed is None else normed.gather(1, index)
        logits = F.linear(self.model.norm.forward(h) if normed is None else normed, self.lm_head.weight)
        tapped = torch.cat([taps[i] for i in tap_layer_ids], dim=-1) if tap_layer_ids else None
        return logits, tapped


def full_forward(
    target: Qwen3Target, ids: torch.Tensor, tap_layer_ids: tuple[int, ...] = ()
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Whole sequences at once ([N, T] ids, no padding) through the paged path with a scratch cache.

    For training and offline measurement: (logits [N, T, V], taps [N, T, F] or None).
    """
    cfg = target.config
    rows, length = ids.shape
    dtype = next(target.parameters()).dtype
    cache = PagedKVCache(cfg.num_hidden_layers, rows, length, cfg.num_key_value_heads, cfg.head_dim, dtype, ids.device)
    positions = torch.arange(length, device=ids.device).expand(rows, length)
    inputs = PagedInputs(
        ids,
        positions,
        torch.ones_like(ids, dtype=torch.bool),
        torch.arange(rows, device=ids.device)[:, None],
        torch.full((rows,), length, device=ids.device),
    )
    return target(inputs, cache, tap_layer_ids)
