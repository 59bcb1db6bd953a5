"""Helpers every gate shares: the shipped fixture's location, engines over it, and the comparison helper that
refuses to compare degenerate (constant) sequences.

Fixtures that run the engine are function-scoped: mutmut (`dflash sweep`) maps each runner function to the
tests that were running when it was called, so work done once in a module-scoped fixture would be credited to
the first test only, and a mutant would then be checked against that one test.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import torch

import runner.engine
from runner import Engine, EngineConfig, SamplingParams
from runner.draft import DraftInputs
from runner.target import full_forward
from runner.trace import StepRecord

FIXTURES = Path(__file__).resolve().parents[2] / "runner" / "fixtures"
# The default pair: a copy language whose drafted block is held far back in the draft's store.
COPY = FIXTURES / "copy-dflash"
COPY2 = FIXTURES / "copy-dflash2"
STRIDE = FIXTURES / "stride-dflash"
STRIDE2 = FIXTURES / "stride-dflash2"
# The gates written for the stride pair stay on it: moved to the copy pair (one full `dflash verify`), the
# acceptance, paths and store gates lost four pinned kills, two of them to timeouts (see docs/concepts/fixtures.md).
# The store gates (test_gate_store_reads) run on the copy pair.
FIXTURE = STRIDE
FIXTURE2 = STRIDE2  # the DFlash2 pair: conv layers and the candidate walk
MAX_TOKENS = 24
# The one place the gates choose their device: `dflash verify --device cuda` sets DFLASH_DEVICE in each child
# (with its own CUDA_VISIBLE_DEVICES), so a user's GPU path is what the gates exercise. Tensors a gate builds
# to drive an engine follow `engine.device`; its dense oracles stay on the CPU and compare after `.cpu()`.
DEVICE = os.environ.get("DFLASH_DEVICE", "cpu")


def make_engine(draft: bool = True, fixture: Path = FIXTURE, **config: object) -> Engine:
    options = {"trace": True, **config}
    return Engine.from_pretrained(
        fixture / "target",
        fixture / "draft" if draft else None,
        device=DEVICE,
        config=EngineConfig(**options),  # type: ignore[arg-type]
    )


def greedy(max_tokens: int = MAX_TOKENS, **changes: object) -> SamplingParams:
    return SamplingParams(max_tokens=max_tokens, **changes)  # type: ignore[arg-type]


def assert_not_degenerate(blocks: Sequence[tuple[int, ...]], what: str) -> None:
    """A comparison arm must carry information: several steps, mostly distinct blocks, more than one id.

    A fixture that drafts the same block at every step makes any drafted-block comparison a tautology.
    """
    if len(blocks) < 3:
        pytest.fail(f"degenerate comparison refused: {what} has only {len(blocks)} drafted steps")
    distinct = len(set(blocks)) / len(blocks)
    ids = {t for b in blocks for t in b}
    if distinct < 0.5 or len(ids) < 3:
        pytest.fail(
            f"degenerate comparison refused: {what} drafts {len(set(blocks))} distinct blocks in {len(blocks)} "
            f"steps over {len(ids)} ids; a constant arm cannot tell a right context from a wrong one"
        )


def assert_same_drafts(actual: Sequence[tuple[int, ...]], expected: Sequence[tuple[int, ...]], what: str) -> None:
    assert_not_degenerate(actual, f"{what} (actual)")
    assert_not_degenerate(expected, f"{what} (expected)")
    for step, (a, e) in enumerate(zip(actual, expected, strict=False)):
        assert a == e, f"{what}: drafted block differs at step {step}: {a} != {e}"
    assert len(actual) == len(expected), f"{what}: {len(actual)} drafted steps != {len(expected)}"


def row_owners(engine: Engine, num_rows: int) -> list[int]:
    """The request ids in the rows of a forward call over `num_rows` rows, read from inside a forward hook: a
    call's rows are the last `num_rows` occupied rows (prefill adds rows at the end; decode runs them all)."""
    active = [r.request_id for r in engine.rows.requests[: engine.rows.num_rows] if r is not None]
    return active[len(active) - num_rows :]


# (features [L, F], L, store length S) -> the context a draft reads: features [C, F] and their positions [C].
Context = Callable[[torch.Tensor, int, int], tuple[torch.Tensor, torch.Tensor]]


def right_context(f: torch.Tensor, L: int, S: int) -> tuple[torch.Tensor, torch.Tensor]:
    return f[:L], torch.arange(L)


def wiped_store(f: torch.Tensor, L: int, S: int) -> tuple[torch.Tensor, torch.Tensor]:
    return f[S:L], torch.arange(S, L)  # what a reset store leaves: the pending rows only


