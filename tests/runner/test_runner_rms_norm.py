"""The CPU's written-out float32 RMSNorm gives the bits of torch.rms_norm and of HF's Qwen3RMSNorm (the
reference's), with and without its weight, on the shapes a decode norms (hidden states, q and k heads) and on
values from 1e-3 to 1e3; it also carries a training forward's gradients."""

from __future__ import annotations

import pytest
import torch

from runner.layers import RMSNorm, rms_normalize

SHAPES = [(8, 512), (1, 8, 512), (1, 1, 64), (1, 8, 24, 64), (2, 9, 6, 16), (3, 7, 32)]


def hf_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' Qwen3RMSNorm.forward, for float32."""
    variance = x.pow(2).mean(-1, keepdim=True)
    return weight * (x * torch.rsqrt(variance + eps))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("eps", [1e-6, 1e-5])
def test_the_cpu_norm_has_torch_and_hf_bits(shape: tuple[int, ...], eps: float) -> None:
    norm = RMSNorm(shape[-1], eps)
    for seed in range(7):
        generator = torch.Generator().manual_seed(seed)
        x = torch.randn(shape, generator=generator) * 10.0 ** (seed - 3)
        with torch.no_grad():
            norm.weight.copy_(torch.randn(shape[-1], generator=generator))
            got = norm.forward(x)
        assert torch.equal(got, torch.rms_norm(x, norm.weight.shape, norm.weight, eps))
        assert torch.equal(got, hf_rms_norm(x, norm.weight, eps))
        assert torch.equal(rms_normalize(x, eps), torch.rms_norm(x, x.shape[-1:], None, eps))


def test_the_cpu_norm_carries_gradients() -> None:
    norm = RMSNorm(16, 1e-6)
    x = torch.randn(3, 16, requires_grad=True)
    norm.forward(x).square().sum().backward()
    twin = x.detach().clone().requires_grad_(True)
    torch.rms_norm(twin, (16,), norm.weight.detach(), 1e-6).square().sum().backward()
    assert x.grad is not None and norm.weight.grad is not None
    torch.testing.assert_close(x.grad, twin.grad)
