"""Loading DFlash2 checkpoints: the reference's conventions load (the two codebooks stored without `.weight`, as
`DFlash2DraftModel.from_pretrained`'s key_mapping expects and its `save_pretrained` writes), every loaded tensor
is the file's, and a DFlash2 config that lacks a convolution or selector setting is refused with CheckpointError
before any model is built.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from dflash2kit import CODEBOOKS, edit_draft, result_of
from safetensors.torch import load_file, save_file

from runner import CheckpointError, Engine, EngineConfig, SamplingParams
from runner.checkpoint import read_weights

DFLASH2_KEYS = ("conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k")


def test_reference_convention_folder_loads_every_tensor(walk_pair, reference_models) -> None:
    target_dir, draft_dir = walk_pair
    stored = load_file(str(draft_dir / "model.safetensors"))
    assert set(CODEBOOKS) <= set(stored), "the fixture must use the reference's codebook names"
    assert not any(f"{name}.weight" in stored for name in CODEBOOKS)

    engine = Engine.from_pretrained(target_dir, draft_dir)
    assert engine.draft is not None and engine.draft.candidate_selector is not None
    ours = dict(engine.draft.state_dict())
    for name, tensor in stored.items():
        key = f"{name}.weight" if name in CODEBOOKS else name
        assert torch.equal(ours[key], tensor), name

    _, reference_draft = reference_models(walk_pair)
    for name in CODEBOOKS:
        assert torch.equal(reference_draft.get_parameter(f"{name}.weight"), stored[name]), name


@pytest.mark.reference
def test_folder_saved_by_the_reference_loads_and_drafts_alike(make_pair, reference, reference_decode, tmp_path) -> None:
    """The reference loads a pair, changes its codebooks, saves with save_pretrained; we decode it alike."""
    target_dir, draft_dir = make_pair(kind="dflash2", vocab_size=6, seed=2)
    draft = reference.DFlash2DraftModel.from_pretrained(draft_dir, dtype=torch.float32)
    with torch.no_grad():
        for name in CODEBOOKS:
            draft.get_parameter(f"{name}.weight").mul_(4.0)
    draft.save_pretrained(tmp_path / "saved")
    saved = tmp_path / "saved"
    assert set(CODEBOOKS) <= set(read_weights(saved))

    engine = Engine.from_pretrained(target_dir, saved, config=EngineConfig(block_size=4, trace=True))
    for prompt in [(1, 2, 3, 4, 5), (3, 2, 4)]:
        (out,) = engine.generate([list(prompt)], SamplingParams(max_tokens=12))
        assert result_of(out, engine) == reference_decode((target_dir, saved), prompt, 12, (), 4), prompt


def without(draft_dir, dst, key: str):
    """A copy of the draft folder whose config.json lacks `key` (in dflash_config and at the top level)."""
    shutil.copytree(draft_dir, dst)
    config = json.loads((dst / "config.json").read_text())
    config["dflash_config"].pop(key)
    config.pop(key, None)
    (dst / "config.json").write_text(json.dumps(config))
    return dst


@pytest.mark.parametrize("key", DFLASH2_KEYS)
def test_a_missing_dflash2_setting_is_refused(walk_pair, tmp_path, key: str) -> None:
    target_dir, draft_dir = walk_pair
    with pytest.raises(CheckpointError, match=key):
        Engine.from_pretrained(target_dir, without(draft_dir, tmp_path / "draft", key))


@pytest.mark.parametrize("key", DFLASH2_KEYS)
def test_a_zero_dflash2_setting_is_refused(walk_pair, tmp_path, key: str) -> None:
    target_dir, draft_dir = walk_pair
    with pytest.raises(CheckpointError, match=key):
        Engine.from_pretrained(target_dir, edit_draft(draft_dir, tmp_path / "draft", {key: 0}))


@pytest.mark.parametrize("name", CODEBOOKS)
def test_a_missing_codebook_is_refused(walk_pair, tmp_path, name: str) -> None:
    target_dir, draft_dir = walk_pair
    broken = shutil.copytree(draft_dir, tmp_path / "draft")
    weights = load_file(str(broken / "model.safetensors"))
    del weights[name]
    save_file(weights, str(broken / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match="codebook"):
        Engine.from_pretrained(target_dir, broken)


def test_a_selector_top_k_above_the_vocab_is_refused(walk_pair, tmp_path) -> None:
    target_dir, draft_dir = walk_pair
    with pytest.raises(CheckpointError, match="selector_top_k"):
        engine = Engine.from_pretrained(target_dir, edit_draft(draft_dir, tmp_path / "draft", {"selector_top_k": 7}))
        engine.generate([[1, 2, 3]], SamplingParams(max_tokens=4))
