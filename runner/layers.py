"""The shared maths of the target and the draft: RMSNorm, rotary embeddings, SwiGLU, masked attention.

Stateless: it knows tensors, not caches, requests or checkpoints.
"""

from __future__ import annotations

import functools

import torch
from torch import nn
from torch.nn import functional as F


class StackedWeights:
    """Row-stacked copies of some parameters (one matmul instead of several), rebuilt whenever a source changes:
    a new tensor (load, deepcopy, .to) or an in-place edit (its version counter moves). `repeats[i]` stacks
    that many copies of parameter i (a per-head norm weight repeated over the heads).

    With autograd recording (training), the stack is built afresh on every call so gradients reach each source.
    """

    def __init__(self, params: list[nn.Parameter], repeats: list[int] | None = None) -> None:
        self._params = params
        self._repeats = repeats or [0] * len(params)
        self._key: tuple[tuple[int, int], ...] = ()
        self._stacked: torch.Tensor | None = None

    def _stack(self) -> torch.Tensor:
        parts = [p if r == 0 else p.expand(r, *p.shape) for p, r in zip(self._params, self._repeats, strict=True)]
        return torch.cat(parts)

    def get(self) -> torch.Tensor:
        if torch.is_grad_enabled() and any(p.requires_grad for p in self._params):
            return self._stack()
        stacked = self._stacked
        if stacked is not None:
            # A plain loop: this runs ~14 times a decode step, and a generator and tuple per call cost more than
            # the check itself.
            for p, (ptr, version) in zip(self._params, self._key, strict=True):
                if p._version != version or p.data_ptr() != ptr:
                    break
            else:
                return stacked
        # A normal tensor (not an inference tensor), usable inside and outside inference mode.
        with torch.inference_mode(False), torch.no_grad():
            self._stacked = self._stack()
        self._key = tuple((p.data_ptr(), p._version) for p in self._params)
        return self._stacked


