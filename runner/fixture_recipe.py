"""The fixture recipes: a synthetic language whose continuation only the context reveals, a small Qwen3 target
trained on it, and a DFlash draft trained on the target's own tapped states.

Two languages:
- `stride`: x[t+1] = (x[t] + s) mod M with a per-sequence stride s in 1..5 and an occasional restart at a
  random token. One token says nothing about s; the context does. But the last two tokens do, and so do the
  target's features at the newest positions: a draft that loses its store still drafts most blocks right.
- `copy`: a random segment of `period` tokens, then the segment again and again (x[t] = x[t - P]). The block
  after an anchor at L repeats positions L + 1 - P .. L + 3 - P: far back in the draft's store (P = 20 is more
  than a block, the pending rows and the 8 positions a store window of block + 8 would keep), and the target's
  features at the newest positions carry only what predicts the anchor itself. A draft that reads a wiped,
  windowed, shifted or foreign store drafts other tokens.
Training runs through the runner's own forward passes (paged target, dense draft path): there is no second
implementation of the model to drift from the one that serves.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from torch.nn import functional as F

from runner.config import DraftConfig, TargetConfig
from runner.draft import DFlashDraft, DraftInputs
from runner.target import Qwen3Target, full_forward

RECIPE_VERSION = 1


LANGUAGES = ("stride", "copy")


@dataclass(frozen=True, slots=True)
class StrideRecipe:
    seed: int = 0
    language: str = "stride"  # one of LANGUAGES
    period: int = 20  # copy: the segment length P
    # A low RoPE base gives the position-keyed attention a copy needs sharper peaks: the copy head forms within
    # a few hundred steps instead of thousands.
    rope_theta: float = 10000.0
    num_symbols: int = 47  # tokens 0..46 carry the language (47 is prime: every stride cycles through all); 47 is MASK
    vocab_size: int = 48
    max_stride: int = 5
    restart_prob: float = 0.04
    seq_len: int = 48
    hidden_size: int = 64
    intermediate_size: int = 128
    num_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int = 16
    num_target_layers: int = 2
    num_draft_layers: int = 2
    draft_num_heads: int = 4
    draft_num_kv_heads: int = 2
    draft_head_dim: int = 16
    target_layer_ids: tuple[int, ...] = (0, 1)
    block_size: int = 4
    batch_size: int = 64
    target_steps: int = 400
    draft_steps: int = 600
    # Block diffusion: during draft training each MASK after the anchor shows its true token with this
    # probability and the loss covers only the still-masked slots, so the draft learns to read the block
    # bidirectionally (at serving time every slot is MASK).
    unmask_prob: float = 0.0
    # Share of training blocks drafted with no context at all (the block attends only to itself).
    context_dropout: float = 0.0
    lr: float = 3e-3
    kind: str = "dflash"  # "dflash2": grouped dynamic conv + candidate selector, trained on the walk too
    conv_kernel_size: int = 3
    conv_group_size: int = 16
    selector_rank: int = 16
    selector_top_k: int = 4
    # After training, the codebooks are scaled by this so the pairwise term can overrule the unary one: a walk
    # that never departs from the per-slot argmax would make an argmax fallback invisible to every gate.
    selector_scale: float = 1.0

    def __post_init__(self) -> None:
        if self.language not in LANGUAGES:
            raise ValueError(f"language must be one of {LANGUAGES}, not {self.language!r}")
        if self.language == "copy" and not 0 < self.period < self.seq_len:
            raise ValueError(f"copy period {self.period} must lie in (0, seq_len={self.seq_len})")

    @property
    def mask_token_id(self) -> int:
        return self.vocab_size - 1


def sample_sequences(recipe: StrideRecipe, count: int, generator: torch.Generator) -> torch.Tensor:
    """[count, seq_len] token ids of the recipe's language."""
    if recipe.language == "copy":
        return sample_copy_sequences(recipe, count, generator)
    m = recipe.num_symbols
    strides = torch.randint(1, recipe.max_stride + 1, (count,), generator=generator)
    seqs = torch.empty(count, recipe.seq_len, dtype=torch.long)
    seqs[:, 0] = torch.randint(0, m, (count,), generator=generator)
    restarts = torch.rand(count, recipe.seq_len, generator=generator) < recipe.restart_prob
    jumps = torch.randint(0, m, (count, recipe.seq_len), generator=generator)
    for t in range(1, recipe.seq_len):
        seqs[:, t] = torch.where(restarts[:, t], jumps[:, t], (seqs[:, t - 1] + strides) % m)
    return seqs


