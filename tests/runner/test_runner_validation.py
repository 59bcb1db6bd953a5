"""Bad input gets a clear named error, and a refused call changes nothing: a broken checkpoint folder, a draft
that does not fit its target, a malformed request, bad sampling or engine settings, a KV cache too small.
After every refusal the engine generates exactly what a fresh engine generates (same ids, same request ids).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file

from runner import (
    CacheCapacityError,
    CheckpointError,
    ConfigMismatchError,
    Engine,
    EngineConfig,
    InvalidRequestError,
    RunnerError,
    SamplingParams,
    UnsupportedConfigError,
)

WEIGHTS = "model.safetensors"
GOOD_PROMPTS = [[1, 2, 3], [5, 4]]
GOOD_PARAMS = SamplingParams(max_tokens=6)


def edit_config(**changes: Any) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        config = json.loads((folder / "config.json").read_text())
        for key, value in changes.items():
            if value is None:
                config.pop(key, None)
            elif isinstance(value, dict):
                config[key] = {**config.get(key, {}), **value}
            else:
                config[key] = value
        (folder / "config.json").write_text(json.dumps(config))

    return edit


def edit_weights(change: Callable[[dict[str, torch.Tensor]], None]) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        weights = load_file(str(folder / WEIGHTS))
        change(weights)
        save_file(weights, str(folder / WEIGHTS))

    return edit


def write_text(name: str, text: str) -> Callable[[Path], None]:
    return lambda folder: (folder / name).write_text(text)


def remove(name: str) -> Callable[[Path], None]:
    return lambda folder: (folder / name).unlink()


def _wrong_shape(weights: dict[str, torch.Tensor]) -> None:
    weights["model.layers.0.mlp.up_proj.weight"] = torch.zeros(8, 8)


def _poison(value: float) -> Callable[[dict[str, torch.Tensor]], None]:
    def poison(weights: dict[str, torch.Tensor]) -> None:
        weights["model.norm.weight"][1] = value

    return poison


def _as_int(weights: dict[str, torch.Tensor]) -> None:
    name = "model.layers.0.mlp.up_proj.weight"
    weights[name] = weights[name].to(torch.int32)


# Edits of a copy of the target folder, and the error each must raise.
BAD_TARGETS: dict[str, tuple[Callable[[Path], None], type[RunnerError], str]] = {
    "no-config": (remove("config.json"), CheckpointError, "config.json"),
    "config-not-json": (write_text("config.json", "{not json"), CheckpointError, "JSON"),
    "config-a-list": (write_text("config.json", "[1, 2]"), CheckpointError, "object"),
    "config-lacks-hidden-size": (edit_config(hidden_size=None), CheckpointError, "hidden_size"),
    "zero-layers": (edit_config(num_hidden_layers=0), CheckpointError, "num_hidden_layers"),
    "heads-not-multiple-of-kv": (edit_config(num_key_value_heads=3), CheckpointError, "num_key_value_heads"),
    "rope-yarn": (edit_config(rope_parameters={"rope_type": "yarn"}), UnsupportedConfigError, "yarn"),
    "legacy-rope-scaling-beside-default": (
        edit_config(rope_scaling={"rope_type": "yarn", "factor": 4.0}),
        UnsupportedConfigError,
        "yarn",
    ),
    "gelu": (edit_config(hidden_act="gelu"), UnsupportedConfigError, "gelu"),
    "sliding-window-target": (edit_config(use_sliding_window=True), UnsupportedConfigError, "sliding"),
    "no-weights": (remove(WEIGHTS), CheckpointError, WEIGHTS),
    "garbage-weights": (write_text(WEIGHTS, "not a safetensors file"), CheckpointError, "safetensors"),
    "wrong-shape": (edit_weights(_wrong_shape), CheckpointError, "up_proj"),
    "missing-tensor": (edit_weights(lambda w: w.pop("model.norm.weight")), CheckpointError, "model.norm.weight"),
    "unexpected-tensor": (edit_weights(lambda w: w.update(extra=torch.zeros(1))), CheckpointError, "extra"),
    "nan-weight": (edit_weights(_poison(float("nan"))), CheckpointError, "norm.weight holds non-finite"),
    "inf-weight": (edit_weights(_poison(float("inf"))), CheckpointError, "norm.weight holds non-finite"),
    "int-weights": (edit_weights(_as_int), CheckpointError, "up_proj.weight is stored as torch.int32"),
    "hidden-size-a-string": (edit_config(hidden_size="64"), CheckpointError, "config.json: config key 'hidden_size'"),
    "layers-a-float": (edit_config(num_hidden_layers=2.0), CheckpointError, "'num_hidden_layers' must be an integer"),
    "vocab-a-bool": (edit_config(vocab_size=True), CheckpointError, "'vocab_size' must be an integer"),
    "eps-a-string": (edit_config(rms_norm_eps="1e-6"), CheckpointError, "'rms_norm_eps' must be a positive"),
    "eps-negative": (edit_config(rms_norm_eps=-1.0), CheckpointError, "'rms_norm_eps' must be a positive"),
    "theta-nan": (edit_config(rope_parameters={"rope_theta": float("nan")}), CheckpointError, "rope_theta' must be"),
    "tie-a-string": (edit_config(tie_word_embeddings="yes"), CheckpointError, "'tie_word_embeddings' must be true"),
    "act-a-number": (edit_config(hidden_act=3), CheckpointError, "'hidden_act' must be a string"),
    "rope-params-a-list": (edit_config(rope_parameters=[1]), CheckpointError, "'rope_parameters' must be an object"),
}

BAD_DRAFTS: dict[str, tuple[Callable[[Path], None], type[RunnerError], str]] = {
    "no-config": (remove("config.json"), CheckpointError, "config.json"),
    "not-a-dflash-draft": (edit_config(num_target_layers=None), CheckpointError, "num_target_layers"),
    "no-mask-token": (edit_config(dflash_config={"mask_token_id": None}), CheckpointError, "mask_token_id"),
    "tap-beyond-target": (edit_config(dflash_config={"target_layer_ids": [1, 4]}), ConfigMismatchError, "[4]"),
    "negative-tap": (edit_config(dflash_config={"target_layer_ids": [-1, 2]}), ConfigMismatchError, "[-1]"),
    "built-for-6-layers": (edit_config(num_target_layers=6), ConfigMismatchError, "6-layer"),
    "no-weights": (remove(WEIGHTS), CheckpointError, WEIGHTS),
    "missing-tensor": (edit_weights(lambda w: w.pop("fc.weight")), CheckpointError, "fc.weight"),
    "nan-weight": (edit_weights(lambda w: w["fc.weight"].fill_(float("nan"))), CheckpointError, "fc.weight holds"),
    "block-size-a-string": (
        edit_config(dflash_config={"block_size": "4"}),
        CheckpointError,
        "dflash_config.block_size",
    ),
    "mask-token-a-float": (edit_config(dflash_config={"mask_token_id": 3.0}), CheckpointError, "mask_token_id"),
    "tap-a-string": (edit_config(dflash_config={"target_layer_ids": ["1", 2]}), CheckpointError, "target_layer_ids"),
    "is-causal-a-string": (edit_config(is_causal="no"), CheckpointError, "'is_causal' must be true or false"),
    "window-zero": (edit_config(sliding_window=0), CheckpointError, "'sliding_window' must be an integer >= 1"),
    "multiplier-inf": (edit_config(dflash_config={"output_multiplier": float("inf")}), CheckpointError, "multiplier"),
    "layer-types-a-string": (edit_config(layer_types="full_attention"), CheckpointError, "'layer_types' must be"),
}


@pytest.fixture(scope="module")
def expected(make_pair) -> list[tuple[int, tuple[int, ...]]]:
    """What a fresh engine's first generate returns: (request_id, token_ids) per good prompt."""
    engine = Engine.from_pretrained(*make_pair())
    return [(o.request_id, o.token_ids) for o in engine.generate(GOOD_PROMPTS, GOOD_PARAMS)]


