"""Gate: the small rules everything else leans on, checked exactly on their own: request validation and its
boundaries, the page allocator's boundaries, admission against rows and pages, the sampling distribution's
formula, greedy acceptance at the edge of a row's block, and the DFlash2 form of the acceptance rule (q over
candidates).
"""

from __future__ import annotations

import math

import pytest
import torch
from dense_reference import filtered_probs

from runner import CacheCapacityError, EngineConfig, InvalidRequestError, SamplingParams
from runner.block_manager import BlockAllocator
from runner.request import Request
from runner.sampling import greedy_accept, rejection_accept, sampling_probs
from runner.scheduler import Scheduler
from verify import proportion_p_value, reseed

pytestmark = pytest.mark.gate


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"max_tokens": 0}, "max_tokens must be a positive integer"),
        ({"max_tokens": 2.0}, "max_tokens must be a positive integer"),
        ({"temperature": -0.1}, "temperature must be >= 0"),
        ({"temperature": math.nan}, "temperature must be >= 0"),
        ({"top_p": 0.0}, r"top_p must be in \(0, 1\]"),
        ({"top_p": 1.5}, r"top_p must be in \(0, 1\]"),
        ({"top_k": -1}, "top_k must be a non-negative integer"),
        ({"top_k": 1.0}, "top_k must be a non-negative integer"),
    ],
)
def test_invalid_sampling_params_are_refused_by_name(changes: dict, message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        SamplingParams(**changes)


@pytest.mark.parametrize(
    ("name", "value"),
    [("max_num_seqs", 0), ("page_size", 0), ("num_pages", 0), ("num_pages", 2.0), ("block_size", 0)],
    ids=["no-rows", "page-size-0", "no-pages", "float-pages", "block-size-0"],
)
def test_invalid_engine_config_is_refused_by_name(name: str, value: object) -> None:
    with pytest.raises(InvalidRequestError, match=f"EngineConfig.{name} must be"):
        EngineConfig(**{name: value})


def test_sampling_params_boundaries_are_accepted() -> None:
    params = SamplingParams(max_tokens=1, temperature=0.0, top_p=1.0, top_k=0, stop_token_ids=[3, 4])
    assert params.is_greedy and params.stop_token_ids == (3, 4)
    assert not SamplingParams(temperature=1e-3, top_p=1e-3).is_greedy


def test_admission_never_exceeds_the_rows() -> None:
    """Three requests that all fit in the pools, two rows: two are admitted, the third waits for a free row."""
    scheduler = Scheduler(2, BlockAllocator(64, "target"), BlockAllocator(64, "draft"), page_size=4, block_size=4)
    for i in range(3):
        scheduler.add(Request(i, [1, 2, 3], SamplingParams(max_tokens=4)))
    admitted = scheduler.admit()
    assert [r.request_id for r in admitted] == [0, 1] and scheduler.num_running == 2
    assert [r.request_id for r in scheduler.waiting] == [2]
    assert scheduler.admit() == []


def test_allocator_boundaries() -> None:
    with pytest.raises(CacheCapacityError, match="test pool needs at least one page, got 0"):
        BlockAllocator(0, "test")
    single = BlockAllocator(1, "single")
    assert single.allocate(1) == [0]
    pool = BlockAllocator(4, "test")
    taken = pool.allocate(4)  # exactly what is free
    assert sorted(taken) == [0, 1, 2, 3] and pool.num_free == 0 and pool.num_used == 4
    with pytest.raises(CacheCapacityError, match="test pool: need 1 pages, 0 free"):
        pool.allocate(1)
    pool.free(taken[:2])
    assert sorted(pool.allocate(2)) == sorted(taken[:2]), "freed pages must come back as the same ids"
    with pytest.raises(ValueError, match="test pool: page 3 freed twice or never allocated"):
        pool.free([3, 3])


def test_admission_respects_max_rows_and_pages() -> None:
    """Admission takes waiting requests in order while a row and their pages are free: never more running rows
    than max_rows, and a request whose pages are not free waits (with those behind it)."""
    target, store = BlockAllocator(64, "target"), BlockAllocator(64, "store")
    scheduler = Scheduler(3, target, store, page_size=4, block_size=4)
    requests = [Request(i, [1, 2, 3], SamplingParams(max_tokens=5)) for i in range(5)]
    for request in requests:
        scheduler.add(request)
    assert [r.request_id for r in scheduler.admit()] == [0, 1, 2]
    assert scheduler.num_running == 3 and [r.request_id for r in scheduler.waiting] == [3, 4]
    assert scheduler.admit() == [], "a full batch admits nobody"
    # 3 prompt + 5 budget + a block of 4 = 12 positions = 3 pages of 4, in each pool.
    assert target.num_used == store.num_used == 9
    scheduler.release(requests[1])
    assert [r.request_id for r in scheduler.admit()] == [3]
    assert scheduler.num_running == 3 and target.num_used == store.num_used == 9
    short = Scheduler(8, BlockAllocator(7, "target"), BlockAllocator(64, "store"), page_size=4, block_size=4)
    for i in range(3):
        short.add(Request(10 + i, [1, 2, 3], SamplingParams(max_tokens=5)))
    assert [r.request_id for r in short.admit()] == [10, 11], "7 pages hold two requests of 3 pages"
    assert short.num_running == 2


@pytest.mark.parametrize(
    ("temperature", "top_p", "top_k"),
    [(1.0, 1.0, 0), (0.5, 1.0, 0), (2.5, 1.0, 0), (1.0, 0.8, 0), (1.0, 1.0, 3), (0.7, 0.6, 4), (1.3, 1.0, 8)],
)
def test_sampling_probs_formula(temperature: float, top_p: float, top_k: int) -> None:
    logits = torch.tensor([2.0, 1.2, 0.3, -0.5, 1.9, 0.0, -2.0, 0.8])
    got = sampling_probs(logits, temperature, top_p, top_k)
    want = filtered_probs(logits, temperature, top_p, top_k)
    if top_p == 1.0 and top_k == 0:  # the defaults mean "no filter" (the DFlash2 walk relies on them)
        assert torch.allclose(sampling_probs(logits, temperature), want, atol=1e-6)
    assert torch.allclose(got, want, atol=1e-6), (got, want)
    assert abs(float(got.sum()) - 1.0) < 1e-6


def test_top_p_keeps_the_token_that_crosses_it_and_no_more() -> None:
    logits = torch.log(torch.tensor([0.5, 0.3, 0.2]))
    probs = sampling_probs(logits, 1.0, top_p=0.79)
    assert probs[2] == 0 and probs[1] > 0  # 0.5 + 0.3 crosses 0.79: the third token is out
    # Exactly reaching top_p with the first token (0.5 of mass, top_p = 0.5) keeps that token alone.
    exact = sampling_probs(torch.tensor([0.0, 0.0, -1e9]), 1.0, top_p=0.5)
    assert (exact > 0).sum() == 1 and float(exact.max()) == 1.0


def test_sampling_probs_normalises_each_row() -> None:
    logits = torch.tensor([[2.0, 1.0, 0.5, -1.0], [0.1, 0.2, 3.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    for top_p, top_k in ((0.7, 0), (1.0, 2), (0.9, 3)):
        probs = sampling_probs(logits, 0.8, top_p, top_k)
        assert torch.allclose(probs.sum(-1), torch.ones(3), atol=1e-6)
        for row in range(3):
            assert torch.allclose(probs[row], sampling_probs(logits[row], 0.8, top_p, top_k), atol=1e-6)


@pytest.mark.parametrize(
    ("drafted", "argmax", "num_valid", "expected"),
    [
        ([[5, 5, 5]], [[5, 5, 5, 5]], [1], [1]),  # a row with one real slot: padding never counts
        ([[5, 5, 5]], [[5, 5, 5, 5]], [0], [0]),
        ([[5, 6, 5]], [[5, 5, 5, 5]], [3], [1]),  # stops at the first mismatch
        ([[1, 2, 3], [1, 2, 3]], [[1, 2, 3, 9], [1, 9, 3, 9]], [3, 3], [3, 1]),
    ],
)
def test_greedy_accept_respects_each_rows_block(drafted, argmax, num_valid, expected) -> None:
    assert greedy_accept(torch.tensor(drafted), torch.tensor(argmax), num_valid) == expected


def test_rejection_rule_over_candidates(record_property) -> None:
    """DFlash2 form: q is over top-k candidates. p(x)=0.2, q(x)=0.8: accept with probability 0.25 (4000 trials,
    standard error 0.0068, bound 0.035); on rejection, resample from norm(max(p - q, 0)) over the vocab. Each
    check states its red's p-value first (Hoeffding's bound; 0 where a correct rule cannot fail)."""
    p = torch.tensor([[0.2, 0.3, 0.3, 0.2], [0.25, 0.25, 0.25, 0.25]])
    candidates = torch.tensor([[0, 3]])
    q = torch.tensor([[0.8, 0.2]])  # over tokens 0 and 3
    generator = torch.Generator().manual_seed(reseed(1))  # the harness's stream (verify.seeds)
    accepted, hits = 0, torch.zeros(4)
    for _ in range(4000):
        count, token = rejection_accept([0], p, q, candidates, generator)
        accepted += count
        if count == 0:
            hits[token] += 1
    record_property("p_value", proportion_p_value(4000, abs(accepted / 4000 - 0.25)))
    assert abs(accepted / 4000 - 0.25) < 0.035
    # residual = max(p - q, 0) = [0, 0.3, 0.3, 0] / 0.6
    record_property("p_value", 0.0)
    assert hits[0] == 0 and hits[3] == 0
    share = float(hits[1] / hits.sum())
    record_property("p_value", proportion_p_value(int(hits.sum()), abs(share - 0.5)))
    assert abs(share - 0.5) < 0.05


def test_rejection_with_no_residual_mass_falls_back_to_p() -> None:
    p = torch.tensor([[0.0, 1.0], [0.5, 0.5]])
    q = torch.tensor([[0.0, 1.0]])
    generator = torch.Generator().manual_seed(0)
    # The drafted token 0 has p = 0: always rejected; p - q = 0 everywhere, so the token comes from p itself.
    for _ in range(20):
        assert rejection_accept([0], p, q, None, generator) == (0, 1)
