"""Paged K/V storage: one flat slot array per layer, addressed through per-row block tables.

slot = block_table[row, position // page_size] * page_size + position % page_size. The store knows slots and
tensors; which request owns which pages is the block manager's and the batch's business.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from runner.config import TargetConfig


class PagedKVCache:
    def __init__(
        self,
        num_layers: int,
        num_pages: int,
        page_size: int,
        num_kv_heads: int,
        head_dim: int,
        dtype: torch.dtype,
        device: torch.device,
    ) -> None:
        self.page_size = page_size
        # One page more than the pool hands out: padding positions are written to this scratch page, so every
        # write is one dense index_copy_ (a boolean-mask select would synchronise with the device to learn its
        # size). No block table points at it, so nothing reads it.
        self.scratch_slot = num_pages * page_size
        shape = (num_layers, (num_pages + 1) * page_size, num_kv_heads, head_dim)
        # [num_layers, num_slots, num_kv_heads, head_dim]
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        # Per-layer views taken once: `self.k[layer]` costs ~2 us of indexing on each of a decode step's ~16 reads
        # and writes. Only without autograd: a view taken earlier neither accepts an in-place write with grad
        # enabled nor carries the gradient history a training forward writes into the base.
        self._k_layers, self._v_layers = list(self.k), list(self.v)

    @classmethod
    def for_model(
        cls, cfg: TargetConfig, num_pages: int, page_size: int, dtype: torch.dtype, device: torch.device
    ) -> PagedKVCache:
        """A pool for a model of these shapes (the target, or the draft's own layers)."""
        return cls(cfg.num_hidden_layers, num_pages, page_size, cfg.num_key_value_heads, cfg.head_dim, dtype, device)

    def slots(self, block_table: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """block_table: [R, max_pages]; positions: [R, S] -> slot ids [R, S]."""
        pages = block_table.gather(1, positions // self.page_size)
        return pages * self.page_size + positions % self.page_size

    def write_slots(self, block_table: torch.Tensor, positions: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """Where a forward's [R, S] positions are written: their slots, the scratch slot for padding. [R * S]."""
        return torch.where(valid, self.slots(block_table, positions), self.scratch_slot).flatten()

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor, slot_mapping: torch.Tensor) -> None:
        """k, v: [N, num_kv_heads, head_dim] written at slot_mapping: [N]."""
        if k.dtype != self.k.dtype:  # a cast only when needed: a no-op .to still costs a dispatch per write
            k, v = k.to(self.k.dtype), v.to(self.v.dtype)
        k_layer, v_layer = self._layer(layer)
        k_layer.index_copy_(0, slot_mapping, k)
        v_layer.index_copy_(0, slot_mapping, v)

    def read(self, layer: int, slot_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """slot_ids: [R, S] -> k, v: [R, S, num_kv_heads, head_dim]."""
        flat = slot_ids.flatten()
        shape = (*slot_ids.shape, *self.k.shape[2:])
        k_layer, v_layer = self._layer(layer)
        return k_layer.index_select(0, flat).view(shape), v_layer.index_select(0, flat).view(shape)

    def _layer(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        if torch.is_grad_enabled():
            return self.k[layer], self.v[layer]
        return self._k_layers[layer], self._v_layers[layer]
