"""Builds the target and draft modules from HF folders and checks that they fit together.

Everything is validated before a module is returned: a bad folder or a misfit draft raises a named error.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from runner.checkpoint import (
    CONFIG_NAME,
    GENERATION_CONFIG_NAME,
    check_weights,
    read_config,
    read_weights,
    write_folder,
)
from runner.config import DraftConfig, TargetConfig
from runner.config_read import ConfigReader
from runner.draft import DFlashDraft
from runner.errors import CheckpointError, ConfigMismatchError
from runner.target import Qwen3Target

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def resolve_dtype(name: str) -> torch.dtype:
    if name not in DTYPES:
        raise CheckpointError(f"dtype {name!r} is not supported; use one of {sorted(DTYPES)}")
    return DTYPES[name]


def load_target(folder: str | Path, device: torch.device, dtype: torch.dtype) -> Qwen3Target:
    cfg = TargetConfig.from_dict(read_config(folder), where=str(Path(folder) / CONFIG_NAME))
    # As transformers does: generation_config.json's eos ids, when present, are the ones generation stops at.
    generation = read_config(folder, GENERATION_CONFIG_NAME, required=False)
    if generation.get("eos_token_id") is not None:
        read = ConfigReader(generation, str(Path(folder) / GENERATION_CONFIG_NAME))
        cfg = dataclasses.replace(cfg, eos_token_ids=read.integers("eos_token_id"))
    weights = read_weights(folder)
    if cfg.tie_word_embeddings:
        weights.pop("lm_head.weight", None)  # some tied checkpoints store the copy anyway
    # Built before the check, on the CPU: its own state_dict says what the checkpoint must hold. (Shapes from a
    # meta-device model would cost every process a ~1.5 s import of torch._dynamo, for nothing.)
    model = Qwen3Target(cfg)
    check_weights(weights, model.expected_shapes(), str(folder))
    model.load_weights(weights)
    return model.to(device=device, dtype=dtype).eval()


def load_draft(folder: str | Path, target: TargetConfig, device: torch.device, dtype: torch.dtype) -> DFlashDraft:
    cfg = DraftConfig.from_dict(read_config(folder), where=str(Path(folder) / CONFIG_NAME))
    check_fit(cfg, target, str(folder))
    weights = DFlashDraft.rename_weights(read_weights(folder))
    draft = DFlashDraft(cfg)
    check_weights(weights, draft.expected_shapes(), str(folder))
    draft.load_state_dict(weights, strict=True)
    return draft.to(device=device, dtype=dtype).eval()


def check_fit(draft: DraftConfig, target: TargetConfig, where: str) -> None:
    """The draft reuses the target's embedding and head and reads its layers' outputs: shapes must agree."""
    if draft.target.hidden_size != target.hidden_size:
        raise ConfigMismatchError(
            f"{where}: draft hidden_size {draft.target.hidden_size} != target hidden_size {target.hidden_size}"
        )
    if draft.target.vocab_size != target.vocab_size:
        raise ConfigMismatchError(
            f"{where}: draft vocab_size {draft.target.vocab_size} != target vocab_size {target.vocab_size}"
        )
    bad = [i for i in draft.target_layer_ids if not 0 <= i < target.num_hidden_layers]
    if bad:
        raise ConfigMismatchError(
            f"{where}: target_layer_ids {bad} do not exist in a {target.num_hidden_layers}-layer target"
        )
    if draft.num_target_layers != target.num_hidden_layers:
        raise ConfigMismatchError(
            f"{where}: draft was built for a {draft.num_target_layers}-layer target; this one has "
            f"{target.num_hidden_layers}"
        )


def save_target(model: Qwen3Target, folder: str | Path) -> Path:
    weights = dict(model.state_dict())
    if model.config.tie_word_embeddings:
        weights.pop("lm_head.weight")
    return write_folder(folder, model.config.to_dict(), weights)


def save_draft(model: DFlashDraft, folder: str | Path) -> Path:
    inverse = {
        f"candidate_selector.{n}.weight": f"candidate_selector.{n}"
        for n in ("predecessor_codebook", "successor_codebook")
    }
    weights = {inverse.get(name, name): t for name, t in model.state_dict().items()}
    return write_folder(folder, model.config.to_dict(), weights)
