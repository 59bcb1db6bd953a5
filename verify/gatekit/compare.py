"""Exact comparisons an engine's gates make: a batch equals each of its rows run alone (at the logits), and
speculative decoding equals plain decoding under greedy.

Each takes plain callables that run the user's engine and returns nothing: a difference raises AssertionError
naming the input and the first place it differs. A comparison that could not fail is refused (also an
AssertionError, `DegenerateComparison`): identical inputs in a batch hide a row mix-up, and constant outputs
hide any drafting bug. Knows tensors and token lists, not engines.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import torch

__all__ = ["DegenerateComparison", "assert_batch_equals_solo", "assert_speculative_equals_plain"]

Input = TypeVar("Input")


class DegenerateComparison(AssertionError):
    """The comparison was refused: its two sides could not differ, so equality would prove nothing."""


def assert_batch_equals_solo(
    solo: Callable[[Input], torch.Tensor],
    batch: Callable[[Sequence[Input]], Sequence[torch.Tensor]],
    inputs: Sequence[Input],
    *,
    atol: float = 1e-5,
    rtol: float = 1e-5,
    what: str = "logits",
) -> None:
    """batch(inputs)[i] equals solo(inputs[i]) for every i, within atol + rtol * |solo|.

    solo runs one input alone; batch runs them together (padding, paging and row order are the engine's).
    Refused: fewer than two inputs, or inputs whose solo results are all equal (a swapped row would pass).
    """
    inputs = list(inputs)
    if len(inputs) < 2:
        raise DegenerateComparison(f"batch = solo refused: {len(inputs)} input(s); a batch needs two rows or more")
    batched = list(batch(inputs))
    if len(batched) != len(inputs):
        raise AssertionError(f"the batch returned {len(batched)} results for {len(inputs)} inputs")
    alone = [torch.as_tensor(solo(x)).detach().cpu() for x in inputs]
    if all(a.shape == alone[0].shape and torch.equal(a, alone[0]) for a in alone[1:]):
        raise DegenerateComparison(
            f"batch = solo refused: every input gives the same {what} alone, so a row read from another row passes"
        )
    for index, (got, want) in enumerate(zip(batched, alone, strict=True)):
        got = torch.as_tensor(got).detach().cpu()
        if got.shape != want.shape:
            shapes = f"shape {tuple(got.shape)} batched, {tuple(want.shape)} alone"
            raise AssertionError(f"{what} of input {index}: {shapes}")
        differs = (got.double() - want.double()).abs() > atol + rtol * want.double().abs()
        if bool(differs.any()):
            first = tuple(int(i) for i in differs.nonzero()[0])
            worst = float((got.double() - want.double()).abs().max())
            raise AssertionError(
                f"{what} of input {index}: batched differs from solo at {first}: {float(got[first]):.6g} != "
                f"{float(want[first]):.6g} ({int(differs.sum())} of {want.numel()} values, max |diff| {worst:.3g})"
            )


def assert_speculative_equals_plain(
    speculative: Callable[[Input], Sequence[int]],
    plain: Callable[[Input], Sequence[int]],
    prompts: Sequence[Input],
    *,
    what: str = "greedy output",
) -> None:
    """Under greedy decoding, speculative(prompt) emits exactly plain(prompt)'s tokens, for every prompt.

    Refused: plain outputs that use fewer than two distinct token ids overall (a drafter that always proposes
    that id would pass without drafting anything right).
    """
    prompts = list(prompts)
    expected = [[int(t) for t in plain(p)] for p in prompts]
    if len({t for out in expected for t in out}) < 2:
        raise DegenerateComparison(
            f"speculative = plain refused: the plain outputs of {len(prompts)} prompt(s) use fewer than two token "
            "ids; choose prompts whose continuations vary"
        )
    for index, (prompt, want) in enumerate(zip(prompts, expected, strict=True)):
        got = [int(t) for t in speculative(prompt)]
        for position, (a, e) in enumerate(zip(got, want, strict=False)):
            if a != e:
                raise AssertionError(
                    f"{what} of prompt {index}: token {position} is {a} speculative, {e} plain "
                    f"(equal before: {want[:position][-8:]})"
                )
        if len(got) != len(want):
            raise AssertionError(f"{what} of prompt {index}: {len(got)} tokens speculative, {len(want)} plain")
