"""Helpers the DFlash2 tests share: the walk pair's spec, edited copies of a draft folder, and the record of one
request's decode that both our engine and the reference produce.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from safetensors.torch import load_file, save_file

from runner import Engine, GenerationOutput

WALK_PAIR = {"kind": "dflash2", "vocab_size": 6, "seed": 2}
CODEBOOK_SCALE = 4.0
CODEBOOKS = ("candidate_selector.predecessor_codebook", "candidate_selector.successor_codebook")

Pair = tuple[Path, Path]


@dataclass(frozen=True)
class Result:
    """One request's decode: generated ids, tokens committed per verify step, drafted block per verify step."""

    token_ids: tuple[int, ...]
    acceptance_lengths: tuple[int, ...]
    drafted_blocks: tuple[tuple[int, ...], ...]


def edit_draft(src: Path, dst: Path, dflash_config: dict[str, Any] | None = None, codebook_scale: float = 1.0) -> Path:
    """A copy of the draft folder `src` at `dst` with dflash_config entries changed and codebooks scaled."""
    shutil.copytree(src, dst, dirs_exist_ok=True)
    config = json.loads((dst / "config.json").read_text())
    config["dflash_config"] = {**config["dflash_config"], **(dflash_config or {})}
    (dst / "config.json").write_text(json.dumps(config))
    if codebook_scale != 1.0:
        weights = load_file(str(dst / "model.safetensors"))
        for name in CODEBOOKS:
            weights[name] = weights[name] * codebook_scale
        save_file(weights, str(dst / "model.safetensors"), metadata={"format": "pt"})
    return dst


def result_of(out: GenerationOutput, engine: Engine) -> Result:
    assert engine.trace is not None
    return Result(out.token_ids, out.acceptance_lengths, tuple(engine.trace.drafted_blocks(out.request_id)))
