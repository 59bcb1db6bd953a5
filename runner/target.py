"""The Qwen3 target: a dense decoder over the paged KV cache that can also tap its layers' hidden states.

Parameter names follow HF `Qwen3ForCausalLM`, so a checkpoint's state dict loads as it is. It knows the paged
cache's slot addressing but not requests, rows or scheduling.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from runner.config import TargetConfig
from runner.kv_cache import PagedKVCache
from runner.layers import RMSNorm, Rotary, SwiGLU, apply_rotary, attend, attention_mask


@dataclass(frozen=True, slots=True)
class PagedInputs:
    """One forward's view of the batch. Shapes: R rows, T tokens per row (padded), S = max(seq_lens)."""

    input_ids: torch.Tensor  # [R, T]
    positions: torch.Tensor  # [R, T] absolute positions
    valid: torch.Tensor  # [R, T] bool: real tokens, not padding
    block_table: torch.Tensor  # [R, max_pages]
    seq_lens: torch.Tensor  # [R] cache length once this forward's tokens are written


class QKNormAttention(nn.Module):
    """Qwen3 attention projections: per-head RMSNorm on q and k before RoPE."""

    def __init__(self, cfg: TargetConfig) -> None:
        super().__init__()
        self.num_heads = cfg.num_attention_heads
        self.num_kv_heads = cfg.num_key_value_heads
        self.head_dim = cfg.head_dim
        self.scale = cfg.head_dim**-0.5
        bias = cfg.attention_bias
        self.q_proj = nn.Linear(cfg.hidden_size, self.num_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(cfg.hidden_size, self.num_kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(cfg.hidden_size, self.num_kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, cfg.hidden_size, bias=bias)
        self.q_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)
        self.k_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)

    def project_q(self, x: torch.Tensor) -> torch.Tensor:
        return self.q_norm(self.q_proj(x).view(*x.shape[:-1], self.num_heads, self.head_dim))

    def project_kv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        k = self.k_norm(self.k_proj(x).view(*x.shape[:-1], self.num_kv_heads, self.head_dim))
        v = self.v_proj(x).view(*x.shape[:-1], self.num_kv_heads, self.head_dim)
        return k, v

    def output(self, attn: torch.Tensor) -> torch.Tensor:
        return self.o_proj(attn.reshape(*attn.shape[:2], self.num_heads * self.head_dim))


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

    @staticmethod
    def expected_shapes(cfg: TargetConfig) -> dict[str, tuple[int, ...]]:
        with torch.device("meta"):
            shapes = {name: tuple(p.shape) for name, p in Qwen3Target(cfg).state_dict().items()}
        if cfg.tie_word_embeddings:
            shapes.pop("lm_head.weight")
        return shapes

    def load_weights(self, weights: dict[str, torch.Tensor]) -> None:
        if self.config.tie_word_embeddings:
            weights = {**weights, "lm_head.weight": weights["model.embed_tokens.weight"]}
        self.load_state_dict(weights, strict=True)

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model.embed_tokens(input_ids)

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
        cos, sin = self.rotary(inputs.positions, h.dtype)
        num_rows = h.shape[0]
        max_len = int(inputs.seq_lens.max())
        key_positions = torch.arange(max_len, device=h.device).expand(num_rows, max_len)
        read_slots = cache.slots(inputs.block_table, key_positions)
        mask = attention_mask(
            inputs.positions,
            key_positions,
            key_positions < inputs.seq_lens[:, None],
            is_causal=True,
            sliding_window=None,
        )
        write_slots = cache.slots(inputs.block_table, inputs.positions)[inputs.valid]
        taps: dict[int, torch.Tensor] = {}
        for idx, layer in enumerate(self.model.layers):
            attn = layer.self_attn
            x = layer.input_layernorm(h)
            q = apply_rotary(attn.project_q(x), cos, sin)
            k, v = attn.project_kv(x)
            k = apply_rotary(k, cos, sin)
            cache.write(idx, k[inputs.valid], v[inputs.valid], write_slots)
            keys, values = cache.read(idx, read_slots)
            h = h + attn.output(attend(q, keys, values, mask, attn.scale))
            h = h + layer.mlp(layer.post_attention_layernorm(h))
            if idx in tap_layer_ids:
                # HF's hidden_states[i + 1]: the last layer's entry is taken after the final norm.
                taps[idx] = self.model.norm(h) if idx == len(self.model.layers) - 1 else h
        if logit_index is not None:
            h = h.gather(1, logit_index[:, None, None].expand(-1, 1, h.shape[-1]))
        logits = self.lm_head(self.model.norm(h))
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
