"""Batching changes nothing a DFlash2 request can see: with fewer rows than requests (so requests wait, finish at
different steps and move down rows), each request gets the tokens, acceptance lengths, drafted blocks and
trace positions of its solo run, greedy or seeded-sampled; and the dense draft path (context K/V recomputed
from every committed feature) gives what the paged one does.
"""

from __future__ import annotations

from dataclasses import asdict

import pytest

from runner import Engine, EngineConfig, SamplingParams
from runner.trace import StepRecord

BLOCK_SIZE = 4

# The short "p2-max5" comes first: its row frees early and the others move down.
GREEDY = {
    "p2-max5": ([0, 3], SamplingParams(max_tokens=5)),
    "p5-max14": ([1, 2, 3, 4, 5], SamplingParams(max_tokens=14)),
    "p3-stop0": ([3, 2, 4], SamplingParams(max_tokens=16, stop_token_ids=(0,))),
    "p2-max7": ([2, 5], SamplingParams(max_tokens=7)),
}
SAMPLED = {
    "p7-T0.9": ([5, 4, 3, 2, 1, 0, 1], SamplingParams(max_tokens=10, temperature=0.9, seed=7)),
    "p1-T1.2-topk3": ([2], SamplingParams(max_tokens=9, temperature=1.2, top_k=3, seed=3)),
    "p3-T0.7-topp0.9": ([4, 4, 1], SamplingParams(max_tokens=12, temperature=0.7, top_p=0.9, seed=11)),
}
REQUESTS = {**GREEDY, **SAMPLED}


def comparable(records: list[StepRecord]) -> list[dict[str, object]]:
    """A request's trace without what depends on the batch (step number, row, request id)."""
    return [{k: v for k, v in asdict(r).items() if k not in ("step", "row", "request_id")} for r in records]


def run(walk_pair, names: list[str], **config: object) -> dict[str, tuple[object, ...]]:
    engine = Engine.from_pretrained(*walk_pair, config=EngineConfig(block_size=BLOCK_SIZE, trace=True, **config))
    outs = engine.generate([REQUESTS[n][0] for n in names], [REQUESTS[n][1] for n in names])
    assert engine.trace is not None
    if len(names) > config.get("max_num_seqs", 16):
        assert engine.trace.row_moves, "no request moved rows"
    return {
        name: (out.token_ids, out.acceptance_lengths, comparable(engine.trace.for_request(out.request_id)))
        for name, out in zip(names, outs, strict=True)
    }


@pytest.fixture(scope="module")
def solo(walk_pair) -> dict[str, tuple[object, ...]]:
    return {name: run(walk_pair, [name])[name] for name in REQUESTS}


def test_requests_are_not_blind(solo) -> None:
    """Requests finish at different steps and accept blocks of several lengths."""
    assert len({len(solo[n][1]) for n in REQUESTS}) >= 4
    assert {1, 2, 3} <= {n for name in REQUESTS for n in solo[name][1]}
    assert solo["p3-stop0"][0][-1] == 0


@pytest.mark.parametrize("max_num_seqs", [2, 3, 16], ids=lambda n: f"rows{n}")
@pytest.mark.parametrize("draft_attention", ["paged", "dense"])
def test_greedy_batched_equals_solo(walk_pair, solo, draft_attention: str, max_num_seqs: int) -> None:
    batched = run(walk_pair, list(GREEDY), max_num_seqs=max_num_seqs, draft_attention=draft_attention)
    for name in GREEDY:
        assert batched[name] == solo[name], name


@pytest.mark.parametrize("max_num_seqs", [2, 16], ids=lambda n: f"rows{n}")
@pytest.mark.parametrize("draft_attention", ["paged", "dense"])
def test_greedy_rows_of_a_mixed_batch_equal_solo(walk_pair, solo, draft_attention: str, max_num_seqs: int) -> None:
    batched = run(walk_pair, list(REQUESTS), max_num_seqs=max_num_seqs, draft_attention=draft_attention)
    for name in GREEDY:
        assert batched[name] == solo[name], name


@pytest.mark.parametrize("draft_attention", ["paged", "dense"])
def test_sampled_rows_of_a_mixed_batch_equal_solo(walk_pair, solo, draft_attention: str) -> None:
    """ "p3-T0.7-topp0.9" drafts 2 slots in a width-3 batch (its budget runs out before the greedy p5-max14's)."""
    batched = run(walk_pair, list(REQUESTS), draft_attention=draft_attention)
    for name in SAMPLED:
        assert batched[name] == solo[name], name


@pytest.mark.parametrize("max_num_seqs", [2, 16], ids=lambda n: f"rows{n}")
def test_dense_batch_equals_paged_batch(walk_pair, max_num_seqs: int) -> None:
    """Greedy and sampled rows alike: the dense draft path changes no token, draft or trace position."""
    paged = run(walk_pair, list(REQUESTS), max_num_seqs=max_num_seqs)
    assert run(walk_pair, list(REQUESTS), max_num_seqs=max_num_seqs, draft_attention="dense") == paged


@pytest.mark.parametrize("name", list(REQUESTS))
def test_dense_solo_equals_paged_solo(walk_pair, solo, name: str) -> None:
    assert run(walk_pair, [name], draft_attention="dense")[name] == solo[name]