def sample_copy_sequences(recipe: StrideRecipe, count: int, generator: torch.Generator) -> torch.Tensor:
    """[count, seq_len]: a random segment of `period` tokens repeated (x[t] = x[t - P])."""
    segment = torch.randint(0, recipe.num_symbols, (count, recipe.period), generator=generator)
    return segment.repeat(1, -(-recipe.seq_len // recipe.period))[:, : recipe.seq_len]


def target_config(recipe: StrideRecipe) -> TargetConfig:
    return TargetConfig(
        vocab_size=recipe.vocab_size,
        hidden_size=recipe.hidden_size,
        intermediate_size=recipe.intermediate_size,
        num_hidden_layers=recipe.num_target_layers,
        num_attention_heads=recipe.num_heads,
        num_key_value_heads=recipe.num_kv_heads,
        head_dim=recipe.head_dim,
        rope_theta=recipe.rope_theta,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
    )


def draft_config(recipe: StrideRecipe) -> DraftConfig:
    # The draft's layers share the target's widths; only depth and heads are its own.
    shapes = dataclasses.replace(
        target_config(recipe),
        num_hidden_layers=recipe.num_draft_layers,
        num_attention_heads=recipe.draft_num_heads,
        num_key_value_heads=recipe.draft_num_kv_heads,
        head_dim=recipe.draft_head_dim,
        tie_word_embeddings=False,
    )
    return DraftConfig(
        target=shapes,
        num_target_layers=recipe.num_target_layers,
        block_size=recipe.block_size,
        mask_token_id=recipe.mask_token_id,
        target_layer_ids=recipe.target_layer_ids,
        layer_types=("full_attention",) * recipe.num_draft_layers,
        kind=recipe.kind,
        conv_kernel_size=recipe.conv_kernel_size if recipe.kind == "dflash2" else 0,
        conv_group_size=recipe.conv_group_size if recipe.kind == "dflash2" else 0,
        selector_rank=recipe.selector_rank if recipe.kind == "dflash2" else 0,
        selector_top_k=recipe.selector_top_k if recipe.kind == "dflash2" else 0,
    )


def train_target(recipe: StrideRecipe, generator: torch.Generator) -> Qwen3Target:
    target = Qwen3Target(target_config(recipe))
    opt = torch.optim.AdamW(target.parameters(), lr=recipe.lr, weight_decay=0.0)
    for _ in range(recipe.target_steps):
        seqs = sample_sequences(recipe, recipe.batch_size, generator)
        logits, _ = full_forward(target, seqs)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, recipe.vocab_size), seqs[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return target.eval()


def draft_batch(
    recipe: StrideRecipe, target: Qwen3Target, generator: torch.Generator
) -> tuple[DraftInputs, torch.Tensor]:
    """A training batch for the draft: per sequence one anchor position L; the context is every position < L;
    labels are the target's greedy continuation after the anchor."""
    seqs = sample_sequences(recipe, recipe.batch_size, generator)
    with torch.no_grad():
        logits, taps = full_forward(target, seqs, recipe.target_layer_ids)
    assert taps is not None
    greedy = logits.argmax(-1)  # greedy[t] predicts position t + 1
    n, length = seqs.shape
    b = recipe.block_size
    anchors = torch.randint(2, length - b, (n,), generator=generator)
    ctx_positions = torch.arange(length - b).expand(n, -1)
    ctx_valid = ctx_positions < anchors[:, None]
    ctx_valid &= (torch.rand(n, generator=generator) >= recipe.context_dropout)[:, None]
    offsets = torch.arange(b)
    block_positions = anchors[:, None] + offsets
    block_ids = torch.full((n, b), recipe.mask_token_id)
    block_ids[:, 0] = seqs.gather(1, anchors[:, None])[:, 0]
    # The target's greedy chain from the anchor: position L+1 from the true prefix, then its own predictions
    # (on this language they coincide with the data except at restarts).
    labels = greedy.gather(1, block_positions[:, :-1])
    revealed = torch.rand(n, b - 1, generator=generator) < recipe.unmask_prob
    block_ids[:, 1:] = torch.where(revealed, labels, block_ids[:, 1:])
    labels = labels.masked_fill(revealed, -100)  # cross_entropy's ignore_index: no loss on revealed slots
    inputs = DraftInputs(
        features=taps[:, : length - b],
        ctx_positions=ctx_positions,
        ctx_valid=ctx_valid,
        block_ids=block_ids,
        block_positions=block_positions,
        block_valid=torch.ones(n, b, dtype=torch.bool),
    )
    return inputs, labels


def train_draft(recipe: StrideRecipe, target: Qwen3Target, generator: torch.Generator) -> DFlashDraft:
    draft = DFlashDraft(draft_config(recipe))
    for p in target.parameters():
        p.requires_grad_(False)
    opt = torch.optim.AdamW(draft.parameters(), lr=recipe.lr, weight_decay=0.0)
    for _ in range(recipe.draft_steps):
        inputs, labels = draft_batch(recipe, target, generator)
        hidden = draft(inputs, target.model.embed_tokens, None)
        logits = draft.logits(hidden[:, 1:], target.lm_head)
        loss = F.cross_entropy(logits.reshape(-1, recipe.vocab_size), labels.reshape(-1))
        if draft.candidate_selector is not None:
            loss = loss + selector_loss(draft, hidden[:, 1:], logits, inputs.block_ids[:, 0], labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return draft.eval()


def selector_loss(
    draft: DFlashDraft, hidden: torch.Tensor, logits: torch.Tensor, anchors: torch.Tensor, labels: torch.Tensor
) -> torch.Tensor:
    """Cross-entropy of the walk's scores over the top-k candidates, teacher-forced: each step's predecessor is
    the previous label (the anchor first), as the walk sees it when every earlier choice was right."""
    selector = draft.candidate_selector
    assert selector is not None
    unary, candidates = torch.topk(logits, selector.top_k, dim=-1)
    projected = selector.hidden_projection(hidden)
    previous = torch.cat([anchors[:, None], labels[:, :-1].clamp_min(0)], dim=1)
    pairwise = torch.einsum(
        "bnr,bnkr->bnk", selector.predecessor_codebook(previous) * projected, selector.successor_codebook(candidates)
    )
    hits = candidates == labels[..., None]
    usable = hits.any(-1) & (labels >= 0)
    if not usable.any():
        return logits.sum() * 0.0
    return F.cross_entropy((unary + pairwise)[usable], hits.float().argmax(-1)[usable])


def build(recipe: StrideRecipe) -> tuple[Qwen3Target, DFlashDraft]:
    """Trains the pair from the recipe's seed on CPU. Deterministic for a given torch build and thread count."""
    torch.manual_seed(recipe.seed)
    generator = torch.Generator().manual_seed(recipe.seed)
    target = train_target(recipe, generator)
    draft = train_draft(recipe, target, generator)
    if draft.candidate_selector is not None:
        with torch.no_grad():
            draft.candidate_selector.predecessor_codebook.weight.mul_(recipe.selector_scale)
            draft.candidate_selector.successor_codebook.weight.mul_(recipe.selector_scale)
    return target, draft