def redraft_logits(
    engine: Engine, ids: Sequence[int], records: Sequence[StepRecord], context: Context
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each traced step's block drafted again by the engine's draft module on its dense path, from the context
    `context` builds out of the request's own committed features: per step (block hidden states [1, B-1, H],
    block logits [1, B-1, V]), the arm a perturbed store would give."""
    draft = engine.draft
    assert draft is not None
    dev = engine.device
    out = []
    with torch.inference_mode():
        _, taps = full_forward(engine.target, torch.tensor([list(ids)], device=dev), draft.config.target_layer_ids)
        assert taps is not None
        for r in records:
            L, size = r.committed_len, r.positions[1] - r.positions[0] + 1
            features, positions = context(taps[0], L, r.store_len_before)
            block_ids = torch.full((1, size), draft.config.mask_token_id, device=dev)
            block_ids[0, 0] = ids[L]
            inputs = DraftInputs(
                features[None],
                positions.to(dev)[None],
                torch.ones(1, positions.numel(), dtype=torch.bool, device=dev),
                block_ids,
                L + torch.arange(size, device=dev)[None],
                torch.ones(1, size, dtype=torch.bool, device=dev),
            )
            hidden = draft(inputs, engine.target.model.embed_tokens, None)[:, 1:]
            out.append((hidden, draft.logits(hidden, engine.target.lm_head)))
    return out


def redraft(
    engine: Engine, ids: Sequence[int], records: Sequence[StepRecord], context: Context
) -> list[tuple[int, ...]]:
    """The drafted blocks of `redraft_logits` (DFlash2: the candidate walk's, as the engine drafts them)."""
    draft = engine.draft
    assert draft is not None
    blocks = []
    for r, (hidden, logits) in zip(records, redraft_logits(engine, ids, records, context), strict=True):
        if draft.candidate_selector is None:
            path = logits.argmax(-1)
        else:
            with torch.inference_mode():
                anchors = torch.tensor([ids[r.committed_len]], device=engine.device)
                path, _, _ = draft.candidate_selector.walk(hidden, logits, anchors, [0.0], [None])
        blocks.append(tuple(path[0].tolist()))
    return blocks


def share_differing(a: Sequence[tuple[int, ...]], b: Sequence[tuple[int, ...]]) -> float:
    return sum(x != y for x, y in zip(a, b, strict=True)) / max(len(a), 1)


def assert_discriminates(
    control: Sequence[tuple[int, ...]], perturbed: Sequence[tuple[int, ...]], what: str, at_least: float = 0.5
) -> None:
    """Refuses a comparison that could not fail: the perturbation it guards against must change at least
    `at_least` of the control's drafted blocks, or an equality of the two arms proves nothing."""
    assert_not_degenerate(control, f"{what} (control)")
    share = share_differing(control, perturbed)
    if share < at_least:
        pytest.fail(
            f"comparison refused: {what} changes only {share:.0%} of the control's drafted blocks "
            f"(needs {at_least:.0%}); this fixture and scenario cannot see that bug"
        )


def rejection_calls(engine, prompts: list[list[int]], params: list[SamplingParams], monkeypatch):
    """Runs the batch and records every call of the acceptance rule: the request (found by its generator), its
    tokens up to the anchor at that moment, and the drafted ids, p and q the rule was handed."""
    calls = []
    accept = runner.engine.rejection_accept
    owners: dict[int, int] = {}

    def spy(drafted, target_probs, draft_probs, draft_indices, generator):
        request = engine._requests[owners[id(generator)]]
        prefix = list(request.token_ids[: request.num_committed + 1])
        calls.append(
            (request.request_id, prefix, [int(t) for t in drafted], target_probs.clone(), draft_probs, draft_indices)
        )
        return accept(drafted, target_probs, draft_probs, draft_indices, generator)

    monkeypatch.setattr(runner.engine, "rejection_accept", spy)
    for prompt, p in zip(prompts, params, strict=True):
        rid = engine.add_request(prompt, p)
        owners[id(engine._requests[rid].generator)] = rid
    while engine.has_unfinished():
        engine.step()
    return calls


def assert_refused(kind: type[Exception], match: str, call: Callable[[], object]) -> None:
    """The gate's check that `call` is refused by name: the named error with a matching message.

    Anything else escaping (a raw JSONDecodeError, a torch RuntimeError from a late shape check) is this check
    failing, so it is reported as an assertion, not left to escape as an unrelated exception.
    """
    try:
        call()
    except kind as error:
        assert re.search(match, str(error)), f"{kind.__name__} raised, but {str(error)!r} does not match {match!r}"
        return
    except Exception as error:
        got = f"{type(error).__name__}: {error}"
        raise AssertionError(f"expected a named {kind.__name__} ({match!r}), got {got}") from error
    raise AssertionError(f"expected a named {kind.__name__} ({match!r}); nothing was raised")
