"""The DFlash2 drafts come from the candidate walk, not from a per-slot argmax.

Hooks on the draft record, for every draft call, the anchors, the block hidden states and the (scaled) draft
logits. From them the test computes the per-slot argmax and, independently of the runner, the walk:

    x_0 = anchor;  x_t = argmax over c in topk(logits_t) of  logits_t[c] + <P[x_{t-1}] * (W h_t), S[c]>

with P, S the predecessor and successor codebooks and W the hidden projection. Every drafted block must be the
walk; on this pair (codebooks scaled so that the pairwise term matters) many must differ from the argmax.
"""

from __future__ import annotations

import pytest
import torch

from runner import Engine, EngineConfig, SamplingParams

PROMPTS = [[1, 2, 3, 4, 5], [0, 3], [5, 4, 3, 2, 1, 0, 1], [3, 2, 4], [2]]
MAX_TOKENS = [16, 9, 13, 16, 11]  # different budgets: the rows' block sizes differ near their ends


@torch.inference_mode()
def expected_walk(draft, hidden: torch.Tensor, logits: torch.Tensor, anchors: torch.Tensor) -> torch.Tensor:
    """hidden: [R, N, H]; logits: [R, N, V]; anchors: [R] -> the greedy walk [R, N]."""
    selector = draft.candidate_selector
    predecessor = selector.predecessor_codebook.weight  # [V, rank]
    successor = selector.successor_codebook.weight  # [V, rank]
    projected = hidden @ selector.hidden_projection.weight.T  # [R, N, rank]
    unary, candidates = logits.topk(selector.top_k, dim=-1)  # [R, N, k]
    previous, path = anchors, []
    for t in range(hidden.shape[1]):
        query = predecessor[previous] * projected[:, t]  # [R, rank]
        scores = unary[:, t] + (query[:, None, :] * successor[candidates[:, t]]).sum(-1)  # [R, k]
        previous = candidates[:, t].gather(1, scores.argmax(-1, keepdim=True))[:, 0]
        path.append(previous)
    return torch.stack(path, dim=1)


@torch.inference_mode()
def traced_draft_calls(engine: Engine, prompts: list[list[int]], params: list[SamplingParams]):
    """Runs generate with hooks; yields (drafted ids, walk, argmax) per row of every draft call."""
    draft = engine.draft
    assert draft is not None
    calls: list[dict[str, object]] = []

    def record_hidden(module, args, hidden) -> None:
        calls.append({"step": engine.num_steps, "anchors": args[0].block_ids[:, 0].clone(), "hidden": hidden[:, 1:]})

    logits_of = draft.logits

    def record_logits(hidden, lm_head):
        logits = logits_of(hidden, lm_head)
        calls[-1]["logits"] = logits
        return logits

    handle = draft.register_forward_hook(record_hidden)
    draft.logits = record_logits
    try:
        engine.generate(prompts, params)
    finally:
        handle.remove()
        del draft.logits
    assert engine.trace is not None
    rows = []
    for call in calls:
        walk = expected_walk(draft, call["hidden"], call["logits"], call["anchors"])
        argmax = call["logits"].argmax(-1)
        for record in (r for r in engine.trace.records if r.step == call["step"]):
            n = len(record.drafted_ids)
            rows.append((list(record.drafted_ids), walk[record.row, :n].tolist(), argmax[record.row, :n].tolist()))
    return rows


@pytest.mark.parametrize("block_size", [3, 6], ids=lambda b: f"B{b}")
@pytest.mark.parametrize("batched", [False, True], ids=["alone", "batched"])
def test_drafts_are_the_walk_not_the_argmax(walk_pair, block_size: int, batched: bool) -> None:
    engine = Engine.from_pretrained(*walk_pair, config=EngineConfig(block_size=block_size, trace=True))
    params = [SamplingParams(max_tokens=m) for m in MAX_TOKENS]
    if batched:
        rows = traced_draft_calls(engine, PROMPTS, params)
    else:
        rows = [
            row for prompt, p in zip(PROMPTS, params, strict=True) for row in traced_draft_calls(engine, [prompt], [p])
        ]
    assert rows
    for drafted, walk, _ in rows:
        assert drafted == walk
    differing = sum(drafted != argmax for drafted, _, argmax in rows)
    assert differing >= len(rows) // 4, f"the walk left the argmax in only {differing} of {len(rows)} drafts"
