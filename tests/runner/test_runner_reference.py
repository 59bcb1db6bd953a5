"""Faithful to the reference: on the same HF folders, greedy output ids and acceptance lengths equal those of
the upstream `dflash_generate` (dflash==0.1.0, transformers' Qwen3ForCausalLM as its target).

The reference decodes one request at a time; our engine must give each request the same result alone and
batched with the others.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import transformers

from runner import Engine, EngineConfig, SamplingParams

pytestmark = pytest.mark.reference

BLOCK_SIZES = [2, 3, 4, 8]


@dataclass(frozen=True)
class Case:
    prompt: tuple[int, ...]
    max_tokens: int
    stop_token_ids: tuple[int, ...] = ()


# max_tokens 13 and 9 run out mid-stream (checked below); in "p3-stop" the stop token is the
# first drafted token of a block of 4 that the target accepts whole, so the stop cuts the block short.
CASES = {
    "p5-max13": Case((1, 2, 3, 4, 5), 13),
    "p2-max12": Case((0, 3), 12),
    "p7-max9": Case((5, 4, 3, 2, 1, 0, 1), 9),
    "p1-max1": Case((4,), 1),
    "p3-stop": Case((3, 2, 4), 14, stop_token_ids=(0,)),
}

# Draft config variants: each edits the draft's config.json, weights unchanged.
VARIANTS = {
    "plain": {},
    "sliding-causal": {
        "layer_types": ["sliding_attention", "full_attention"],
        "sliding_window": 3,
        "use_sliding_window": True,
    },
    "all-causal": {"is_causal": True},
    "scaled-softcap": {
        "dflash_config": {"input_embedding_scale": 1.5, "output_multiplier": 0.7, "final_logit_softcapping": 2.5}
    },
}


@pytest.fixture(autouse=True)
def _cpu_timer(reference, monkeypatch: pytest.MonkeyPatch) -> None:
    # return_stats=True times with torch.cuda.synchronize, which fails without CUDA.
    if not torch.cuda.is_available():
        monkeypatch.setattr(reference, "_cuda_time", time.perf_counter)


@pytest.fixture(scope="session")
def variant_pair(agreeing_pair, agreeing_pair2, tmp_path_factory: pytest.TempPathFactory):
    made: dict[tuple[str, str], tuple[Path, Path]] = {}

    def make(kind: str, variant: str) -> tuple[Path, Path]:
        if (kind, variant) not in made:
            target_dir, draft_dir = agreeing_pair if kind == "dflash" else agreeing_pair2
            changes = VARIANTS[variant]
            if changes:
                new_dir = tmp_path_factory.mktemp(f"draft-{kind}-{variant}")
                shutil.copytree(draft_dir, new_dir, dirs_exist_ok=True)
                config = json.loads((new_dir / "config.json").read_text())
                for key, value in changes.items():
                    config[key] = {**config[key], **value} if isinstance(value, dict) else value
                (new_dir / "config.json").write_text(json.dumps(config))
                draft_dir = new_dir
            made[kind, variant] = (target_dir, draft_dir)
        return made[kind, variant]

    return make


@pytest.fixture(scope="session")
def reference_models(reference):
    loaded: dict[tuple[Path, Path], tuple[torch.nn.Module, torch.nn.Module]] = {}

    def load(target_dir: Path, draft_dir: Path, kind: str) -> tuple[torch.nn.Module, torch.nn.Module]:
        if (target_dir, draft_dir) not in loaded:
            target = transformers.Qwen3ForCausalLM.from_pretrained(target_dir, dtype=torch.float32).eval()
            cls = reference.DFlash2DraftModel if kind == "dflash2" else reference.DFlashDraftModel
            draft = cls.from_pretrained(draft_dir, dtype=torch.float32).eval()
            loaded[target_dir, draft_dir] = (target, draft)
        return loaded[target_dir, draft_dir]

    return load


Result = tuple[list[int], list[int], list[list[int]]]  # generated ids, acceptance lengths, drafted blocks


def run_reference(reference, target, draft, case: Case, block_size: int) -> Result:
    """One reference decode; the drafted block of each verify step is recorded from the draft's proposals."""
    drafted: list[list[int]] = []
    if isinstance(draft, reference.DFlash2DraftModel):

        def propose(*args, **kwargs):
            tokens, indices, probs = type(draft).propose(draft, *args, **kwargs)
            drafted.append(tokens[0].tolist())
            return tokens, indices, probs

        draft.propose = propose
    else:

        def compute_logits(*args, **kwargs):
            logits = type(draft).compute_logits(draft, *args, **kwargs)
            drafted.append(logits[0].argmax(-1).tolist())
            return logits

        draft.compute_logits = compute_logits
    try:
        stats = reference.dflash_generate(
            draft,
            target,
            torch.tensor([case.prompt]),
            case.max_tokens,
            list(case.stop_token_ids) or None,
            block_size=block_size,
            return_stats=True,
        )
    finally:
        del draft.__dict__["propose" if isinstance(draft, reference.DFlash2DraftModel) else "compute_logits"]
    return stats.output_ids[0, len(case.prompt) :].tolist(), list(stats.acceptance_lengths), drafted


