"""Small random-initialised target + draft pairs written as HF folders, for tests and benchmarks.

Deterministic in the seed. Weights are drawn wider than PyTorch's default init so that logits are peaked
enough for greedy ties to be impossible in practice.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import torch

from runner.config import DraftConfig, TargetConfig
from runner.draft import DFlashDraft
from runner.loader import save_draft, save_target
from runner.target import Qwen3Target


@dataclass(frozen=True, slots=True)
class PairSpec:
    vocab_size: int = 64
    hidden_size: int = 64
    intermediate_size: int = 128
    num_target_layers: int = 4
    num_draft_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 16
    block_size: int = 4
    target_layer_ids: tuple[int, ...] = (1, 2)
    kind: str = "dflash"
    tie_word_embeddings: bool = False
    max_position_embeddings: int = 512
    seed: int = 0
    init_std: float = 0.1


def target_config(spec: PairSpec) -> TargetConfig:
    return TargetConfig(
        vocab_size=spec.vocab_size,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_target_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        head_dim=spec.head_dim,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=spec.tie_word_embeddings,
    )


def draft_config(spec: PairSpec) -> DraftConfig:
    shapes = dataclasses.replace(
        target_config(spec), num_hidden_layers=spec.num_draft_layers, tie_word_embeddings=False
    )
    dflash2 = spec.kind == "dflash2"
    return DraftConfig(
        target=shapes,
        num_target_layers=spec.num_target_layers,
        block_size=spec.block_size,
        mask_token_id=spec.vocab_size - 1,
        target_layer_ids=spec.target_layer_ids,
        layer_types=("full_attention",) * spec.num_draft_layers,
        kind=spec.kind,
        conv_kernel_size=3 if dflash2 else 0,
        conv_group_size=16 if dflash2 else 0,
        selector_rank=8 if dflash2 else 0,
        selector_top_k=4 if dflash2 else 0,
    )


def _randomise(module: torch.nn.Module, generator: torch.Generator, std: float) -> None:
    with torch.no_grad():
        for name, param in module.named_parameters():
            if name.endswith("norm.weight"):
                param.copy_(1.0 + 0.1 * torch.randn(param.shape, generator=generator))
            else:
                param.copy_(std * torch.randn(param.shape, generator=generator))


def build_pair(spec: PairSpec) -> tuple[Qwen3Target, DFlashDraft]:
    generator = torch.Generator().manual_seed(spec.seed)
    target = Qwen3Target(target_config(spec))
    _randomise(target, generator, spec.init_std)
    draft = DFlashDraft(draft_config(spec))
    _randomise(draft, generator, spec.init_std)
    return target.eval(), draft.eval()


def write_pair(folder: str | Path, spec: PairSpec) -> tuple[Path, Path]:
    """Writes `target/` and `draft/` HF folders under `folder`."""
    target, draft = build_pair(spec)
    root = Path(folder)
    return save_target(target, root / "target"), save_draft(draft, root / "draft")