def assert_untouched(engine: Engine, expected: list[tuple[int, tuple[int, ...]]]) -> None:
    assert not engine.has_unfinished()
    assert engine.rows.num_rows == 0
    for pool in (engine.scheduler.target_pool, engine.scheduler.draft_pool):
        assert pool is None or pool.num_free == pool.num_pages
    assert [(o.request_id, o.token_ids) for o in engine.generate(GOOD_PROMPTS, GOOD_PARAMS)] == expected


def broken_copy(source: Path, tmp_path: Path, edit: Callable[[Path], None]) -> Path:
    folder = tmp_path / source.name
    shutil.copytree(source, folder)
    edit(folder)
    return folder


@pytest.mark.parametrize("case", list(BAD_TARGETS))
def test_bad_target_folder(make_pair, tmp_path: Path, case: str) -> None:
    edit, error, mentions = BAD_TARGETS[case]
    target_dir, draft_dir = make_pair()
    with pytest.raises(error, match=mentions.replace("[", r"\[")):
        Engine.from_pretrained(broken_copy(target_dir, tmp_path, edit), draft_dir)


@pytest.mark.parametrize("case", list(BAD_DRAFTS))
def test_bad_draft_folder(make_pair, tmp_path: Path, case: str) -> None:
    edit, error, mentions = BAD_DRAFTS[case]
    target_dir, draft_dir = make_pair()
    with pytest.raises(error, match=mentions.replace("[", r"\[").replace("]", r"\]")):
        Engine.from_pretrained(target_dir, broken_copy(draft_dir, tmp_path, edit))


