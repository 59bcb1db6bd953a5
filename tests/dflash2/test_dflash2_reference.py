"""Greedy DFlash2 decoding is the reference's: on the same HF folders, the generated ids, the acceptance lengths
and the drafted blocks equal those of the upstream `dflash_generate` with a `DFlash2DraftModel`, for each
request alone and for all of them batched in one engine.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from dflash2kit import result_of

from runner import Engine, EngineConfig, SamplingParams

pytestmark = pytest.mark.reference

BLOCK_SIZES = [2, 3, 4, 6]


@dataclass(frozen=True)
class Case:
    prompt: tuple[int, ...]
    max_tokens: int
    stop_token_ids: tuple[int, ...] = ()

    @property
    def params(self) -> SamplingParams:
        return SamplingParams(max_tokens=self.max_tokens, stop_token_ids=self.stop_token_ids)


# On the walk pair: "p3-stop0" and "p1-stop0" emit 0 inside a block that the target accepts past it, so the stop
# cuts a verify step short; the max_tokens cases run out mid-stream (both checked below).
CASES = {
    "p5-max20": Case((1, 2, 3, 4, 5), 20),
    "p2-max13": Case((0, 3), 13),
    "p7-max11": Case((5, 4, 3, 2, 1, 0, 1), 11),
    "p3-max20": Case((3, 2, 4), 20),
    "p3-stop0": Case((3, 2, 4), 16, stop_token_ids=(0,)),
    "p1-stop0": Case((2,), 16, stop_token_ids=(0,)),
    "p1-max17": Case((2,), 17),
}


@pytest.fixture(scope="module")
def expected(walk_pair, reference_decode):
    """The reference's result per (block size, case name)."""
    return {
        (block_size, name): reference_decode(walk_pair, case.prompt, case.max_tokens, case.stop_token_ids, block_size)
        for block_size in BLOCK_SIZES
        for name, case in CASES.items()
    }


@pytest.mark.parametrize("block_size", BLOCK_SIZES, ids=lambda b: f"B{b}")
def test_greedy_equals_reference_alone_and_batched(walk_pair, expected, block_size: int) -> None:
    engine = Engine.from_pretrained(*walk_pair, config=EngineConfig(block_size=block_size, page_size=4, trace=True))
    for name, case in CASES.items():
        (out,) = engine.generate([list(case.prompt)], case.params)
        assert result_of(out, engine) == expected[block_size, name], f"{name} alone"

    batched = engine.generate([list(c.prompt) for c in CASES.values()], [c.params for c in CASES.values()])
    for name, out in zip(CASES, batched, strict=True):
        assert result_of(out, engine) == expected[block_size, name], f"{name} batched"


def test_reference_cases_are_not_blind(expected) -> None:
    """The comparison above sees what it claims: varied acceptance, stops inside a verify step, cut budgets."""
    lengths = {n for result in expected.values() for n in result.acceptance_lengths}
    assert {1, 2, 3, 4} <= lengths, f"acceptance lengths seen: {sorted(lengths)}"
    for block_size in BLOCK_SIZES:
        for name, case in CASES.items():
            result = expected[block_size, name]
            if case.stop_token_ids:
                assert result.token_ids[-1] in case.stop_token_ids
                assert len(result.token_ids) < case.max_tokens
            else:
                assert len(result.token_ids) == case.max_tokens


def test_a_stop_token_cuts_a_verify_step_short(walk_pair) -> None:
    """The stop cases end on a drafted token that the target accepted with more accepted tokens after it."""
    cut = []
    for block_size in BLOCK_SIZES:
        engine = Engine.from_pretrained(*walk_pair, config=EngineConfig(block_size=block_size, trace=True))
        for name, case in CASES.items():
            if case.stop_token_ids:
                (out,) = engine.generate([list(case.prompt)], case.params)
                assert engine.trace is not None
                last = engine.trace.for_request(out.request_id)[-1]
                if last.produced < last.accepted + 1:
                    cut.append((block_size, name))
    assert cut, "no verify step was cut short by a stop token"
