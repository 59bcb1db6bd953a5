"""Rotary's lookup table gives the bits the direct computation gives, at any position, whatever the table's size,
and is rebuilt when a call needs a longer table, another dtype or another device."""

from __future__ import annotations

import pytest
import torch

from runner.layers import Rotary


def _same(rotary: Rotary, positions: torch.Tensor, dtype: torch.dtype, bound: int | None = None) -> None:
    cos, sin = rotary(positions, dtype, bound)
    want_cos, want_sin = rotary.angles(positions, dtype)
    assert cos.dtype == sin.dtype == dtype
    assert torch.equal(cos, want_cos) and torch.equal(sin, want_sin)


@pytest.mark.parametrize(("head_dim", "theta"), [(16, 10_000.0), (128, 1_000_000.0)], ids=["tiny", "qwen3"])
def test_table_rows_equal_the_direct_computation(head_dim: int, theta: float) -> None:
    rotary = Rotary(head_dim, theta)
    generator = torch.Generator().manual_seed(0)
    for shape in [(1, 1), (1, 4), (3, 5), (2, 37)]:
        _same(rotary, torch.randint(0, 5000, shape, generator=generator), torch.float32)


def test_positions_past_the_table_grow_it() -> None:
    rotary = Rotary(16, 10_000.0)
    _same(rotary, torch.arange(4)[None], torch.float32)
    assert rotary._table is not None
    size = rotary._table.shape[0]
    far = torch.tensor([[size - 1, size, 3 * size + 5]])
    _same(rotary, far, torch.float32)  # bound read from the positions
    _same(rotary, far + 7 * size, torch.float32, bound=int(far.max()) + 7 * size + 1)  # bound given
    assert rotary._table.shape[0] > 7 * size


def test_negative_and_empty_positions_are_computed_directly() -> None:
    rotary = Rotary(16, 10_000.0)
    _same(rotary, torch.tensor([[-4, -1, 0, 3]]), torch.float32)
    _same(rotary, torch.zeros(1, 0, dtype=torch.long), torch.float32)


def test_dtype_change_rebuilds_the_table() -> None:
    rotary = Rotary(16, 10_000.0)
    positions = torch.tensor([[0, 5, 300]])
    _same(rotary, positions, torch.float32)
    _same(rotary, positions, torch.bfloat16)
    _same(rotary, positions, torch.float32)


def test_table_follows_the_module_to_another_device() -> None:
    rotary = Rotary(16, 10_000.0)
    _same(rotary, torch.tensor([[1, 2]]), torch.float32)
    rotary.to("meta")
    cos, _ = rotary(torch.tensor([[1, 2]], device="meta"), torch.float32, bound=3)
    assert cos.device.type == "meta"


def test_table_made_in_inference_mode_serves_autograd() -> None:
    rotary = Rotary(16, 10_000.0)
    with torch.inference_mode():
        rotary(torch.tensor([[0, 1]]), torch.float32)
    x = torch.randn(1, 2, 1, 16, requires_grad=True)
    cos, sin = rotary(torch.tensor([[0, 1]]), torch.float32)
    (x * cos + x * sin).sum().backward()  # an inference tensor saved for backward would raise here
    assert x.grad is not None
