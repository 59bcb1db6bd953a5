"""StackedWeights serves its cached stack only while every source is the tensor it stacked, unedited: an in-place
edit, a loaded state dict, a deepcopy or a dtype change each give a stack of the current values. SwiGLU's stacked
and split forms give the same bits."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from runner.layers import MAX_STACKED_GATE_UP, StackedWeights, SwiGLU


class Pair(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 3, bias=False)
        self.b = nn.Linear(4, 2, bias=False)
        self.stacked = StackedWeights([self.a.weight, self.b.weight])

    def expected(self) -> torch.Tensor:
        return torch.cat([self.a.weight, self.b.weight])


def _fresh(module: Pair) -> None:
    with torch.inference_mode():
        assert torch.equal(module.stacked.get(), module.expected())


def test_cached_stack_is_reused_while_nothing_changes() -> None:
    module = Pair()
    with torch.inference_mode():
        first = module.stacked.get()
        assert module.stacked.get() is first


def test_in_place_edit_is_noticed() -> None:
    module = Pair()
    _fresh(module)
    with torch.no_grad():
        module.b.weight.mul_(2.0)  # same storage, version counter moves
    _fresh(module)
    with torch.no_grad():
        module.a.weight[0, 0] = 7.0
    _fresh(module)


def test_loaded_weights_are_noticed() -> None:
    module, other = Pair(), Pair()
    _fresh(module)
    module.load_state_dict(other.state_dict())
    _fresh(module)


def test_deepcopy_edits_stay_with_the_copy() -> None:
    module = Pair()
    _fresh(module)
    twin = copy.deepcopy(module)
    with torch.no_grad():
        twin.a.weight.zero_()
    _fresh(twin)
    _fresh(module)


def test_dtype_change_is_noticed() -> None:
    module = Pair()
    _fresh(module)
    module.to(torch.float64)
    with torch.inference_mode():
        assert module.stacked.get().dtype == torch.float64
    _fresh(module)


def test_gradients_reach_every_source() -> None:
    module = Pair()
    module.stacked.get().sum().backward()
    assert module.a.weight.grad is not None and module.b.weight.grad is not None


@pytest.mark.parametrize("num_tokens", [1, 3, 8, 16])
def test_swiglu_stacked_and_split_give_the_same_bits(num_tokens: int) -> None:
    """A small MLP stacks gate and up, a large one runs them apart (runner.layers.MAX_STACKED_GATE_UP): both
    forms must give the same bits, or a model's tokens would depend on its size class."""
    torch.manual_seed(0)
    stacked = SwiGLU(64, 96)
    assert stacked._gate_up is not None
    split = copy.deepcopy(stacked)
    split._gate_up = None
    x = torch.randn(1, num_tokens, 64)
    with torch.inference_mode():
        assert torch.equal(stacked.forward(x), split.forward(x))


def test_swiglu_splits_past_the_limit() -> None:
    assert SwiGLU(16, MAX_STACKED_GATE_UP // 32)._gate_up is not None
    assert SwiGLU(16, MAX_STACKED_GATE_UP // 32 + 1)._gate_up is None
