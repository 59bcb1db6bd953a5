"""Gate: checkpoints load as written, and a broken or misfit checkpoint is refused by name before any state
is built. Works on private copies of the shipped fixture; the fixture itself is never modified.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import torch
from gatekit import FIXTURE, assert_refused, greedy, make_engine
from safetensors.torch import load_file, save_file

from runner import CheckpointError, ConfigMismatchError, Engine
from runner.config import DraftConfig
from runner.loader import load_draft, load_target, save_draft, save_target

pytestmark = pytest.mark.gate


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURE, tmp_path / "fx")
    return tmp_path / "fx"


def test_round_trip_is_exact(tmp_path: Path, prompts: list[list[int]]) -> None:
    cpu = torch.device("cpu")
    target = load_target(FIXTURE / "target", cpu, torch.float32)
    draft = load_draft(FIXTURE / "draft", target.config, cpu, torch.float32)
    save_target(target, tmp_path / "t")
    save_draft(draft, tmp_path / "d")
    for name in ("target", "draft"):
        original = load_file(str(FIXTURE / name / "model.safetensors"))
        saved = load_file(str(tmp_path / name[0] / "model.safetensors"))
        assert original.keys() == saved.keys()
        assert all(torch.equal(original[k], saved[k]) for k in original)
    a = Engine.from_pretrained(tmp_path / "t", tmp_path / "d").generate(prompts[:2], greedy())
    b = make_engine().generate(prompts[:2], greedy())
    assert [o.token_ids for o in a] == [o.token_ids for o in b]
    assert [o.acceptance_lengths for o in a] == [o.acceptance_lengths for o in b]


@pytest.mark.parametrize("is_causal", [True, False, None])
@pytest.mark.parametrize("sliding_window", [None, 2])
def test_draft_config_survives_its_own_json(is_causal: bool | None, sliding_window: int | None) -> None:
    # The shipped draft sets neither flag, so a checkpoint written with an explicit mask choice is the only
    # place an inverted or dropped `is_causal` / `sliding_window` would show: it would load as another model.
    shipped = DraftConfig.from_dict(json.loads((FIXTURE / "draft" / "config.json").read_text()))
    config = dataclasses.replace(shipped, is_causal=is_causal, sliding_window=sliding_window)
    written = json.loads(json.dumps(config.to_dict()))
    assert written.get("is_causal") == is_causal
    assert DraftConfig.from_dict(written) == config


def _edit_config(folder: Path, **changes: object) -> None:
    path = folder / "config.json"
    cfg = json.loads(path.read_text())
    cfg.update(changes)
    path.write_text(json.dumps(cfg))


def test_wrong_shape_is_refused(copy: Path) -> None:
    weights = load_file(str(copy / "draft" / "model.safetensors"))
    weights["fc.weight"] = weights["fc.weight"][:, :-1].contiguous()
    save_file(weights, str(copy / "draft" / "model.safetensors"))
    assert_refused(
        CheckpointError, "fc.weight has shape", lambda: Engine.from_pretrained(copy / "target", copy / "draft")
    )


def test_missing_tensor_is_refused(copy: Path) -> None:
    weights = load_file(str(copy / "target" / "model.safetensors"))
    del weights["model.layers.0.self_attn.k_norm.weight"]
    save_file(weights, str(copy / "target" / "model.safetensors"))
    assert_refused(CheckpointError, "missing weights", lambda: Engine.from_pretrained(copy / "target"))


def test_draft_for_another_target_is_refused(copy: Path) -> None:
    cfg = json.loads((copy / "draft" / "config.json").read_text())
    cfg["dflash_config"]["target_layer_ids"] = [0, 7]
    (copy / "draft" / "config.json").write_text(json.dumps(cfg))
    assert_refused(
        ConfigMismatchError, "target_layer_ids", lambda: Engine.from_pretrained(copy / "target", copy / "draft")
    )


def test_malformed_config_is_refused(copy: Path) -> None:
    (copy / "target" / "config.json").write_text("{not json")
    assert_refused(CheckpointError, "not valid JSON", lambda: Engine.from_pretrained(copy / "target"))


@pytest.mark.parametrize(
    ("key", "value"),
    [("hidden_size", "64"), ("num_hidden_layers", 2.0), ("vocab_size", True)],
    ids=["string-for-int", "float-for-int", "bool-for-int"],
)
def test_wrong_typed_config_value_is_refused_by_name(copy: Path, key: str, value: object) -> None:
    """A value of the wrong JSON type is refused, naming the key and the file, never converted (int("64"),
    int(2.0) and int(True) would load a model the file does not describe, or fail later unnamed)."""
    _edit_config(copy / "target", **{key: value})
    load = lambda: Engine.from_pretrained(copy / "target")  # noqa: E731
    assert_refused(CheckpointError, rf"config\.json: config key '{key}' must be an integer", load)


def test_non_finite_weight_is_refused(copy: Path) -> None:
    weights = load_file(str(copy / "target" / "model.safetensors"))
    weights["model.norm.weight"][3] = float("nan")
    save_file(weights, str(copy / "target" / "model.safetensors"))
    load = lambda: Engine.from_pretrained(copy / "target")  # noqa: E731
    assert_refused(CheckpointError, "model.norm.weight holds non-finite values", load)
