"""A tiny one-layer attention language model, built from a seed (no checkpoint to download), and its KV cache.

Two entry points, as a real engine has: `forward` runs one sequence's new tokens against its cache (prefill
and the verify step), `forward_batch` scores left-padded prompts together without a cache.
"""

from __future__ import annotations

import math

import torch

VOCAB = 12
DIM = 16
MAX_LEN = 96


class KVCache:
    """Keys and values of one sequence, preallocated [MAX_LEN, DIM]; `length` slots are valid."""

    def __init__(self) -> None:
        self.keys = torch.zeros(MAX_LEN, DIM)
        self.values = torch.zeros(MAX_LEN, DIM)
        self.length = 0

    def append(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        end = self.length + keys.shape[0]
        self.keys[self.length : end] = keys
        self.values[self.length : end] = values
        self.length = end

    def crop(self, length: int) -> None:
        """Forget every slot past `length` (the rejected drafted tokens' keys and values)."""
        self.length = min(self.length, length)


class TinyLM:
    def __init__(self, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)

        def weight(*shape: int, scale: float) -> torch.Tensor:
            return torch.randn(*shape, generator=g) * scale

        self.embed = weight(VOCAB, DIM, scale=1.0)
        self.pos = weight(MAX_LEN, DIM, scale=0.8)
        self.wq, self.wk, self.wv, self.wo = (weight(DIM, DIM, scale=DIM**-0.5) for _ in range(4))
        self.head = weight(DIM, VOCAB, scale=1.5)

    def _logits(self, h: torch.Tensor, attended: torch.Tensor) -> torch.Tensor:
        return torch.tanh(h + attended @ self.wo) @ self.head

    def forward(self, tokens: torch.Tensor, start: int, cache: KVCache) -> torch.Tensor:
        """tokens [T] at positions start.. -> logits [T, V]; appends their keys and values to the cache."""
        positions = torch.arange(start, start + tokens.numel())
        h = self.embed[tokens] + self.pos[positions]  # [T, D]
        cache.append(h @ self.wk, h @ self.wv)
        keys, values = cache.keys[: cache.length], cache.values[: cache.length]
        scores = (h @ self.wq) @ keys.T / math.sqrt(DIM)  # [T, S]
        first = cache.length - tokens.numel()  # the cache slot of tokens[0]
        visible = torch.arange(cache.length)[None, :] <= first + torch.arange(tokens.numel())[:, None]  # causal
        attended = torch.softmax(scores.masked_fill(~visible, -math.inf), -1) @ values
        return self._logits(h, attended)

    def forward_batch(self, tokens: torch.Tensor, pads: torch.Tensor) -> torch.Tensor:
        """tokens [B, W], row b left-padded with pads[b] filler ids -> logits [B, W, V] (filler rows are noise)."""
        width = tokens.shape[1]
        positions = (torch.arange(width)[None] - pads[:, None]).clamp(min=0)
        h = self.embed[tokens] + self.pos[positions]  # [B, W, D]
        scores = (h @ self.wq) @ (h @ self.wk).transpose(1, 2) / math.sqrt(DIM)  # [B, W, W]
        causal = torch.ones(width, width, dtype=torch.bool).tril()
        real = torch.arange(width)[None, :] >= pads[:, None]  # [B, W]: keys that are not filler
        visible = causal[None] & real[:, None, :]
        visible = visible | ~real[:, :, None]  # a filler query sees everything: no empty row, never read
        attended = torch.softmax(scores.masked_fill(~visible, -math.inf), -1) @ (h @ self.wv)
        return self._logits(h, attended)
