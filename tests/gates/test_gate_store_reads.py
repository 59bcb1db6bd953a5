"""Gate: a request drafts from its own whole draft store, whatever happens to the batch around it.

On the copy fixture the block drafted after L repeats positions L + 1 - P .., which sit far back in the draft's
store (P = 20 > block + pending rows + 8), so a draft that reads a wiped, windowed, shifted or foreign store
drafts other tokens: the wrong context is visible in the drafted blocks, not only in acceptance. Each test
first proves on its control run that the store bug it guards against changes most drafted blocks (re-drafting
the control's steps from the perturbed store) and refuses to pass otherwise; then it compares the production
run with the control step by step.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from gatekit import (
    COPY,
    COPY2,
    assert_discriminates,
    assert_same_drafts,
    greedy,
    make_engine,
    redraft,
    redraft_logits,
    right_context,
    row_owners,
    wiped_store,
)

from runner.target import full_forward

pytestmark = pytest.mark.gate

WINDOW = 4 + 8  # block size + 8: a store that keeps only its last W positions
OFFSET = 4  # a store whose rows sit 4 positions early


def windowed_store(f: torch.Tensor, L: int, S: int) -> tuple[torch.Tensor, torch.Tensor]:
    start = max(0, S - WINDOW)
    return f[start:L], torch.arange(start, L)


def offset_store(f: torch.Tensor, L: int, S: int) -> tuple[torch.Tensor, torch.Tensor]:
    positions = torch.arange(L)
    positions[:S] -= OFFSET
    return f[:L], positions


def solo(prompt: list[int], max_tokens: int, fixture: Path = COPY, **config: object):
    engine = make_engine(fixture=fixture, **config)
    (out,) = engine.generate([prompt], greedy(max_tokens=max_tokens))
    ids = list(out.prompt_ids) + list(out.token_ids)
    return engine, ids, engine.trace.for_request(out.request_id)


def stored_steps(records):
    """The steps drafted while the store holds something (the first draft after prefill reads pending rows only)."""
    return [r for r in records if r.store_len_before > 0]


@pytest.mark.parametrize("fixture", [COPY, COPY2], ids=["copy-dflash", "copy-dflash2"])
def test_survivors_draft_like_their_solo_runs(copy_prompts: list[list[int]], fixture: Path) -> None:
    """Row compaction: request 0 finishes after a step or two, the survivors move down a row and a waiting
    request joins; every survivor's drafted blocks (DFlash2: the candidate walk's) equal its solo run's, step by
    step."""
    budgets = [4, 28, 28, 28, 20]
    engine = make_engine(fixture=fixture, max_num_seqs=4, page_size=4)
    ids = [engine.add_request(p, greedy(max_tokens=n)) for p, n in zip(copy_prompts, budgets, strict=False)]
    while engine.has_unfinished():
        engine.step()
    moved = {rid for _, rid, _, _ in engine.trace.row_moves}
    assert {ids[1], ids[2], ids[3]} <= moved, f"the scenario must move every survivor: moves {engine.trace.row_moves}"
    for i in range(1, 5):
        control, full, records = solo(copy_prompts[i], budgets[i], fixture)
        stored = stored_steps(records)
        # A store reset when the row moves leaves only the pending rows: the control must see that.
        assert_discriminates(
            redraft(control, full, stored, right_context),
            redraft(control, full, stored, wiped_store),
            f"request {i}: a wiped store",
            at_least=0.8,
        )
        assert engine.output(ids[i]).token_ids == tuple(full[len(copy_prompts[i]) :])
        assert_same_drafts(
            engine.trace.drafted_blocks(ids[i]), control.trace.drafted_blocks(records[0].request_id), f"survivor {i}"
        )


PERTURBATIONS = {"window": windowed_store, "offset": offset_store}


@pytest.mark.parametrize("perturbation", sorted(PERTURBATIONS))
def test_long_context_drafts_like_dense(copy_prompts: list[list[int]], perturbation: str) -> None:
    """The paged store against an arm that has none: requests batched two at a time on 4-slot pages (rows join
    and move) draft, step by step, what the dense path drafts for each alone (it recomputes the context's K/V
    from every committed feature). A store that drops or shifts its far-back rows fails here even when it
    fails the same way alone."""
    budgets = [28, 20, 28, 24]
    engine = make_engine(fixture=COPY, max_num_seqs=2, page_size=4)
    ids = [engine.add_request(p, greedy(max_tokens=n)) for p, n in zip(copy_prompts, budgets, strict=False)]
    while engine.has_unfinished():
        engine.step()
    assert engine.trace.row_moves, "the scenario must move rows"
    for i, request_id in enumerate(ids):
        control, full, records = solo(copy_prompts[i], budgets[i], draft_attention="dense")
        stored = stored_steps(records)
        assert_discriminates(
            redraft(control, full, stored, right_context),
            redraft(control, full, stored, PERTURBATIONS[perturbation]),
            f"request {i}: a {perturbation} store",
        )
        assert_same_drafts(
            engine.trace.drafted_blocks(request_id),
            control.trace.drafted_blocks(records[0].request_id),
            f"request {i} paged batched vs dense solo",
        )


def test_rows_sharing_recent_tokens_draft_apart(copy_prompts: list[list[int]]) -> None:
    """Two requests whose newest 6 tokens are the same and whose earlier segments differ, batched: each drafts
    what it drafts alone. A store read by the wrong row (shared or swapped) would draft the other's copy."""
    first = copy_prompts[0]
    second = copy_prompts[5][: len(first) - 6] + first[-6:]
    assert len(second) == len(first) and second[:-6] != first[:-6]
    engine = make_engine(fixture=COPY, max_num_seqs=2, page_size=4)
    ids = [engine.add_request(p, greedy(max_tokens=24)) for p in (first, second)]
    while engine.has_unfinished():
        engine.step()
    runs = [solo(p, 24) for p in (first, second)]
    for i, (control, full, records) in enumerate(runs):
        _, partner, _ = runs[1 - i]
        stored = stored_steps(records)
        other = features(control, partner)

        def swapped(f: torch.Tensor, L: int, S: int, other=other) -> tuple[torch.Tensor, torch.Tensor]:
            n = min(S, other.shape[0])
            return torch.cat([other[:n], f[n:L]]), torch.arange(L)

        assert_discriminates(
            redraft(control, full, stored, right_context),
            redraft(control, full, stored, swapped),
            f"request {i}: the partner's store",
        )
        assert_same_drafts(
            engine.trace.drafted_blocks(ids[i]), control.trace.drafted_blocks(records[0].request_id), f"row {i}"
        )