@functools.lru_cache(maxsize=64)
def _norm_constants(dim: int, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """dim and eps as 0-dim float32 CPU tensors (usable with a tensor on any device), made once. An op given a
    Python number wraps it in a new tensor on every call, which cost ~4 us an op on the 2-core CPU; two such ops
    run in every norm, ~15 to 21 norms a decode step. A normal tensor, usable inside and outside inference mode."""
    with torch.inference_mode(False):
        return torch.tensor(float(dim)), torch.tensor(eps, dtype=torch.float32)


def _rms_normalize_cpu(x: torch.Tensor, eps: float) -> torch.Tensor:
    """float32 on the CPU: x * rsqrt(mean(x^2) + eps), the mean written as the sum over dim it is on the CPU
    (torch's CPU mean is sum, then a division by the count). Bit-identical to torch.rms_norm and to HF's
    Qwen3RMSNorm (tests/runner/test_runner_rms_norm.py), in 7 ops where torch 2.13's composite rms_norm runs
    ~16, two of them copies; 0.86 of its time on [1, 8, 512] and [1, 8, 24, 64] in a micro-benchmark."""
    dim, eps_t = _norm_constants(x.shape[-1], eps)
    return x * ((x * x).sum(-1, keepdim=True) / dim + eps_t).rsqrt()


def rms_normalize(x: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm without its weight, in float32 whatever the dtype (as Qwen3 does); the caller multiplies.

    float32 takes the written-out steps on the CPU and torch's one-op rms_norm elsewhere; other dtypes are
    upcast, normalised and cast back.
    """
    if x.dtype == torch.float32:
        if x.is_cpu:
            return _rms_normalize_cpu(x, eps)
        return torch.rms_norm(x, x.shape[-1:], None, eps)  # F.rms_norm's op without its Python wrapper
    y = x.float()
    y = y * y.pow(2).mean(-1, keepdim=True).add_(eps).rsqrt_()
    return y.to(x.dtype)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.weight  # one nn.Module.__getattr__ (~0.4 us) instead of three; ~17 calls a decode step
        if x.dtype == weight.dtype == torch.float32:
            if x.is_cpu:
                return _rms_normalize_cpu(x, self.eps) * weight  # (x * r) * w, the order torch.rms_norm uses
            return torch.rms_norm(x, weight.shape, weight, self.eps)  # the weight applied inside: one op
        return weight * rms_normalize(x, self.eps)


# gate and up are stacked into one matmul only up to this many weights (2 MiB in float32). A small model's step
# is dispatch-bound and one launch instead of two saves its overhead; a large one's matmuls stream their weights
# from memory, and there the stacked [2 * intermediate, hidden] matmul measured slower in the decode loop than the
# two halves (1.4% of a batch-1 step at hidden 512, intermediate 1536; paired in-process A/B, same tokens).
MAX_STACKED_GATE_UP = 512 * 1024


class SwiGLU(nn.Module):
    def __init__(self, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)
        self._gate_up: StackedWeights | None = None
        if 2 * intermediate * hidden <= MAX_STACKED_GATE_UP:
            self._gate_up = StackedWeights([self.gate_proj.weight, self.up_proj.weight])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The module's maths without its __call__. Stacked: gate and up in one matmul over [gate; up]
        # (bit-identical columns); else two matmuls, as the reference's.
        if self._gate_up is None:
            gate, up = F.linear(x, self.gate_proj.weight), F.linear(x, self.up_proj.weight)
        else:
            gate, up = F.linear(x, self._gate_up.get()).chunk(2, dim=-1)
        return F.linear(F.silu(gate) * up, self.down_proj.weight)


class Rotary(nn.Module):
    """Default RoPE: cos/sin per absolute position, in the model's dtype.

    Computing them is ~12 ops a call; a decode step makes three calls on a handful of positions, so they are
    looked up in a table of positions [0, size) instead, built once by the same maths and rebuilt for a larger
    bound, another dtype or another device. sin and cos are elementwise, so a table row has the bits a direct
    computation of that position has (tests/runner/test_runner_rotary_table.py checks this).
    """

    def __init__(self, head_dim: int, theta: float) -> None:
        super().__init__()
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self._table: torch.Tensor | None = None  # [size, 2 * head_dim]: cos, then signed sin

    def angles(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """positions: [R, T] -> cos, signed sin: [R, T, 1, head_dim], broadcast over [R, T, heads, head_dim].

        RoPE is x * cos + rotate_half(x) * sin with rotate_half(x) = cat(-x2, x1) = roll(x, half) with its first
        half negated. That sign is folded into sin here, once, so each application is one roll.
        """
        freqs = positions.float()[..., None, None] * self.inv_freq.float()
        emb = torch.cat((freqs, freqs), dim=-1)
        sin = emb.sin()
        half = sin.shape[-1] // 2
        sin = torch.cat((-sin[..., :half], sin[..., half:]), dim=-1)
        return emb.cos().to(dtype), sin.to(dtype)

    def forward(
        self, positions: torch.Tensor, dtype: torch.dtype, bound: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """As `angles`. bound: a host-known upper bound (exclusive) on positions known to be >= 0; without it
        their range is read from the device (a sync), and negative positions (a test's shifted store) are
        computed directly."""
        if bound is None:
            if not positions.numel():
                return self.angles(positions, dtype)
            low, high = (int(v) for v in torch.aminmax(positions))
            if low < 0:
                return self.angles(positions, dtype)
            bound = high + 1
        table = self._table
        if table is None or table.shape[0] < bound or table.dtype != dtype or table.device != self.inv_freq.device:
            # Doubling keeps a growing sequence from rebuilding often; a normal tensor (not an inference tensor),
            # usable inside and outside inference mode.
            size = max(bound, 256, 0 if table is None else 2 * table.shape[0])
            with torch.inference_mode(False), torch.no_grad():
                cos, sin = self.angles(torch.arange(size, device=self.inv_freq.device)[None], dtype)
                table = self._table = torch.cat((cos, sin), dim=-1)[0, :, 0]
        head_dim = table.shape[-1] // 2
        rows = table.index_select(0, positions.flatten()).view(*positions.shape, 1, 2 * head_dim)
        cos, sin = rows.chunk(2, dim=-1)
        return cos, sin


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    # x: [R, T, heads, head_dim]; cos, signed_sin: [R, T, 1, head_dim] from Rotary
    return x * cos + x.roll(x.shape[-1] // 2, dims=-1) * signed_sin


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


def additive_mask(visible: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """bool [R, T, S] -> [R, 1, T, S] (broadcast over the heads), 0 where visible, -inf elsewhere: what SDPA
    turns a bool mask into on every call, built once per forward instead of once per layer."""
    mask = torch.where(visible[:, None], 0.0, float("-inf"))
    return mask if mask.dtype == dtype else mask.to(dtype)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, scale: float) -> torch.Tensor:
    """GQA attention. q: [R, T, H, D]; k, v: [R, S, KVH, D]; mask: [R, 1, T, S] from `additive_mask`, or any
    mask SDPA broadcasts over [R, H, T, S] -> [R, T, H, D].

    Query head h reads key/value head h // (H / KVH), as repeat_interleave would give, without the copies.
    """
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2),
        k.transpose(1, 2),
        v.transpose(1, 2),
        attn_mask=mask,
        scale=scale,
        enable_gqa=q.shape[2] != k.shape[2],
    )
    return out.transpose(1, 2)
