"""DFlash2's two additions to a draft layer stack: the grouped dynamic causal convolution and the candidate
selector's path walk. Pure modules: they know block hidden states and logits, not caches or requests.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from runner.sampling import sampling_probs


def grouped_dynamic_convolve(
    hidden: torch.Tensor, dynamic: torch.Tensor, base: torch.Tensor, group_size: int
) -> torch.Tensor:
    """Causal depthwise conv over the block axis with a static plus a per-token kernel.

    hidden: [R, T, H]; dynamic: [R, T, K, G] (G = H / group_size groups); base: [K, H].
    out[t] = sum_o (base[o] + dynamic[t, o]) * hidden[t - o]  (zero before the block start).
    """
    rows, length, size = hidden.shape
    groups = size // group_size
    blocks = hidden.view(rows, length, groups, group_size)
    dynamic = dynamic.reshape(rows, length, base.shape[0], groups, 1)
    out = torch.zeros_like(blocks)
    for offset in range(base.shape[0]):
        # Shift right by `offset` along the block axis: position t sees t - offset, never a later token.
        shifted = blocks if offset == 0 else F.pad(blocks[:, :-offset], (0, 0, 0, 0, offset, 0))
        out = out + base[offset].view(1, 1, groups, group_size).to(hidden.dtype) * shifted
        out = torch.addcmul(out, dynamic[:, :, offset], shifted)
    return out.view_as(hidden)


class GroupedDynamicCausalConv(nn.Module):
    def __init__(self, hidden_size: int, kernel_size: int, group_size: int) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.group_size = group_size
        self.groups = hidden_size // group_size
        # [0] runs before the wrapped op (attention or MLP), [1] after it, with kernels predicted from its input.
        self.base_kernel = nn.Parameter(torch.zeros(2, kernel_size, hidden_size))
        self.kernel_projection = nn.Linear(hidden_size, 2 * kernel_size * self.groups, bias=False)

    def prepare(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        dynamic = self.kernel_projection(hidden).view(*hidden.shape[:-1], 2, self.kernel_size, self.groups)
        before = grouped_dynamic_convolve(hidden, dynamic[..., 0, :, :], self.base_kernel[0], self.group_size)
        return before, dynamic[..., 1, :, :]

    def finish(self, hidden: torch.Tensor, dynamic: torch.Tensor) -> torch.Tensor:
        return grouped_dynamic_convolve(hidden, dynamic, self.base_kernel[1], self.group_size)


class CandidateSelector(nn.Module):
    """Replaces the per-slot argmax: a walk over each position's top-k candidates from the anchor.

    score(c at t) = logit(c) + <pred[x_{t-1}] * W h_t, succ[c]>, with x_{t-1} the token chosen one step
    before (the anchor at t = 0).
    """

    def __init__(self, vocab_size: int, hidden_size: int, rank: int, top_k: int) -> None:
        super().__init__()
        self.top_k = top_k
        self.predecessor_codebook = nn.Embedding(vocab_size, rank)
        self.successor_codebook = nn.Embedding(vocab_size, rank)
        self.hidden_projection = nn.Linear(hidden_size, rank, bias=False)

    def walk(
        self,
        hidden: torch.Tensor,
        logits: torch.Tensor,
        anchor_ids: torch.Tensor,
        temperatures: list[float],
        generators: list[torch.Generator | None],
        num_slots: list[int] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """hidden: [R, N, H]; logits: [R, N, V]; anchor_ids: [R]; num_slots[r]: row r's real slots (<= N).

        A sampled row draws from its generator only for its real slots, so its random stream (and so its
        output) is the same alone or padded into a wider batch.

        Returns the path [R, N], the candidates [R, N, k] and q [R, N, k]: the per-step distribution over the
        candidates that a sampled row drew from (zeros for greedy rows), which rejection sampling must use.
        """
        # Sorted: the candidates' order decides argmax ties and which candidate a sampled row's draw lands on, so
        # it must not depend on the device (unsorted top-k is ordered on CPU only by accident).
        unary, candidates = torch.topk(logits, self.top_k, dim=-1, sorted=True)
        projected = self.hidden_projection(hidden)
        predecessor = anchor_ids
        path, q_rows = [], []
        for position in range(hidden.shape[1]):
            scores = unary[:, position] + torch.einsum(
                "br,bkr->bk",
                self.predecessor_codebook(predecessor) * projected[:, position],
                self.successor_codebook(candidates[:, position]),
            )
            index = torch.argmax(scores, dim=-1)
            q = torch.zeros_like(scores, dtype=torch.float32)
            for row, temperature in enumerate(temperatures):
                if temperature > 0 and (num_slots is None or position < num_slots[row]):
                    q[row] = sampling_probs(scores[row], temperature)
                    index[row] = torch.multinomial(q[row], 1, generator=generators[row])[0]
            q_rows.append(q)
            predecessor = candidates[:, position].gather(-1, index[:, None])[:, 0]
            path.append(predecessor)
        return torch.stack(path, dim=1), candidates, torch.stack(q_rows, dim=1)
