"""The shared maths of the target and the draft: RMSNorm, rotary embeddings, SwiGLU, masked attention.

Stateless: it knows tensors, not caches, requests or checkpoints.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        # Normalise in float32 whatever the weights' dtype, as Qwen3 does.
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


class SwiGLU(nn.Module):
    def __init__(self, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Rotary(nn.Module):
    """Default RoPE: cos/sin per absolute position, in the model's dtype."""

    def __init__(self, head_dim: int, theta: float) -> None:
        super().__init__()
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        # positions: [..., T] -> cos, sin: [..., T, head_dim]
        freqs = positions.float()[..., None] * self.inv_freq.float()
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # x: [R, T, heads, head_dim]; cos/sin: [R, T, head_dim]
    return x * cos[:, :, None] + rotate_half(x) * sin[:, :, None]


def attention_mask(
    q_positions: torch.Tensor,
    k_positions: torch.Tensor,
    k_valid: torch.Tensor,
    *,
    is_causal: bool,
    sliding_window: int | None,
) -> torch.Tensor:
    """Which keys each query sees: [R, T] x [R, S] -> bool [R, T, S]."""
    q = q_positions[:, :, None]
    k = k_positions[:, None, :]
    visible = k_valid[:, None, :].expand(-1, q_positions.shape[1], -1)
    if is_causal:
        visible = visible & (k <= q)
    if sliding_window is not None:
        visible = visible & (q - k < sliding_window)
        if not is_causal:
            visible = visible & (k - q < sliding_window)
    return visible


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, scale: float) -> torch.Tensor:
    """GQA attention. q: [R, T, H, D]; k, v: [R, S, KVH, D]; mask: [R, T, S] -> [R, T, H, D]."""
    groups = q.shape[2] // k.shape[2]
    if groups > 1:
        k = k.repeat_interleave(groups, dim=2)
        v = v.repeat_interleave(groups, dim=2)
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask[:, None], scale=scale
    )
    return out.transpose(1, 2)
