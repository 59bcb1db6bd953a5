"""An n-gram lookup drafter: the next token's law is read off what followed the same n tokens earlier in the
sequence (prompt lookup, smoothed), so repetitive text drafts far ahead and new text drafts at random.
Knows token ids, not models."""

from __future__ import annotations

import torch

from lookupspec.model import VOCAB


class NGramDrafter:
    def __init__(self, n: int = 2, smoothing: float = 0.2) -> None:
        self.n = n
        self.smoothing = smoothing

    def law(self, tokens: list[int]) -> torch.Tensor:
        """q [V]: counts of what followed each earlier occurrence of the last n tokens, plus smoothing."""
        counts = torch.full((VOCAB,), self.smoothing)
        context = tokens[-self.n :]
        for i in range(len(tokens) - self.n):
            if tokens[i : i + self.n] == context:
                counts[tokens[i + self.n]] += 1.0
        return counts / counts.sum()

    def propose(
        self, tokens: list[int], num_draft: int, temperature: float, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(drafted ids [k], q [k, V]): each slot drawn from its law (its argmax under greedy), then appended."""
        context, drafted, laws = list(tokens), [], []
        for _ in range(num_draft):
            q = self.law(context)
            token = int(q.argmax()) if temperature == 0 else int(torch.multinomial(q, 1, generator=generator))
            drafted.append(token)
            laws.append(q)
            context.append(token)
        return torch.tensor(drafted), torch.stack(laws)
