"""Every bad input is refused by name, and a refused call changes nothing: not the trace, the global torch RNG
state, the pages, the request table, the queue nor the finished outputs. Finished and aborted requests give
back everything they held. Tiny top_p and the smallest temperature decode without NaN; eos ends generation.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from runner import CacheCapacityError, Engine, EngineConfig, InvalidRequestError, RunnerError, SamplingParams
from runner.sampling import MIN_TEMPERATURE, sampling_probs

PROMPTS = [[1, 2, 3], [5, 4]]
SAMPLED = SamplingParams(max_tokens=6, temperature=1.0)  # unseeded: its seed is a draw from the global RNG


def state(engine: Engine) -> dict[str, Any]:
    """Everything a refused call must leave as it was."""
    pools = (engine.scheduler.target_pool, engine.scheduler.draft_pool)
    return {
        "rng": torch.get_rng_state(),
        "trace_object": id(engine.trace),
        "trace": None if engine.trace is None else engine.trace.to_dict(),
        "pages": [None if p is None else (list(p._free), sorted(p._used)) for p in pools],
        "requests": dict(engine._requests),
        "outputs": dict(engine._outputs),
        "waiting": [r.request_id for r in engine.scheduler.waiting],
        "num_running": engine.scheduler.num_running,
        "rows": engine.rows.num_rows,
        "next_id": engine._next_id,
    }


def assert_same_state(before: dict[str, Any], after: dict[str, Any]) -> None:
    assert torch.equal(before.pop("rng"), after.pop("rng")), "the global torch RNG moved"
    assert before == after


@pytest.fixture
def engine(make_pair) -> Engine:
    """An engine with history: a traced generate behind it (trace records, finished outputs) and one request
    queued, so that a refused call has something to wipe, draw from or leak into."""
    engine = Engine.from_pretrained(*make_pair(), config=EngineConfig(trace=True, num_pages=8))
    engine.generate(PROMPTS, [SAMPLED, SamplingParams(max_tokens=5)])
    assert engine.trace is not None and engine.trace.records and engine._outputs
    return engine


# Sampling settings refused when the SamplingParams is built (the user's call never reaches the engine).
BAD_PARAMS: dict[str, dict[str, Any]] = {
    "temperature-underflows": {"temperature": 1e-45},
    "temperature-below-min": {"temperature": MIN_TEMPERATURE / 2},
    "temperature-inf": {"temperature": float("inf")},
    "temperature-nan": {"temperature": float("nan")},
    "temperature-bool": {"temperature": True},
    "temperature-string": {"temperature": "1.0"},
    "top-p-nan": {"top_p": float("nan")},
    "top-p-string": {"top_p": "0.5"},
    "top-p-bool": {"top_p": True},
    "top-k-bool": {"top_k": True},
    "max-tokens-bool": {"max_tokens": True},
    "seed-negative": {"seed": -1},
    "seed-too-big": {"seed": 2**64},
    "seed-float": {"seed": 1.5},
    "seed-bool": {"seed": True},
    "stop-ids-string": {"stop_token_ids": "12"},
    "stop-id-float": {"stop_token_ids": (1.0,)},
    "stop-id-bool": {"stop_token_ids": (True,)},
    "stop-id-negative": {"stop_token_ids": (-1,)},
    "ignore-eos-int": {"ignore_eos": 1},
}


@pytest.mark.parametrize("case", list(BAD_PARAMS))
def test_bad_sampling_params_are_refused_and_change_nothing(engine: Engine, case: str) -> None:
    before = state(engine)
    with pytest.raises(InvalidRequestError):
        engine.generate(PROMPTS, SamplingParams(**BAD_PARAMS[case]))
    assert_same_state(before, state(engine))


# Requests refused by the engine, each checked through add_request (with a request queued) and through a
# generate whose other prompt is good and sampled without a seed.
BAD_REQUESTS: dict[str, tuple[Any, Any, type[RunnerError]]] = {
    "stop-id-outside-vocab": ([1, 2], SamplingParams(stop_token_ids=(64,)), InvalidRequestError),
    "prompt-id-outside-vocab": ([1, 64], SAMPLED, InvalidRequestError),
    "prompt-id-bool": ([1, True], SAMPLED, InvalidRequestError),
    "prompt-a-string": ("123", SAMPLED, InvalidRequestError),
    "prompt-empty": ([], SAMPLED, InvalidRequestError),
    "longer-than-context": ([1] * 500, SamplingParams(max_tokens=13), InvalidRequestError),
    "cache-too-small": ([1] * 120, SamplingParams(max_tokens=8), CacheCapacityError),
    "params-a-dict": ([1, 2], {"temperature": 1.0}, InvalidRequestError),
}


@pytest.mark.parametrize("case", list(BAD_REQUESTS))
def test_bad_request_through_add_request_changes_nothing(engine: Engine, case: str) -> None:
    prompt, params, error = BAD_REQUESTS[case]
    engine.add_request([3, 4], SAMPLED)
    before = state(engine)
    with pytest.raises(error):
        engine.add_request(prompt, params)
    assert_same_state(before, state(engine))


@pytest.mark.parametrize("case", list(BAD_REQUESTS))
def test_bad_request_through_generate_changes_nothing(engine: Engine, case: str) -> None:
    prompt, params, error = BAD_REQUESTS[case]
    before = state(engine)
    with pytest.raises(error):
        engine.generate([PROMPTS[0], prompt], [SAMPLED, params])
    assert_same_state(before, state(engine))


@pytest.mark.parametrize(
    ("prompts", "params", "message"),
    [
        (PROMPTS, [SAMPLED], "one SamplingParams per prompt"),
        ("12", SAMPLED, "list of prompts"),
    ],
    ids=["params-count", "prompts-a-string"],
)
def test_malformed_generate_call_changes_nothing(engine: Engine, prompts: Any, params: Any, message: str) -> None:
    before = state(engine)
    with pytest.raises(InvalidRequestError, match=message):
        engine.generate(prompts, params)
    assert_same_state(before, state(engine))


def test_busy_engine_refuses_generate_and_changes_nothing(engine: Engine) -> None:
    engine.add_request([3, 4], SAMPLED)
    engine.step()
    before = state(engine)
    with pytest.raises(InvalidRequestError, match="idle"):
        engine.generate(PROMPTS, SAMPLED)
    assert_same_state(before, state(engine))


def _all_pages_free(engine: Engine) -> bool:
    pools = [p for p in (engine.scheduler.target_pool, engine.scheduler.draft_pool) if p is not None]
    return all(p.num_free == p.num_pages and p.num_used == 0 for p in pools)


def test_finished_requests_leave_the_request_table(engine: Engine) -> None:
    ids = [engine.add_request(p, SamplingParams(max_tokens=4 + i)) for i, p in enumerate(PROMPTS)]
    while engine.has_unfinished():
        engine.step()
    assert engine._requests == {}
    assert _all_pages_free(engine)
    outputs = [engine.pop_output(i) for i in ids]
    assert [len(o.token_ids) for o in outputs] == [4, 5]
    assert not set(ids) & set(engine._outputs)
    with pytest.raises(InvalidRequestError):
        engine.pop_output(ids[0])


def test_aborted_requests_release_everything(make_pair) -> None:
    engine = Engine.from_pretrained(*make_pair(), config=EngineConfig(max_num_seqs=2))
    ids = [engine.add_request([1 + i, 2, 3], SamplingParams(max_tokens=20)) for i in range(4)]
    engine.step()
    engine.step()
    running, waiting = ids[0], ids[3]
    engine.abort(running)
    engine.abort(waiting)
    assert set(engine._requests) == {ids[1], ids[2]}
    held = sum(len(r.target_pages) for r in engine._requests.values())
    assert engine.scheduler.target_pool.num_used == held  # the aborted request's pages came back
    assert engine.output(running).finish_reason == "abort" and engine.output(waiting).token_ids == ()
    with pytest.raises(InvalidRequestError):
        engine.abort(running)
    while engine.has_unfinished():
        engine.step()
    assert engine._requests == {} and _all_pages_free(engine)
    # The survivor decoded exactly what it decodes alone.
    (alone,) = Engine.from_pretrained(*make_pair()).generate([[2, 2, 3]], SamplingParams(max_tokens=20))
    assert engine.output(ids[1]).token_ids == alone.token_ids


def test_abort_all_mid_generation_releases_everything(make_pair) -> None:
    engine = Engine.from_pretrained(*make_pair(), config=EngineConfig(max_num_seqs=2))
    for i in range(3):
        engine.add_request([1 + i, 2], SamplingParams(max_tokens=12, temperature=1.0, seed=i))
    engine.step()
    engine.abort_all()
    assert engine._requests == {} and not engine.has_unfinished() and _all_pages_free(engine)
    assert engine.scheduler.num_running == 0


def test_tiny_top_p_keeps_the_top_token() -> None:
    logits = torch.tensor([[0.3, 2.0, -1.0], [5.0, 5.0, 0.0]])
    probs = sampling_probs(logits, 1.0, top_p=1e-300)
    assert torch.equal(probs, torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]))


@pytest.mark.parametrize(
    "setting", [{"top_p": 1e-300}, {"temperature": MIN_TEMPERATURE}], ids=["top-p-1e-300", "min-temperature"]
)
def test_extreme_but_valid_settings_decode_like_greedy(make_pair, setting: dict[str, float]) -> None:
    """Both reduce sampling to the argmax (the pair's logits are far apart at T = 1e-4): no NaN, no crash."""
    engine = Engine.from_pretrained(*make_pair())
    greedy = engine.generate(PROMPTS, SamplingParams(max_tokens=10))
    sampled = engine.generate(PROMPTS, SamplingParams(max_tokens=10, seed=3, **{"temperature": 1.0, **setting}))
    assert [o.token_ids for o in sampled] == [o.token_ids for o in greedy]


def _with_eos(source: Path, tmp_path: Path, eos: object, file: str = "config.json") -> Path:
    folder = tmp_path / "target"
    shutil.copytree(source, folder)
    path = folder / file
    config = json.loads(path.read_text()) if path.is_file() else {}
    config["eos_token_id"] = eos
    path.write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize("file", ["config.json", "generation_config.json"])
def test_eos_ends_generation_unless_ignored(make_pair, tmp_path: Path, file: str) -> None:
    target_dir, draft_dir = make_pair()
    params = SamplingParams(max_tokens=16)
    (plain,) = Engine.from_pretrained(target_dir, draft_dir).generate([PROMPTS[0]], params)
    eos = plain.token_ids[5]
    cut = plain.token_ids.index(eos) + 1
    engine = Engine.from_pretrained(_with_eos(target_dir, tmp_path, [eos, 63], file), draft_dir)
    (stopped,) = engine.generate([PROMPTS[0]], params)
    assert stopped.token_ids == plain.token_ids[:cut] and stopped.finish_reason == "stop"
    (ignored,) = engine.generate([PROMPTS[0]], SamplingParams(max_tokens=16, ignore_eos=True))
    assert ignored.token_ids == plain.token_ids and ignored.finish_reason == "length"


BAD_EOS: dict[str, tuple[object, str]] = {
    "outside-vocab": (64, "outside the vocab"),
    "string": ("2", "must be a list of integers"),
    "float-in-list": ([2.0], "must be an integer"),
}


@pytest.mark.parametrize("case", list(BAD_EOS))
@pytest.mark.parametrize("file", ["config.json", "generation_config.json"])
def test_bad_eos_is_refused_by_name(make_pair, tmp_path: Path, case: str, file: str) -> None:
    eos, message = BAD_EOS[case]
    target_dir, _ = make_pair()
    with pytest.raises(RunnerError, match=message) as refused:
        Engine.from_pretrained(_with_eos(target_dir, tmp_path, eos, file))
    assert "eos_token_id" in str(refused.value)
