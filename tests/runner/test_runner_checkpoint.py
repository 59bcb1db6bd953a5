"""Checkpoint round trips: save then load gives bit-identical weights (tied heads, DFlash2 codebook names,
sharded folders); the upstream classes read our folders as the same weights; bfloat16 loads and generates;
and on CUDA, greedy speculative decoding equals plain decoding.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file

from runner import Engine, EngineConfig, SamplingParams
from runner.checkpoint import INDEX_NAME, WEIGHTS_NAME
from runner.loader import load_draft, load_target, save_draft, save_target
from verify.fixtures.synthetic import PairSpec, build_pair

CPU = torch.device("cpu")
SPECS = {
    "dflash": PairSpec(seed=3),
    "dflash-tied": PairSpec(seed=3, tie_word_embeddings=True),
    "dflash2": PairSpec(seed=3, kind="dflash2"),
}


def assert_same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].dtype == b[name].dtype and torch.equal(a[name], b[name]), name


@pytest.mark.parametrize("name", list(SPECS))
def test_save_then_load_gives_identical_weights(tmp_path: Path, name: str) -> None:
    target, draft = build_pair(SPECS[name])
    target_dir, draft_dir = save_target(target, tmp_path / "target"), save_draft(draft, tmp_path / "draft")
    loaded_target = load_target(target_dir, CPU, torch.float32)
    loaded_draft = load_draft(draft_dir, loaded_target.config, CPU, torch.float32)
    assert loaded_target.config == target.config and loaded_draft.config == draft.config
    assert_same_weights(loaded_target.state_dict(), target.state_dict())
    assert_same_weights(loaded_draft.state_dict(), draft.state_dict())
    if target.config.tie_word_embeddings:
        assert "lm_head.weight" not in load_file(str(target_dir / WEIGHTS_NAME))
        assert loaded_target.lm_head.weight.data_ptr() == loaded_target.model.embed_tokens.weight.data_ptr()

    # Saving what was loaded writes the same files.
    again_target = save_target(loaded_target, tmp_path / "again-target")
    again_draft = save_draft(loaded_draft, tmp_path / "again-draft")
    for first, second in ((target_dir, again_target), (draft_dir, again_draft)):
        assert json.loads((first / "config.json").read_text()) == json.loads((second / "config.json").read_text())
        assert_same_weights(load_file(str(first / WEIGHTS_NAME)), load_file(str(second / WEIGHTS_NAME)))


def test_sharded_folder_loads_the_same_weights(tmp_path: Path, make_pair) -> None:
    target_dir, _ = make_pair()
    weights = load_file(str(target_dir / WEIGHTS_NAME))
    names = sorted(weights)
    shards = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    sharded = tmp_path / "sharded"
    sharded.mkdir()
    (sharded / "config.json").write_text((target_dir / "config.json").read_text())
    for file, shard_names in shards.items():
        save_file({n: weights[n] for n in shard_names}, str(sharded / file))
    weight_map = {n: file for file, shard_names in shards.items() for n in shard_names}
    (sharded / INDEX_NAME).write_text(json.dumps({"weight_map": weight_map}))
    assert_same_weights(
        load_target(sharded, CPU, torch.float32).state_dict(), load_target(target_dir, CPU, torch.float32).state_dict()
    )


@pytest.mark.reference
@pytest.mark.parametrize("kind", ["dflash", "dflash2"])
def test_upstream_classes_read_the_same_weights(reference, make_pair, kind: str) -> None:
    target_dir, draft_dir = make_pair(kind=kind)
    ours_target = load_target(target_dir, CPU, torch.float32)
    ours_draft = load_draft(draft_dir, ours_target.config, CPU, torch.float32)
    hf = transformers.Qwen3ForCausalLM.from_pretrained(target_dir, dtype=torch.float32)
    cls = reference.DFlash2DraftModel if kind == "dflash2" else reference.DFlashDraftModel
    upstream = cls.from_pretrained(draft_dir, dtype=torch.float32)
    hf_weights = {n: t for n, t in hf.state_dict().items() if not n.endswith("inv_freq")}
    assert_same_weights(dict(ours_target.state_dict()), hf_weights)
    upstream_weights = {n: t for n, t in upstream.state_dict().items() if not n.endswith("inv_freq")}
    assert_same_weights(ours_draft.state_dict(), upstream_weights)


def test_bfloat16_loads_and_generates(make_agreeing_pair) -> None:
    target_dir, draft_dir = make_agreeing_pair()
    engine = Engine.from_pretrained(target_dir, draft_dir, dtype="bfloat16", config=EngineConfig(page_size=4))
    assert {p.dtype for p in engine.target.parameters()} == {torch.bfloat16}
    assert engine.draft is not None and {p.dtype for p in engine.draft.parameters()} == {torch.bfloat16}
    assert engine.target_cache.k.dtype == torch.bfloat16
    prompts = [[1, 2, 3, 4, 5], [0, 3]]
    outs = engine.generate(prompts, SamplingParams(max_tokens=10))
    for out in outs:
        assert len(out.token_ids) == 10 and all(0 <= t < 8 for t in out.token_ids)
        assert sum(out.acceptance_lengths) + 1 == 10
    fp32 = Engine.from_pretrained(target_dir, draft_dir).generate(prompts, SamplingParams(max_tokens=10))
    # bfloat16 rounding may flip a late argmax; the first token of a peaked random model does not move.
    assert [o.token_ids[:1] for o in outs] == [o.token_ids[:1] for o in fp32]


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["dflash", "dflash2"])
def test_greedy_speculative_equals_plain_on_cuda(make_agreeing_pair, kind: str) -> None:
    target_dir, draft_dir = make_agreeing_pair(kind=kind)
    prompts = [[1, 2, 3, 4, 5], [0, 3], [3, 2, 4], [4]]
    params = SamplingParams(max_tokens=16)
    config = EngineConfig(page_size=4, block_size=4)
    plain = Engine.from_pretrained(target_dir, device="cuda", config=config).generate(prompts, params)
    speculative = Engine.from_pretrained(target_dir, draft_dir, device="cuda", config=config).generate(prompts, params)
    assert [o.token_ids for o in speculative] == [o.token_ids for o in plain]
    assert max(n for o in speculative for n in o.acceptance_lengths) >= 2
