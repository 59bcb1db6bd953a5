"""Adapters: the acceptance rules real engines write, turned into the kit's rule(p, q, drafted, generator).

The kit calls a rule with torch probability rows and one `torch.Generator` threaded through every call (so its
draws follow the run's gate seed, `verify.seeds`). Engines write their rule otherwise; each adapter here is a
one-line wrapper that keeps the engine's code as it is:

- `global_generator(rule)`: rule(p, q, drafted) draws from torch's global generator (`torch.rand`,
  `torch.multinomial` with no generator=). Each call runs under `torch.random.fork_rng` with the global
  generator seeded from the kit's generator, so the draws are the kit's and the caller's global state is left
  as it was.
- `log_space(rule)`: rule(log_p, log_q, drafted, generator) takes log-probabilities (float64 logs of the rows).
- `batched(rule)`: rule(p [1, n + 1, V], q [1, n, V], drafted [1, n], generator) works on a batch of rows (beams,
  requests); returns per-row (accepted [1], token [1]), of which row 0 is read.
- `loop_step(step)`: step(p, q, drafted, generator) is one step of a generation loop and returns the tokens it
  appends (the accepted drafted prefix, then the token after it); the adapter checks the prefix is the drafted
  one and hands back (len - 1, last token).
- `numpy_rule(rule)`: rule(p, q, drafted, rng) on numpy float64 rows renormalised to sum to 1 (numpy's
  `Generator.choice` refuses float32 sums) and a numpy Generator seeded from the kit's generator.

They compose (`log_space(global_generator(rule))` is a log-space rule on the global generator). Knows tensors,
generators and numpy, not engines.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from verify.gatekit.rule import AcceptanceRule, normalise

__all__ = ["batched", "global_generator", "log_space", "loop_step", "numpy_rule"]

_SEEDS = 2**62  # seeds drawn from the kit's generator for the engine's own generator


def _seed_from(generator: torch.Generator) -> int:
    return int(torch.randint(0, _SEEDS, (1,), generator=generator))


def global_generator(rule: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], tuple[Any, Any]]) -> AcceptanceRule:
    """A rule drawing from torch's global generator, seeded per call from the kit's."""

    def adapted(p: torch.Tensor, q: torch.Tensor, drafted: torch.Tensor, generator: torch.Generator) -> tuple[Any, Any]:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(_seed_from(generator))
            return rule(p, q, drafted)

    return adapted


def log_space(rule: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, Any], tuple[Any, Any]]) -> AcceptanceRule:
    """A rule taking log-probabilities: handed log(p) and log(q) (float64; -inf where a row has no mass)."""

    def adapted(p: torch.Tensor, q: torch.Tensor, drafted: torch.Tensor, generator: torch.Generator) -> tuple[Any, Any]:
        return rule(normalise(p).log(), normalise(q).log(), drafted, generator)

    return adapted


def batched(rule: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, Any], tuple[Any, Any]]) -> AcceptanceRule:
    """A rule over a batch of rows (beams, requests): called with a batch of one, its row 0 read back."""

    def adapted(p: torch.Tensor, q: torch.Tensor, drafted: torch.Tensor, generator: torch.Generator) -> tuple[Any, Any]:
        accepted, token = rule(p[None], q[None], drafted[None], generator)
        return torch.as_tensor(accepted).reshape(-1)[0], torch.as_tensor(token).reshape(-1)[0]

    return adapted


def loop_step(step: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, Any], Sequence[int]]) -> AcceptanceRule:
    """One step of a generation loop that returns the tokens it appends: (accepted, the token after them). A
    step that appends nothing, or whose prefix is not the drafted tokens, fails the check by name."""

    def adapted(p: torch.Tensor, q: torch.Tensor, drafted: torch.Tensor, generator: torch.Generator) -> tuple[int, int]:
        emitted = [int(t) for t in torch.as_tensor(step(p, q, drafted, generator)).reshape(-1).tolist()]
        if not emitted:
            raise AssertionError("the step appended no token: a verify step appends at least the token after the "
                                 "accepted drafts")  # fmt: skip
        accepted = len(emitted) - 1
        if accepted > drafted.numel() or emitted[:accepted] != [int(t) for t in drafted[:accepted]]:
            raise AssertionError(f"the step appended {emitted}, whose first {accepted} are not the drafted "
                                 f"{drafted.tolist()}")  # fmt: skip
        return accepted, emitted[-1]

    return adapted


def numpy_rule(rule: Callable[[Any, Any, Any, Any], tuple[Any, Any]]) -> AcceptanceRule:
    """A numpy rule: float64 rows summing to 1, int64 drafted ids, a numpy Generator seeded from the kit's."""
    import numpy

    def adapted(p: torch.Tensor, q: torch.Tensor, drafted: torch.Tensor, generator: torch.Generator) -> tuple[Any, Any]:
        rng = numpy.random.default_rng(_seed_from(generator))
        accepted, token = rule(normalise(p).numpy(), normalise(q).numpy(), drafted.numpy().astype(numpy.int64), rng)
        return int(accepted), int(token)

    return adapted
