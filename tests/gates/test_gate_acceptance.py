"""Gate: acceptance stays above the audit's measured floor, speculative output equals plain decoding, and the
budget and stop tokens end a request exactly where they should, even inside an accepted block.
"""

from __future__ import annotations

import statistics

import pytest
from gatekit import greedy, make_engine

from verify import assert_speculative_equals_plain

pytestmark = pytest.mark.gate


@pytest.fixture  # function scope on purpose: see gatekit.py
def runs(prompts: list[list[int]]):
    spec = make_engine().generate(prompts, greedy())
    plain = make_engine(draft=False).generate(prompts, greedy())
    return spec, plain


def test_acceptance_above_measured_floor(runs, manifest: dict) -> None:
    spec, _ = runs
    lengths = [a for o in spec for a in o.acceptance_lengths]
    floor = manifest["gate_floors"]["acceptance_mean"]
    mean = statistics.fmean(lengths)
    assert mean >= floor, f"mean acceptance {mean:.2f} fell below the fixture's floor {floor:.2f}"
    assert len(set(lengths)) > 1, "acceptance lengths are constant: the comparison would be blind"


def test_speculative_equals_plain_decoding(runs) -> None:
    spec, plain = runs
    assert len(spec) == len(plain)
    # The runs are batched: the kit's check reads each request's outputs by index.
    assert_speculative_equals_plain(lambda i: spec[i].token_ids, lambda i: plain[i].token_ids, range(len(spec)))
    for s, p in zip(spec, plain, strict=True):
        assert sum(s.acceptance_lengths) + 1 == len(s.token_ids)
        assert all(a == 1 for a in p.acceptance_lengths)


@pytest.mark.parametrize("max_tokens", [1, 2, 5, 7, 10])
def test_budget_ends_inside_a_block(prompts: list[list[int]], max_tokens: int) -> None:
    (out,) = make_engine().generate([prompts[0]], greedy(max_tokens=max_tokens))
    (plain,) = make_engine(draft=False).generate([prompts[0]], greedy(max_tokens=max_tokens))
    assert len(out.token_ids) == max_tokens
    assert out.token_ids == plain.token_ids
    assert out.finish_reason == "length"
    # Every verify step commits at least the bonus token; the first token comes from prefill.
    assert all(a >= 1 for a in out.acceptance_lengths)
    assert sum(out.acceptance_lengths) + 1 == len(out.token_ids)


def test_stop_token_ends_inside_an_accepted_block(prompts: list[list[int]], runs) -> None:
    spec, _ = runs
    # Pick a token the first request produces mid-block (not as a block's first token) and stop on it.
    out = spec[0]
    tokens = list(out.token_ids)
    stop_at = next(i for i in range(3, len(tokens)) if tokens[i] not in tokens[:i])
    (stopped,) = make_engine().generate([prompts[0]], greedy(stop_token_ids=(tokens[stop_at],)))
    assert list(stopped.token_ids) == tokens[: stop_at + 1], "output must end at the stop token, inclusive"
    assert stopped.finish_reason == "stop"
    assert sum(stopped.acceptance_lengths) + 1 == len(stopped.token_ids)