def features(engine, ids: list[int]) -> torch.Tensor:
    """The tapped target features of a whole sequence: [T, F]."""
    with torch.inference_mode():
        return full_forward(
            engine.target, torch.tensor([ids], device=engine.device), engine.draft.config.target_layer_ids
        )[1][0]


LOGITS_ATOL = 1e-4


def test_paged_block_logits_match_dense(copy_prompts: list[list[int]]) -> None:
    """Paged batched vs dense solo on the draft's block logits at every step (not only the argmax): a store
    read that moves a logit without flipping a token fails here. The window perturbation must move the logits
    by far more than the tolerance, or the tolerance proves nothing."""
    budgets = [4, 24, 20]  # the first row finishes first: the second moves down
    paged: dict[tuple[int, int], torch.Tensor] = {}
    engine = make_engine(fixture=COPY, max_num_seqs=2, page_size=4)

    def keep(module, args, out) -> None:
        inputs = args[0]
        with torch.inference_mode():
            logits = module.logits(out[:, 1:], engine.target.lm_head)
        for row, rid in enumerate(row_owners(engine, out.shape[0])):
            size = int(inputs.block_valid[row].sum())
            paged[(rid, int(inputs.block_positions[row, 0]))] = logits[row, : size - 1].clone()

    engine.draft.register_forward_hook(keep)
    ids = [engine.add_request(p, greedy(max_tokens=n)) for p, n in zip(copy_prompts, budgets, strict=False)]
    while engine.has_unfinished():
        engine.step()
    assert engine.trace.row_moves
    compared = 0
    for i, request_id in enumerate(ids):
        control, full, records = solo(copy_prompts[i], budgets[i], draft_attention="dense")
        right = [logits[0] for _, logits in redraft_logits(control, full, records, right_context)]
        moved = [logits[0] for _, logits in redraft_logits(control, full, records, windowed_store)]
        stored = [r.store_len_before > 0 for r in records]
        far = [(m - r).abs().max().item() for m, r, s in zip(moved, right, stored, strict=True) if s]
        if sum(d > 100 * LOGITS_ATOL for d in far) < 0.5 * len(far):
            pytest.fail(f"comparison refused: request {i}: a windowed store moves the logits only by {far}")
        for r, expected in zip(records, right, strict=True):
            got = paged[(request_id, r.committed_len)]
            diff = (got - expected).abs().max().item()
            assert diff <= LOGITS_ATOL, f"request {i}: paged block logits at L={r.committed_len} differ by {diff:.2e}"
            compared += 1
    assert compared >= 10
