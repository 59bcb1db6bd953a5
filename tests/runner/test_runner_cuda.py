"""The CUDA path (skipped without a CUDA device): on the shipped fixtures, greedy tokens, acceptance lengths and
drafted blocks on the GPU equal the CPU's; seeded sampled rows are the same alone or batched; the DFlash2
walk's candidate order does not depend on the device."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from runner import Engine, EngineConfig, SamplingParams

pytestmark = pytest.mark.gpu

FIXTURES = Path(__file__).resolve().parents[2] / "runner" / "fixtures"
PROMPTS = [[3, 6, 9, 12, 15, 18], [2, 4, 6, 8], [5, 10, 15, 20, 25, 30, 35], [1, 2, 3]]


def _engine(fixture: str, device: str, **config: object) -> Engine:
    folder = FIXTURES / fixture
    options = {"trace": True, **config}
    return Engine.from_pretrained(
        folder / "target",
        folder / "draft",
        device=device,
        config=EngineConfig(**options),  # type: ignore[arg-type]
    )


def _run(engine: Engine, params: SamplingParams) -> list[tuple]:
    outs = engine.generate(PROMPTS, params)
    assert engine.trace is not None
    return [(o.token_ids, o.acceptance_lengths, engine.trace.drafted_blocks(o.request_id)) for o in outs]


@pytest.mark.parametrize("fixture", ["stride-dflash", "stride-dflash2"])
@pytest.mark.parametrize("draft_attention", ["paged", "dense"])
def test_cuda_greedy_equals_cpu(fixture: str, draft_attention: str) -> None:
    params = SamplingParams(max_tokens=24)
    cpu = _run(_engine(fixture, "cpu", max_num_seqs=2, draft_attention=draft_attention), params)
    gpu = _run(_engine(fixture, "cuda", max_num_seqs=2, draft_attention=draft_attention), params)
    assert gpu == cpu


@pytest.mark.parametrize("fixture", ["stride-dflash", "stride-dflash2"])
def test_cuda_seeded_sampling_batched_equals_solo(fixture: str) -> None:
    params = [SamplingParams(max_tokens=16, temperature=1.5, seed=10 + i) for i in range(len(PROMPTS))]
    batched = _engine(fixture, "cuda", max_num_seqs=3).generate(PROMPTS, params)
    for prompt, p, out in zip(PROMPTS, params, batched, strict=True):
        (solo,) = _engine(fixture, "cuda").generate([prompt], p)
        assert solo.token_ids == out.token_ids


def test_cuda_walk_candidates_are_ordered() -> None:
    """topk(sorted=False) is unordered on CUDA: the walk must see its candidates by descending logit."""
    engine = _engine("stride-dflash2", "cuda")
    selector = engine.draft.candidate_selector
    assert selector is not None
    logits = torch.randn(3, 4, engine.target.config.vocab_size, device="cuda")
    hidden = torch.randn(3, 4, engine.target.config.hidden_size, device="cuda")
    with torch.inference_mode():
        _, candidates, _ = selector.walk(
            hidden, logits, torch.zeros(3, dtype=torch.long, device="cuda"), [0.0] * 3, [None] * 3
        )
    picked = logits.gather(-1, candidates)
    assert torch.all(picked[..., :-1] >= picked[..., 1:])