@pytest.mark.parametrize(
    ("changes", "mentions"),
    [({"hidden_size": 32}, "hidden_size"), ({"vocab_size": 32}, "vocab_size")],
    ids=["hidden-size", "vocab"],
)
def test_draft_of_another_target(make_pair, changes: dict[str, int], mentions: str) -> None:
    target_dir, _ = make_pair()
    _, other_draft = make_pair(**changes)
    with pytest.raises(ConfigMismatchError, match=mentions):
        Engine.from_pretrained(target_dir, other_draft)


def test_missing_folder(tmp_path: Path, make_pair) -> None:
    target_dir, draft_dir = make_pair()
    with pytest.raises(CheckpointError, match="does not exist"):
        Engine.from_pretrained(tmp_path / "nowhere", draft_dir)
    with pytest.raises(CheckpointError, match="does not exist"):
        Engine.from_pretrained(target_dir, tmp_path / "nowhere")


def test_unsupported_dtype(make_pair) -> None:
    with pytest.raises(CheckpointError, match="float16"):
        Engine.from_pretrained(*make_pair(), dtype="float16")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without CUDA")
def test_cuda_without_cuda(make_pair) -> None:
    with pytest.raises(RunnerError, match="CUDA"):
        Engine.from_pretrained(*make_pair(), device="cuda")


BAD_REQUESTS: dict[str, tuple[list[Any], Callable[[], SamplingParams] | Any, type[RunnerError]]] = {
    "empty-prompt": ([], GOOD_PARAMS, InvalidRequestError),
    "id-equal-to-vocab": ([1, 64], GOOD_PARAMS, InvalidRequestError),
    "negative-id": ([1, -1], GOOD_PARAMS, InvalidRequestError),
    "float-id": ([1, 2.0], GOOD_PARAMS, InvalidRequestError),
    "string-id": ([1, "2"], GOOD_PARAMS, InvalidRequestError),
    "longer-than-context": ([1] * 500, SamplingParams(max_tokens=13), InvalidRequestError),
    "params-not-sampling-params": ([1, 2], {"max_tokens": 4}, InvalidRequestError),
}


