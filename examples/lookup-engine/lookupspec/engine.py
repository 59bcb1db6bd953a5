"""The decode loop: the drafter proposes k tokens, one target forward scores the last token and the k drafted
ones against the cache, acceptance keeps a prefix and one more token, and the cache drops the rest.

`plain_generate` is plain decoding (a fresh forward over the whole sequence per token, no cache, no drafter);
`score` runs prompts as one left-padded batch. Both exist so that the tests can compare against them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lookupspec.accept import accept
from lookupspec.drafter import NGramDrafter
from lookupspec.greedy import greedy_accept
from lookupspec.model import KVCache, TinyLM


@dataclass(frozen=True)
class Generation:
    token_ids: tuple[int, ...]
    drafted_blocks: tuple[tuple[int, ...], ...]
    acceptance_lengths: tuple[int, ...]


def _pick(logits: torch.Tensor, temperature: float, generator: torch.Generator) -> int:
    if temperature == 0:
        return int(logits.argmax())
    return int(torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=generator))


class LookupEngine:
    def __init__(self, model: TinyLM, drafter: NGramDrafter, num_draft: int = 3) -> None:
        self.model = model
        self.drafter = drafter
        self.num_draft = num_draft

    def generate(self, prompt: list[int], max_new_tokens: int, temperature: float = 0.0, seed: int = 0) -> Generation:
        generator = torch.Generator().manual_seed(seed)
        tokens, out, blocks, lengths = list(prompt), [], [], []
        cache = KVCache()
        if len(tokens) > 1:  # prefill: every prompt token but the last, which the first verify step feeds
            self.model.forward(torch.tensor(tokens[:-1]), 0, cache)
        while len(out) < max_new_tokens:
            drafted, q = self.drafter.propose(tokens, self.num_draft, temperature, generator)
            start = len(tokens) - 1
            logits = self.model.forward(torch.tensor([tokens[-1], *drafted.tolist()]), start, cache)  # [k + 1, V]
            if temperature == 0:
                accepted = greedy_accept(logits.argmax(-1), drafted)
                token = int(logits[accepted].argmax())
            else:
                accepted, token = accept(torch.softmax(logits / temperature, -1), q, drafted, generator)
            cache.crop(len(tokens) + accepted)  # the committed tokens but the newest, which the next step feeds
            new = [*drafted[:accepted].tolist(), token]
            tokens += new
            out += new
            blocks.append(tuple(drafted.tolist()))
            lengths.append(accepted + 1)
        return Generation(tuple(out[:max_new_tokens]), tuple(blocks), tuple(lengths))


def plain_generate(
    model: TinyLM, prompt: list[int], max_new_tokens: int, temperature: float = 0.0, seed: int = 0
) -> list[int]:
    generator = torch.Generator().manual_seed(seed)
    tokens = list(prompt)
    for _ in range(max_new_tokens):
        logits = model.forward(torch.tensor(tokens), 0, KVCache())[-1]
        tokens.append(_pick(logits, temperature, generator))
    return tokens[len(prompt) :]


def score(model: TinyLM, prompts: list[list[int]]) -> list[torch.Tensor]:
    """Each prompt's logits [len, V], computed as one left-padded batch."""
    width = max(len(p) for p in prompts)
    pads = torch.tensor([width - len(p) for p in prompts])
    tokens = torch.tensor([[0] * (width - len(p)) + list(p) for p in prompts])
    logits = model.forward_batch(tokens, pads)
    return [logits[row, int(pads[row]) :] for row in range(len(prompts))]
