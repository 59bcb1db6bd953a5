"""The matmul floor of a decode: the time its matmuls alone take, replayed with nothing else around them.

A recording run logs every matmul the decode calls through torch's Python API (F.linear, matmul, mm, bmm,
addmm, einsum), in order: the operation, the shape and strides of its first operand (the activation), and the
other operands themselves (the weights and biases, by reference). The replay calls exactly those operations on
the same weights, in the same order, on the same thread count, with a stand-in activation of the recorded
shape and strides (one per distinct layout, made once), under inference mode as the engine's step is. What the
decode spends beyond the replay is its non-matmul time: norms, attention (SDPA is not logged: it is attention,
not a projection), rotary, sampling, indexing and Python.

The runner knows nothing of this: the log is a TorchFunctionMode around the whole decode, seen from outside.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.nn import functional as F
from torch.overrides import TorchFunctionMode

# Every spelling of a matmul the runner (or a future runner) might call.
MATMUL_OPS = frozenset(
    {
        F.linear,
        torch.matmul,
        torch.Tensor.matmul,
        torch.Tensor.__matmul__,
        torch.mm,
        torch.Tensor.mm,
        torch.bmm,
        torch.Tensor.bmm,
        torch.addmm,
        torch.einsum,
    }
)


@dataclass(frozen=True, slots=True)
class Layout:
    """The recorded activation's shape, strides, dtype and device: a replay input is made to match it."""

    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device

    def make(self) -> torch.Tensor:
        span = 1 + sum((n - 1) * s for n, s in zip(self.shape, self.stride, strict=True)) if all(self.shape) else 0
        base = torch.randn(span, dtype=self.dtype, device=self.device)  # random values, no denormal stalls
        return base.as_strided(self.shape, self.stride)


@dataclass(frozen=True, slots=True)
class MatmulCall:
    op: Callable
    activation: Layout
    rest: tuple  # the other operands as called: weights and biases (the same tensors), or non-tensor arguments
    kwargs: dict


class _Recorder(TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[MatmulCall] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in MATMUL_OPS:
            if func is torch.einsum:  # einsum(equation, a, b, ...): the first tensor is the activation
                first, rest = args[1], (args[0], *args[2:])
            else:
                first, rest = args[0], tuple(args[1:])
            layout = Layout(tuple(first.shape), tuple(first.stride()), first.dtype, first.device)
            self.calls.append(MatmulCall(func, layout, rest, dict(kwargs)))
        return func(*args, **kwargs)


def record(fn: Callable[[], object]) -> list[MatmulCall]:
    """Runs `fn` once and returns the matmuls it called, in order."""
    recorder = _Recorder()
    with recorder:
        fn()
    return recorder.calls


class Replay:
    """The recorded matmuls, ready to run: activations made once per layout, arguments bound in a list."""

    def __init__(self, calls: list[MatmulCall]) -> None:
        if not calls:  # a floor of nothing would make the ratio a division by a timer's noise
            raise ValueError("no matmul was recorded: the decode's matmuls are called some way the log misses")
        inputs: dict[Layout, torch.Tensor] = {}
        self._bound: list[tuple[Callable, tuple, dict]] = []
        for call in calls:
            x = inputs.get(call.activation)
            if x is None:
                x = inputs[call.activation] = call.activation.make()
            if call.op is torch.einsum:
                args = (call.rest[0], x, *call.rest[1:])
            else:
                args = (x, *call.rest)
            self._bound.append((call.op, args, call.kwargs))
        self.num_calls = len(calls)

    @torch.inference_mode()
    def run(self) -> None:
        for op, args, kwargs in self._bound:
            op(*args, **kwargs)

    def timed(self) -> float:
        """Seconds for one replay of every recorded matmul."""
        cuda = any(arg.is_cuda for _, args, _ in self._bound[:1] for arg in args if isinstance(arg, torch.Tensor))
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        self.run()
        if cuda:
            torch.cuda.synchronize()
        return time.perf_counter() - start
