"""The paged cache's per-layer views (taken once for the no-grad decode path) stay the cache's own storage:
writes land in `k`/`v` under every grad mode, a training forward's gradients flow through a write and a read,
and a deepcopy's views belong to the copy."""

from __future__ import annotations

import copy

import pytest
import torch

from runner.kv_cache import PagedKVCache

MODES = {"grad": torch.enable_grad, "no_grad": torch.no_grad, "inference": torch.inference_mode}


def _cache() -> PagedKVCache:
    return PagedKVCache(2, 4, 4, 2, 3, torch.float32, torch.device("cpu"))


@pytest.mark.parametrize("mode", sorted(MODES))
def test_writes_and_reads_go_through_the_cache_tensors(mode: str) -> None:
    cache = _cache()
    slots = torch.tensor([0, 5, 9])
    k, v = torch.randn(3, 2, 3), torch.randn(3, 2, 3)
    with MODES[mode]():
        cache.write(1, k, v, slots)
        keys, values = cache.read(1, slots[None])
    assert torch.equal(cache.k[1, slots], k) and torch.equal(cache.v[1, slots], v)
    assert not cache.k[0].any() and not cache.v[0].any(), "a write reached another layer"
    assert torch.equal(keys[0], k) and torch.equal(values[0], v)


def test_gradients_flow_through_a_write_and_a_read() -> None:
    cache = _cache()
    source = torch.randn(3, 2, 3, requires_grad=True)
    cache.write(0, source * 2, source * 3, torch.tensor([1, 2, 3]))
    keys, values = cache.read(0, torch.tensor([[1, 2, 3]]))
    (keys.sum() + values.sum()).backward()
    assert source.grad is not None and torch.equal(source.grad, torch.full_like(source, 5.0))


def test_a_deepcopy_writes_its_own_storage() -> None:
    cache = _cache()
    twin = copy.deepcopy(cache)
    with torch.inference_mode():
        twin.write(0, torch.ones(1, 2, 3), torch.ones(1, 2, 3), torch.tensor([4]))
    assert twin.k[0, 4].eq(1).all() and not cache.k.any()
