"""Gate: op-level numerics. The production paged path's draft block logits and target logits equal, within a
float32 tolerance, those of an independent dense implementation (tests/gates/dense_reference.py) on the same
inputs, at every step of a real run with rows moving.

This is the gate that sees attention bugs the tokens never show: a forced-causal block mask, a skipped paged
K/V write or a read bound that drops the block rows all move the logits while the greedy tokens stay right.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from dense_reference import Checkpoint, draft_block_logits, target_forward
from gatekit import FIXTURE, greedy, make_engine, row_owners

pytestmark = pytest.mark.gate

ATOL = 2e-4


@pytest.fixture(scope="module")
def checkpoints() -> tuple[Checkpoint, Checkpoint]:
    return Checkpoint(FIXTURE / "target"), Checkpoint(FIXTURE / "draft")


def run_with_hooks(prompts: list[list[int]], fixture: Path = FIXTURE):
    """Runs a batch that moves rows and records, for every draft and target call, its inputs, its output and
    which request sat in each of its rows (a call's rows are the last R occupied rows at that moment)."""
    engine = make_engine(fixture=fixture, max_num_seqs=3, page_size=4)
    draft_calls, target_calls = [], []

    engine.draft.register_forward_hook(
        lambda m, args, out: draft_calls.append((args[0], out.clone(), row_owners(engine, out.shape[0])))
    )
    engine.target.register_forward_hook(
        lambda m, args, out: target_calls.append((args[0], out[0].clone(), row_owners(engine, out[0].shape[0])))
    )
    ids = [engine.add_request(p, greedy(max_tokens=6 + 4 * i)) for i, p in enumerate(prompts)]
    while engine.has_unfinished():
        engine.step()
    assert engine.trace is not None and engine.trace.row_moves
    full = {i: list(engine.output(i).prompt_ids) + list(engine.output(i).token_ids) for i in ids}
    return engine, draft_calls, target_calls, full


def test_draft_block_logits_match_dense_reference(prompts: list[list[int]], checkpoints) -> None:
    compare_draft_logits(prompts[:5], *checkpoints, FIXTURE)


def test_draft_logits_scaled_and_capped_as_configured(prompts: list[list[int]], tmp_path: Path) -> None:
    """The shipped draft has output_multiplier 1 and no soft-cap, so dropping either changes nothing there; a
    private copy whose config sets both must still match the dense reference, which applies them."""
    shutil.copytree(FIXTURE, tmp_path / "fx")
    config = tmp_path / "fx" / "draft" / "config.json"
    cfg = json.loads(config.read_text())
    cfg["dflash_config"].update(output_multiplier=0.6, final_logit_softcapping=4.0)
    config.write_text(json.dumps(cfg))
    target_ck, draft_ck = Checkpoint(tmp_path / "fx" / "target"), Checkpoint(tmp_path / "fx" / "draft")
    compare_draft_logits(prompts[:3], target_ck, draft_ck, tmp_path / "fx")


def compare_draft_logits(prompts: list[list[int]], target_ck: Checkpoint, draft_ck: Checkpoint, fixture: Path) -> None:
    engine, draft_calls, _, full = run_with_hooks(prompts, fixture)
    compared = 0
    for inputs, hidden, owner in draft_calls:
        with torch.inference_mode():
            logits = engine.draft.logits(hidden[:, 1:], engine.target.lm_head)
        for row, rid in enumerate(owner):
            L = int(inputs.block_positions[row, 0])
            size = int(inputs.block_valid[row].sum())
            expected = draft_block_logits(draft_ck, target_ck, full[rid][:L], full[rid][L], size)
            diff = (logits[row, : size - 1].float().cpu() - expected).abs().max().item()
            assert diff <= ATOL, (
                f"request {rid}: draft block logits at L={L} differ from the dense reference by {diff:.2e}"
            )
            compared += 1
    assert compared >= 3 * len(prompts), f"only {compared} drafted blocks compared"


def test_target_logits_match_dense_reference(prompts: list[list[int]], checkpoints) -> None:
    target_ck, _ = checkpoints
    engine, _, target_calls, full = run_with_hooks(prompts[:3])
    compared = 0
    for inputs, logits, owner in target_calls:
        for row, rid in enumerate(owner):
            n = int(inputs.valid[row].sum())
            start = int(inputs.positions[row, 0])
            block = inputs.input_ids[row, :n].tolist()
            ref, _ = target_forward(target_ck, full[rid][:start] + block)
            prefill = logits.shape[1] == 1  # prefill keeps only the last position's logits
            got = logits[row, :1] if prefill else logits[row, :n]
            want = ref[start + n - 1 : start + n] if prefill else ref[start : start + n]
            diff = (got.float().cpu() - want).abs().max().item()
            assert diff <= ATOL, f"request {rid}: target logits at {start}..{start + n - 1} differ by {diff:.2e}"
            compared += 1
    assert compared >= 10


def test_pending_context_is_the_committed_tokens_features(prompts: list[list[int]], checkpoints) -> None:
    """After every step, each row's pending draft context is the dense target's tapped features of its committed
    tokens at exactly the pending positions: checked before the next draft reads it."""
    target_ck, draft_ck = checkpoints
    layer_ids = draft_ck.cfg["dflash_config"]["target_layer_ids"]
    engine = make_engine(max_num_seqs=3, page_size=4)
    for i, p in enumerate(prompts[:5]):
        engine.add_request(p, greedy(max_tokens=6 + 4 * i))
    compared = 0
    while engine.has_unfinished():
        engine.step()
        rows = engine.rows
        for row in range(rows.num_rows):
            request = rows.requests[row]
            pending, positions = rows.pending[row], rows.pending_positions[row]
            assert request is not None and pending is not None and positions is not None
            committed = request.token_ids[:-1]  # the anchor has no features yet
            _, layer_outs = target_forward(target_ck, committed)
            want = torch.cat([layer_outs[i] for i in layer_ids], -1)[positions.tolist()]
            assert pending.shape == want.shape, (
                f"request {request.request_id}: pending context {tuple(pending.shape)} at {positions.tolist()}"
            )
            diff = (pending.float().cpu() - want).abs().max().item()
            assert diff <= ATOL, (
                f"request {request.request_id}: pending features at {positions.tolist()} differ from the committed "
                f"tokens' by {diff:.2e}"
            )
            compared += 1
    assert compared >= 15