@pytest.mark.parametrize("case", list(BAD_REQUESTS))
def test_bad_request_is_refused_and_changes_nothing(make_pair, expected, case: str) -> None:
    prompt, params, error = BAD_REQUESTS[case]
    engine = Engine.from_pretrained(*make_pair())
    with pytest.raises(error):
        engine.add_request(prompt, params)
    assert_untouched(engine, expected)
    with pytest.raises(error):
        engine.generate([*GOOD_PROMPTS, prompt], [GOOD_PARAMS, GOOD_PARAMS, params])
    assert_untouched(engine, [(i + len(expected), ids) for i, ids in expected])


def test_prompt_that_just_fits_the_context_is_accepted(make_pair) -> None:
    """The context limit is prompt + max_tokens <= max_position_embeddings (512), not stricter."""
    engine = Engine.from_pretrained(*make_pair(), config=EngineConfig(page_size=64, num_pages=16))
    (out,) = engine.generate([[1] * 509], SamplingParams(max_tokens=3))
    assert len(out.token_ids) == 3


def test_cache_too_small_is_refused_and_changes_nothing(make_pair) -> None:
    # One page of 16 positions: a 3-token prompt + 6 tokens + a block of 4 fits (13); 10 + 6 + 4 does not.
    engine = Engine.from_pretrained(*make_pair(), config=EngineConfig(num_pages=1))
    fresh = Engine.from_pretrained(*make_pair(), config=EngineConfig(num_pages=1))
    expected = [(o.request_id, o.token_ids) for o in fresh.generate([[1, 2, 3]], GOOD_PARAMS)]
    with pytest.raises(CacheCapacityError):
        engine.add_request(list(range(10)), GOOD_PARAMS)
    with pytest.raises(CacheCapacityError):
        engine.generate([[1, 2, 3], list(range(10))], GOOD_PARAMS)
    assert not engine.has_unfinished()
    assert [(o.request_id, o.token_ids) for o in engine.generate([[1, 2, 3]], GOOD_PARAMS)] == expected


def test_generate_refuses_a_busy_engine_and_mismatched_params(make_pair, expected) -> None:
    engine = Engine.from_pretrained(*make_pair())
    with pytest.raises(InvalidRequestError, match="one SamplingParams per prompt"):
        engine.generate(GOOD_PROMPTS, [GOOD_PARAMS])
    assert_untouched(engine, expected)
    engine.add_request([1, 2], GOOD_PARAMS)
    with pytest.raises(InvalidRequestError, match="idle"):
        engine.generate(GOOD_PROMPTS, GOOD_PARAMS)
    assert engine.has_unfinished()  # the running request is left alone
    while engine.has_unfinished():
        engine.step()


BAD_SAMPLING: dict[str, dict[str, Any]] = {
    "negative-temperature": {"temperature": -0.1},
    "nan-temperature": {"temperature": float("nan")},
    "top-p-zero": {"top_p": 0.0},
    "top-p-above-one": {"top_p": 1.01},
    "negative-top-k": {"top_k": -1},
    "float-top-k": {"top_k": 2.5},
    "max-tokens-zero": {"max_tokens": 0},
    "max-tokens-negative": {"max_tokens": -3},
    "max-tokens-float": {"max_tokens": 4.0},
}


@pytest.mark.parametrize("case", list(BAD_SAMPLING))
def test_bad_sampling_params(case: str) -> None:
    with pytest.raises(InvalidRequestError):
        SamplingParams(**BAD_SAMPLING[case])


BAD_ENGINE_CONFIGS: dict[str, dict[str, Any]] = {
    "no-rows": {"max_num_seqs": 0},
    "page-size-zero": {"page_size": 0},
    "no-pages": {"num_pages": 0},
    "block-size-zero": {"block_size": 0},
    "unknown-draft-attention": {"draft_attention": "flash"},
}


@pytest.mark.parametrize("case", list(BAD_ENGINE_CONFIGS))
def test_bad_engine_config(case: str) -> None:
    with pytest.raises(InvalidRequestError):
        EngineConfig(**BAD_ENGINE_CONFIGS[case])
