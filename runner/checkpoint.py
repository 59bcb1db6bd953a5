"""HF-format checkpoint folders: `config.json` plus `model.safetensors` (or a sharded index). No pickle, ever.

It knows files and tensors; it does not know what the tensors mean (the model modules map names).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from runner.errors import CheckpointError

CONFIG_NAME = "config.json"
GENERATION_CONFIG_NAME = "generation_config.json"
WEIGHTS_NAME = "model.safetensors"
INDEX_NAME = "model.safetensors.index.json"


# Stored weights may be in any floating dtype the loader can convert exactly enough; integer or quantized
# tensors would load as garbage numbers.
WEIGHT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def read_config(folder: str | Path, name: str = CONFIG_NAME, required: bool = True) -> dict[str, Any]:
    """The folder's `config.json` (or another JSON file of it; an absent optional one reads as {})."""
    path = Path(folder)
    if not path.is_dir():
        raise CheckpointError(f"checkpoint folder {str(path)!r} does not exist")
    config_path = path / name
    if not config_path.is_file():
        if not required:
            return {}
        raise CheckpointError(f"{path}: no {name}")
    try:
        raw = json.loads(config_path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{config_path}: not valid JSON ({exc})") from exc
    if not isinstance(raw, dict):
        raise CheckpointError(f"{config_path}: expected a JSON object")
    return raw


def read_weights(folder: str | Path) -> dict[str, torch.Tensor]:
    """All tensors of the folder on CPU, in their stored dtype."""
    path = Path(folder)
    files: list[Path]
    if (path / WEIGHTS_NAME).is_file():
        files = [path / WEIGHTS_NAME]
    elif (path / INDEX_NAME).is_file():
        try:
            index = json.loads((path / INDEX_NAME).read_text())
            files = sorted({path / name for name in index["weight_map"].values()})
        except (OSError, KeyError, TypeError, json.JSONDecodeError) as exc:
            raise CheckpointError(f"{path / INDEX_NAME}: malformed index ({exc})") from exc
    else:
        raise CheckpointError(f"{path}: no {WEIGHTS_NAME} or {INDEX_NAME} (pickle checkpoints are not loaded)")
    weights: dict[str, torch.Tensor] = {}
    for file in files:
        try:
            weights.update(load_file(str(file)))
        except (OSError, SafetensorError) as exc:
            raise CheckpointError(f"{file}: unreadable safetensors file ({exc})") from exc
    return weights


def write_folder(folder: str | Path, config: dict[str, Any], weights: dict[str, torch.Tensor]) -> Path:
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    tensors = {name: t.detach().contiguous().cpu() for name, t in weights.items()}
    save_file(tensors, str(path / WEIGHTS_NAME), metadata={"format": "pt"})
    (path / CONFIG_NAME).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    return path


def check_weights(weights: dict[str, torch.Tensor], expected: dict[str, tuple[int, ...]], where: str) -> None:
    """Every expected tensor present with its shape, a floating dtype and finite values; nothing unexpected.

    Raises before any model state changes.
    """
    missing = sorted(set(expected) - set(weights))
    if missing:
        raise CheckpointError(f"{where}: missing weights {missing[:5]}{' ...' if len(missing) > 5 else ''}")
    unexpected = sorted(set(weights) - set(expected))
    if unexpected:
        raise CheckpointError(f"{where}: unexpected weights {unexpected[:5]}{' ...' if len(unexpected) > 5 else ''}")
    for name, shape in expected.items():
        if tuple(weights[name].shape) != shape:
            raise CheckpointError(f"{where}: {name} has shape {tuple(weights[name].shape)}, config says {shape}")
    for name, tensor in weights.items():
        if tensor.dtype not in WEIGHT_DTYPES:
            raise CheckpointError(f"{where}: {name} is stored as {tensor.dtype}; expected a floating dtype")
        # A NaN or inf weight poisons every logit it reaches; refuse it here rather than decode garbage.
        if not bool(torch.isfinite(tensor).all()):
            raise CheckpointError(f"{where}: {name} holds non-finite values (NaN or inf)")
