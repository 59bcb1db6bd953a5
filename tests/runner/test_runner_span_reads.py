"""A lone row whose pages are consecutive reads its keys and values as views of the cache (`read_span`) instead
of gathering them slot by slot; the values, and so every token, drafted block and store length, are the ones
the gather gives. A row whose pages are scattered (a pool's free list that wrapped around) still gathers.
"""

from __future__ import annotations

from collections import deque
from dataclasses import asdict

import pytest
import torch

from runner import Engine, EngineConfig, SamplingParams
from runner.kv_cache import PagedKVCache, first_slot
from runner.trace import StepRecord


def comparable(records: list[StepRecord]) -> list[dict[str, object]]:
    """A request's trace without its step numbers and request id."""
    return [{k: v for k, v in asdict(r).items() if k not in ("step", "request_id")} for r in records]


@pytest.mark.parametrize(
    ("pages", "expected"),
    [([3], 12), ([2, 3, 4], 8), ([0, 1], 0), ([], None), ([1, 3], None), ([3, 2], None), ([5, 6, 0, 1], None)],
    ids=["one", "run", "from-zero", "none", "gap", "descending", "wrapped"],
)
def test_first_slot_only_for_consecutive_pages(pages: list[int], expected: int | None) -> None:
    assert first_slot(pages, 4) == expected


def test_a_span_read_is_the_gather_of_its_slots() -> None:
    cache = PagedKVCache(2, 4, 4, 2, 3, torch.float32, torch.device("cpu"))
    cache.k.normal_(), cache.v.normal_()
    pages = [1, 2]
    start = first_slot(pages, cache.page_size)
    assert start is not None
    positions = torch.arange(7)[None]
    slots = cache.slots(torch.tensor([pages]), positions)
    for layer in range(2):
        gathered, span = cache.read(layer, slots), cache.read_span(layer, start, 7)
        for a, b in zip(gathered, span, strict=True):
            assert a.shape == b.shape and a.stride() == b.stride() and torch.equal(a, b)


PARAMS = [SamplingParams(max_tokens=14), SamplingParams(max_tokens=12, temperature=0.9, seed=7)]


@pytest.mark.parametrize("params", PARAMS, ids=["greedy", "sampled"])
def test_scattered_pages_give_the_span_reads_tokens(agreeing_pair, monkeypatch, params: SamplingParams) -> None:
    target_dir, draft_dir = agreeing_pair
    spans: list[int] = []
    read_span = PagedKVCache.read_span

    def counted(self, layer, start, length):
        spans.append(start)
        return read_span(self, layer, start, length)

    monkeypatch.setattr(PagedKVCache, "read_span", counted)
    runs = []
    for scattered in (False, True):
        config = EngineConfig(trace=True, page_size=4, block_size=4, num_pages=32)
        engine = Engine.from_pretrained(target_dir, draft_dir, config=config)
        if scattered:  # every other page first: no request gets two consecutive pages
            for pool in (engine.scheduler.target_pool, engine.scheduler.draft_pool):
                assert pool is not None
                pool._free = deque([*range(0, 32, 2), *range(1, 32, 2)])
        spans.clear()
        (out,) = engine.generate([[1, 2, 3, 4, 5]], params)
        assert engine.trace is not None
        runs.append((out.token_ids, out.acceptance_lengths, comparable(engine.trace.for_request(out.request_id))))
        assert bool(spans) is not scattered, "the span path was taken exactly when the pages were consecutive"
    assert runs[0] == runs[1]