@pytest.fixture(scope="session")
def reference_run(reference, variant_pair, reference_models):
    """The reference's result for one case; memoised across tests."""
    results: dict[tuple[str, str, int, str], Result] = {}

    def run(kind: str, variant: str, block_size: int, name: str) -> Result:
        key = (kind, variant, block_size, name)
        if key not in results:
            target, draft = reference_models(*variant_pair(kind, variant), kind)
            results[key] = run_reference(reference, target, draft, CASES[name], block_size)
        return results[key]

    return run


def ours(out, engine: Engine) -> Result:
    assert engine.trace is not None
    # The reference calls its draft only when a block has room for drafted tokens.
    blocks = [list(b) for b in engine.trace.drafted_blocks(out.request_id) if b]
    return list(out.token_ids), list(out.acceptance_lengths), blocks


def params_of(case: Case) -> SamplingParams:
    return SamplingParams(max_tokens=case.max_tokens, stop_token_ids=case.stop_token_ids)


# Every block size on the plain drafts; the config variants at block size 4.
COMBOS = [(kind, "plain", b) for kind in ("dflash", "dflash2") for b in BLOCK_SIZES] + [
    ("dflash", "plain", 1),  # no drafting at all: plain decoding on both sides
    ("dflash", "sliding-causal", 4),
    ("dflash", "all-causal", 4),
    ("dflash", "scaled-softcap", 4),
    ("dflash2", "sliding-causal", 4),
]


@pytest.mark.parametrize(("kind", "variant", "block_size"), COMBOS, ids=[f"{k}-{v}-B{b}" for k, v, b in COMBOS])
def test_greedy_equals_reference_alone_and_batched(
    variant_pair, reference_run, kind: str, variant: str, block_size: int
) -> None:
    target_dir, draft_dir = variant_pair(kind, variant)
    expected = {name: reference_run(kind, variant, block_size, name) for name in CASES}

    config = EngineConfig(block_size=block_size, page_size=4, trace=True)
    engine = Engine.from_pretrained(target_dir, draft_dir, config=config)
    for name, case in CASES.items():
        (out,) = engine.generate([list(case.prompt)], params_of(case))
        assert ours(out, engine) == expected[name], f"{name} alone"

    names = list(CASES)
    cases = [CASES[name] for name in names]
    batched = engine.generate([list(c.prompt) for c in cases], [params_of(c) for c in cases])
    for name, out in zip(names, batched, strict=True):
        assert ours(out, engine) == expected[name], f"{name} batched"


@pytest.mark.parametrize(("kind", "expected_lengths"), [("dflash", {1, 2, 3, 4}), ("dflash2", {1, 2})])
def test_reference_cases_are_not_blind(variant_pair, reference_run, kind: str, expected_lengths: set[int]) -> None:
    """The cases above exercise what they claim: varied acceptance, a stop inside a block, a cut budget."""
    lengths = {n for b in BLOCK_SIZES for name in CASES for n in reference_run(kind, "plain", b, name)[1]}
    assert expected_lengths <= lengths, f"acceptance lengths seen: {sorted(lengths)}"

    stop = CASES["p3-stop"]
    ids, accepted, _ = reference_run(kind, "plain", 4, "p3-stop")
    assert ids[-1] in stop.stop_token_ids and len(ids) < stop.max_tokens, "the stop case never stops"
    if kind == "dflash":
        engine = Engine.from_pretrained(*variant_pair(kind, "plain"), config=EngineConfig(block_size=4, trace=True))
        engine.generate([list(stop.prompt)], params_of(stop))
        assert engine.trace is not None
        last = engine.trace.records[-1]
        assert last.produced < last.accepted + 1, "the stop does not cut an accepted block short"

    for name in ("p5-max13", "p7-max9"):
        for block_size in (3, 4, 8):
            ids, accepted, _ = reference_run(kind, "plain", block_size, name)
            assert len(ids) == CASES[name].max_tokens
            assert sum(accepted) + 1 == CASES[name].max_tokens


def test_tapping_the_last_target_layer_equals_reference(reference, make_agreeing_pair) -> None:
    target_dir, draft_dir = make_agreeing_pair(target_layer_ids=(1, 3))
    target = transformers.Qwen3ForCausalLM.from_pretrained(target_dir, dtype=torch.float32).eval()
    draft = reference.DFlashDraftModel.from_pretrained(draft_dir, dtype=torch.float32).eval()
    engine = Engine.from_pretrained(target_dir, draft_dir, config=EngineConfig(block_size=4, trace=True))
    case = CASES["p5-max13"]
    (out,) = engine.generate([list(case.prompt)], params_of(case))
    assert ours(out, engine) == run_reference(reference, target, draft, case, 4)
