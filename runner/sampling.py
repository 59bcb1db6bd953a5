"""Sampling parameters, the filtered sampling distribution, and the acceptance rule of speculative decoding.

Greedy: accept the longest prefix of drafted tokens that equals the target's argmax, then the target's argmax
after it (the bonus). Sampled: accept drafted x_i while u_i * q_i(x_i) < p_i(x_i) with u_i ~ U(0, 1); at the
first rejection resample from norm(max(p_i - q_i, 0)); if all are accepted draw the bonus from p_last. This
keeps the output distributed exactly as the target's (Leviathan et al. 2023). It knows tensors, not requests.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from runner.errors import InvalidRequestError


@dataclass(frozen=True, slots=True)
class SamplingParams:
    max_tokens: int = 64
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0  # 0: no top-k filter
    stop_token_ids: tuple[int, ...] = ()
    seed: int | None = None  # per-request RNG: the same seed gives the same tokens alone or batched

    def __post_init__(self) -> None:
        if not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise InvalidRequestError(f"max_tokens must be a positive integer, got {self.max_tokens!r}")
        if not self.temperature >= 0:  # also rejects NaN
            raise InvalidRequestError(f"temperature must be >= 0, got {self.temperature!r}")
        if not 0 < self.top_p <= 1:
            raise InvalidRequestError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if not isinstance(self.top_k, int) or self.top_k < 0:
            raise InvalidRequestError(f"top_k must be a non-negative integer, got {self.top_k!r}")
        object.__setattr__(self, "stop_token_ids", tuple(int(t) for t in self.stop_token_ids))

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
        # Keep the smallest prefix whose mass reaches top_p (the token that crosses it included).
        keep = sorted_probs.cumsum(dim=-1) - sorted_probs < top_p
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs * keep)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    if indices is not None:
        probs = torch.zeros(*logits.shape, dtype=probs.dtype, device=probs.device).scatter(-1, indices, probs)
    return probs


def draw(probs: torch.Tensor, generator: torch.Generator | None) -> int:
    """One sample from a [V] distribution."""
    return int(torch.multinomial(probs, 1, generator=generator)[0])


def greedy_accept(drafted: torch.Tensor, target_argmax: torch.Tensor, num_valid: list[int]) -> list[int]:
    """drafted: [R, B-1]; target_argmax: [R, B]; num_valid[r]: drafted tokens in row r -> accepted count per row."""
    match = drafted == target_argmax[:, :-1]
    positions = torch.arange(drafted.shape[1], device=drafted.device)
    match &= positions[None, :] < torch.tensor(num_valid, device=drafted.device)[:, None]
    return match.to(torch.int64).cumprod(dim=1).sum(dim=1).tolist()


def rejection_accept(
    drafted: list[int],
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor,
    draft_indices: torch.Tensor | None,
    generator: torch.Generator | None,
) -> tuple[int, int]:
    """One row. target_probs: [n + 1, V]; draft_probs: [n, V], or [n, k] over draft_indices [n, k] (DFlash2).

    Returns (accepted, next_token): the number of drafted tokens kept and the token that follows them.
    """
    n = len(drafted)
    for i, token in enumerate(drafted):
        if draft_indices is None:
            q = float(draft_probs[i, token])
        else:
            q = float((draft_probs[i] * (draft_indices[i] == token)).sum())
        p = float(target_probs[i, token])
        u = float(torch.rand((), generator=generator, device=target_probs.device))
        if not u * q < p:
            residual = target_probs[i].clone()
            if draft_indices is None:
                residual -= draft_probs[i]
            else:
                residual.scatter_add_(0, draft_indices[i], -draft_probs[i])
            residual.clamp_min_(0)
            total = residual.sum()
            # p == q exactly leaves no residual mass; then p itself is the right distribution.
            residual = residual / total if total > 0 else target_probs[i]
            return i, draw(residual, generator)
    return n, draw(target_probs[n], generator)
