"""Sampling parameters, the filtered sampling distribution, and the acceptance rule of speculative decoding.

Greedy: accept the longest prefix of drafted tokens that equals the target's argmax, then the target's argmax
after it (the bonus). Sampled: accept drafted x_i while u_i * q_i(x_i) < p_i(x_i) with u_i ~ U(0, 1); at the
first rejection resample from norm(max(p_i - q_i, 0)); if all are accepted draw the bonus from p_last. This
keeps the output distributed exactly as the target's (Leviathan et al. 2023). It knows tensors, not requests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from runner.errors import InvalidRequestError

# Temperatures below this make logits / T overflow or leave a distribution that is argmax in all but name;
# above the upper bound the distribution is uniform to float32 precision. Greedy is spelled 0.
MIN_TEMPERATURE = 1e-4
MAX_TEMPERATURE = 1e4
MAX_SEED = 2**64 - 1  # torch.Generator.manual_seed's range


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """Per-request sampling settings, refused by name on construction (ids against the vocab on submission)."""

    max_tokens: int = 64
    temperature: float = 0.0  # 0: greedy; else in [MIN_TEMPERATURE, MAX_TEMPERATURE]
    top_p: float = 1.0  # in (0, 1]; the most likely token is always kept
    top_k: int = 0  # 0: no top-k filter
    stop_token_ids: tuple[int, ...] = ()
    seed: int | None = None  # per-request RNG: the same seed gives the same tokens alone or batched
    ignore_eos: bool = False  # True: the target's eos_token_id does not end generation (stop ids still do)

    def __post_init__(self) -> None:
        if not _is_int(self.max_tokens) or self.max_tokens < 1:
            raise InvalidRequestError(f"max_tokens must be a positive integer, got {self.max_tokens!r}")
        temperature = self.temperature
        if not _is_number(temperature) or not (temperature == 0 or MIN_TEMPERATURE <= temperature <= MAX_TEMPERATURE):
            raise InvalidRequestError(
                f"temperature must be >= 0: 0 for greedy, else a number in [{MIN_TEMPERATURE}, {MAX_TEMPERATURE}]; "
                f"got {temperature!r}"
            )
        if not _is_number(self.top_p) or not 0 < self.top_p <= 1:
            raise InvalidRequestError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if not _is_int(self.top_k) or self.top_k < 0:
            raise InvalidRequestError(f"top_k must be a non-negative integer, got {self.top_k!r}")
        if isinstance(self.stop_token_ids, str | bytes) or not isinstance(self.stop_token_ids, tuple | list):
            raise InvalidRequestError(f"stop_token_ids must be a sequence of integers, got {self.stop_token_ids!r}")
        if not all(_is_int(t) and t >= 0 for t in self.stop_token_ids):
            raise InvalidRequestError(f"stop_token_ids must be non-negative integers, got {self.stop_token_ids!r}")
        object.__setattr__(self, "stop_token_ids", tuple(self.stop_token_ids))
        if self.seed is not None and (not _is_int(self.seed) or not 0 <= self.seed <= MAX_SEED):
            raise InvalidRequestError(f"seed must be None or an integer in [0, 2**64), got {self.seed!r}")
        if not isinstance(self.ignore_eos, bool):
            raise InvalidRequestError(f"ignore_eos must be True or False, got {self.ignore_eos!r}")

    @property
    def is_greedy(self) -> bool:
        return self.temperature == 0


def sampling_probs(logits: torch.Tensor, temperature: float, top_p: float = 1.0, top_k: int = 0) -> torch.Tensor:
    """The distribution a sampled request draws from: softmax(logits / T), then top-k, then top-p. [..., V]."""
    scores = logits.float() / temperature
    vocab = scores.shape[-1]
    indices = None
    if 0 < top_k < vocab:
        scores, indices = torch.topk(scores, top_k, dim=-1)
    probs = torch.softmax(scores, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        # Keep the smallest prefix whose mass reaches top_p (the token that crosses it included). The top
        # token is always kept: a top_p that rounds to 0 in float32 (1e-300) would otherwise keep nothing.
        keep = sorted_probs.cumsum(dim=-1) - sorted_probs < top_p
        keep[..., 0] = True
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs * keep)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    if indices is not None:
        probs = torch.zeros(*logits.shape, dtype=probs.dtype, device=probs.device).scatter(-1, indices, probs)
    return probs


def draw(probs: torch.Tensor, generator: torch.Generator | None) -> int:
    """One sample from a [V] distribution, as a Python int (synchronises with the device)."""
    return int(torch.multinomial(probs, 1, generator=generator)[0])


def greedy_accept_counts(drafted: torch.Tensor, target_argmax: torch.Tensor, num_valid: torch.Tensor) -> torch.Tensor:
    """drafted: [R, B-1]; target_argmax: [R, B]; num_valid: [R] drafted tokens per row -> accepted counts [R].

    The length of the leading run of drafted tokens equal to the target's argmax, on the device (no sync).
    """
    match = drafted == target_argmax[:, :-1]
    positions = torch.arange(drafted.shape[1], device=drafted.device)
    match &= positions[None, :] < num_valid[:, None]
    return match.to(torch.int64).cumprod(dim=1).sum(dim=1)


def greedy_accept(drafted: torch.Tensor, target_argmax: torch.Tensor, num_valid: list[int]) -> list[int]:
    """greedy_accept_counts with host lists in and out."""
    counts = torch.tensor(num_valid, device=drafted.device)
    return greedy_accept_counts(drafted, target_argmax, counts).tolist()


def rejection_accept(
    drafted: torch.Tensor | list[int],
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor | None,
    draft_indices: torch.Tensor | None,
    generator: torch.Generator | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One row. drafted: [n] ids; target_probs: [n + 1, V]; draft_probs: [n, V], or [n, k] over draft_indices
    [n, k] (DFlash2); None when nothing was drafted.

    Returns (accepted, next_token) as 0-dim device tensors: the number of drafted tokens kept and the token that
    follows them. Everything stays on the device (no host synchronisation); the row draws n uniforms and then
    one token from its generator, however many it accepts.
    """
    device = target_probs.device
    tokens = torch.as_tensor(drafted, dtype=torch.long, device=device)
    n = tokens.numel()
    if n == 0 or draft_probs is None:
        return torch.zeros((), dtype=torch.long, device=device), torch.multinomial(
            target_probs[0], 1, generator=generator
        )[0]
    p = target_probs[:n].gather(1, tokens[:, None])[:, 0]
    if draft_indices is None:
        q = draft_probs.gather(1, tokens[:, None])[:, 0]
        residual = target_probs[:n] - draft_probs
    else:
        q = (draft_probs * (draft_indices == tokens[:, None])).sum(-1)
        residual = target_probs[:n].scatter_add(1, draft_indices, -draft_probs)
    u = torch.rand(n, generator=generator, device=device)
    # Accept x_i while u_i * q_i(x_i) < p_i(x_i): the count is the leading run of acceptances.
    accepted = (u * q < p).long().cumprod(0).sum()
    residual = residual.clamp_min(0)
    total = residual.sum(-1, keepdim=True)
    # p == q exactly leaves no residual mass; then p itself is the right distribution.
    residual = torch.where(total > 0, residual / total.clamp_min(torch.finfo(residual.dtype).tiny), target_probs[:n])
    # Row i: where the token after i accepted ones comes from; row n (all accepted): the bonus from p_n.
    laws = torch.cat([residual, target_probs[n : n + 1]])  # [n + 1, V]
    law = laws.index_select(0, accepted.view(1))[0]
    return accepted, torch.multinomial(law, 1, generator=generator)[0]
