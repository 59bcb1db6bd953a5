"""The fixture audit: proves a fixture pair can discriminate a right draft context from a wrong one.

It drives the production runner (paged engine, greedy) over the fixture's audit prompts and records every
drafted block. Then, for each request, it replays the same decode with the production draft module fed a
perturbed context (store reset to empty, another request's context, positions shifted by one), a forced-causal
block mask, or slightly perturbed weights, and measures how often the drafted block changes and what the
acceptance length becomes. Greedy verification is lossless, so the target's continuation is the same under
every perturbation and acceptance can be replayed exactly against it.
"""

from __future__ import annotations

import copy
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import torch

import runner.draft
from runner import Engine, EngineConfig, SamplingParams
from runner.draft import DFlashDraft, DraftInputs, DraftLayer
from runner.layers import attention_mask
from runner.target import full_forward
from verify.thresholds import Figure, Threshold, thresholds_for

# Store perturbations, each measured per block position: (a) the store wiped, pending rows kept; (b) the store
# keeps only its last block + 8 positions; (c) the stored rows sit 4 positions early (the first 4 dropped, the
# rest shifted onto their slots); (c') the first 4 stored positions dropped, the rest in place; (d) the store
# swapped with one of another request that shares the newest 4 stored tokens.
STORE_PERTURBATIONS = ("wiped", "window", "offset", "drop_first", "swap_recent")
STORE_WINDOW_EXTRA = 8
STORE_OFFSET = 4
SHARED_RECENT = 4


@dataclass(frozen=True, slots=True)
class Step:
    committed: int  # L: the anchor's position
    pending_from: int  # first position not yet in the draft store (the previous step's L)
    size: int  # block size of this verify step


@dataclass(frozen=True, slots=True)
class AuditReport:
    fixture: str
    figures: tuple[Figure, ...]

    @property
    def passed(self) -> bool:
        return all(f.passed for f in self.figures)

    @property
    def failed(self) -> tuple[Figure, ...]:
        return tuple(f for f in self.figures if not f.passed)

    def value(self, name: str) -> float:
        return next(f.value for f in self.figures if f.name == name)

    def to_dict(self) -> dict[str, object]:
        return {
            "schema": "dflash-fixture-audit/1",
            "fixture": self.fixture,
            "passed": self.passed,
            "figures": [f.to_dict() for f in self.figures],
        }


ContextFn = Callable[[int, int, int], tuple[torch.Tensor, torch.Tensor]]


def _draft_blocks(
    draft: DFlashDraft, engine: Engine, ids: torch.Tensor, steps: list[Step], context: ContextFn
) -> tuple[list[tuple[int, ...]], list[float], list[tuple[int, ...]]]:
    """Drafted blocks, top-1 minus top-2 logit margins, and the per-slot argmax blocks at each step, through the
    dense draft path (for DFlash2 the drafted block is the candidate walk's, never the argmax)."""
    block_size = max(s.size for s in steps)
    feats, poss = zip(*(context(i, s.committed, s.pending_from) for i, s in enumerate(steps)), strict=True)
    width = max(f.shape[0] for f in feats)  # 0 when every context is empty: the block attends to itself only
    n = len(steps)
    features = torch.zeros(n, width, feats[0].shape[-1], dtype=feats[0].dtype)
    positions = torch.zeros(n, width, dtype=torch.long)
    valid = torch.zeros(n, width, dtype=torch.bool)
    for i, (f, p) in enumerate(zip(feats, poss, strict=True)):
        features[i, : f.shape[0]], positions[i, : f.shape[0]], valid[i, : f.shape[0]] = f, p, True
    committed = torch.tensor([s.committed for s in steps])
    block_positions = committed[:, None] + torch.arange(block_size)
    block_ids = torch.full((n, block_size), draft.config.mask_token_id)
    block_ids[:, 0] = ids[committed]
    sizes = torch.tensor([s.size for s in steps])
    inputs = DraftInputs(
        features, positions, valid, block_ids, block_positions, torch.arange(block_size)[None] < sizes[:, None]
    )
    with torch.inference_mode():
        hidden = draft(inputs, engine.target.model.embed_tokens, None)
        logits = draft.logits(hidden[:, 1:], engine.target.lm_head).float()
        top2 = logits.topk(2, dim=-1).values
        margins = (top2[..., 0] - top2[..., 1]).flatten().tolist()
        argmax = logits.argmax(-1).tolist()
        greedy = argmax
        if draft.candidate_selector is not None:
            path, _, _ = draft.candidate_selector.walk(hidden[:, 1:], logits, block_ids[:, 0], [0.0] * n, [None] * n)
            greedy = path.tolist()

    def cut(rows: list[list[int]]) -> list[tuple[int, ...]]:
        return [tuple(rows[i][: s.size - 1]) for i, s in enumerate(steps)]

    return cut(greedy), margins, cut(argmax)


def _replay(
    draft: DFlashDraft, engine: Engine, ids: torch.Tensor, prompt_len: int, max_len: int, block: int, context: ContextFn
) -> list[int]:
    """The acceptance lengths greedy decoding would have with this draft context (target output is fixed)."""
    accepted: list[int] = []
    committed, pending_from = prompt_len, 0
    while committed + 1 < max_len:
        size = min(block, max_len - committed)
        (drafted,), _, _ = _draft_blocks(draft, engine, ids, [Step(committed, pending_from, size)], context)
        truth = ids[committed + 1 : committed + size].tolist()
        match = 0
        while match < len(drafted) and drafted[match] == truth[match]:
            match += 1
        produced = min(match + 1, max_len - committed - 1)
        accepted.append(produced)
        pending_from, committed = committed, committed + produced
    return accepted


def _store_contexts(
    engine: Engine, ids: torch.Tensor, f: torch.Tensor, other_ids: torch.Tensor, window: int
) -> dict[str, ContextFn]:
    """The store perturbations: each keeps the pending rows [S, L) and changes only the stored rows [0, S)."""
    donors: dict[int, torch.Tensor] = {}
    taps = engine.draft.config.target_layer_ids if engine.draft is not None else ()

    def donor(S: int) -> torch.Tensor:
        # Another request's tokens up to the newest SHARED_RECENT stored ones, which stay this request's own.
        if S not in donors:
            mixed = ids.clone()
            cut = min(max(0, S - SHARED_RECENT), other_ids.shape[0])
            mixed[:cut] = other_ids[:cut]
            with torch.inference_mode():
                donors[S] = full_forward(engine.target, mixed[None], taps)[1][0]  # type: ignore[index]
        return donors[S]

    def wiped(_: int, L: int, S: int) -> tuple[torch.Tensor, torch.Tensor]:
        return f[S:L], torch.arange(S, L)

    def windowed(_: int, L: int, S: int) -> tuple[torch.Tensor, torch.Tensor]:
        start = max(0, S - window)
        return f[start:L], torch.arange(start, L)

    def offset(_: int, L: int, S: int) -> tuple[torch.Tensor, torch.Tensor]:
        positions = torch.arange(L)
        positions[:S] -= STORE_OFFSET
        return f[:L], positions

    def drop_first(_: int, L: int, S: int) -> tuple[torch.Tensor, torch.Tensor]:
        start = min(STORE_OFFSET, S)
        return f[start:L], torch.arange(start, L)

    def swap_recent(_: int, L: int, S: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.cat([donor(S)[:S], f[S:L]]), torch.arange(L)

    return {"wiped": wiped, "window": windowed, "offset": offset, "drop_first": drop_first, "swap_recent": swap_recent}


def _contexts(f: torch.Tensor, other: torch.Tensor) -> dict[str, ContextFn]:
    """The draft contexts the audit compares, each (step, L, pending_from) -> (features, positions)."""

    def right(_: int, L: int, __: int) -> tuple[torch.Tensor, torch.Tensor]:
        return f[:L], torch.arange(L)

    def reset(_: int, L: int, __: int) -> tuple[torch.Tensor, torch.Tensor]:
        return f[:0], torch.arange(0)  # the store reset to empty and nothing pending

    def pending_only(_: int, L: int, pending_from: int) -> tuple[torch.Tensor, torch.Tensor]:
        return f[pending_from:L], torch.arange(pending_from, L)  # the store emptied, pending rows kept

    def swap(_: int, L: int, __: int) -> tuple[torch.Tensor, torch.Tensor]:
        n = min(L, other.shape[0])
        return other[:n], torch.arange(n)  # another request's context

    def shift(_: int, L: int, __: int) -> tuple[torch.Tensor, torch.Tensor]:
        return f[:L], torch.arange(1, L + 1)  # the right features at positions off by one

    return {"right": right, "reset": reset, "pending_only": pending_only, "swap": swap, "shift": shift}


def _sdpa_causal_mask(
    q_positions: torch.Tensor,
    k_positions: torch.Tensor,
    k_valid: torch.Tensor,
    *,
    is_causal: bool,
    sliding_window: int | None,
) -> torch.Tensor:
    """`is_causal=True` as PyTorch SDPA applies it when q_len < kv_len: aligned top-left, so block slot i sees
    only the first i + 1 keys. A port that forces the block causal through that flag gets this mask."""
    slot = q_positions - q_positions[:, :1]
    return attention_mask(slot, k_positions, k_valid, is_causal=True, sliding_window=sliding_window)


def _causal_copy(draft: DFlashDraft) -> DFlashDraft:
    forced = copy.deepcopy(draft)
    for layer in forced.layers:
        assert isinstance(layer, DraftLayer)
        layer.is_causal = True
    return forced


def _perturbed_copy(draft: DFlashDraft, scale: float, seed: int) -> DFlashDraft:
    noisy = copy.deepcopy(draft)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in noisy.parameters():
            p.add_(scale * p.abs().mean() * torch.randn(p.shape, generator=generator).to(p.dtype))
    return noisy


def audit(
    fixture_dir: str | Path, prompts: list[list[int]], max_tokens: int = 32, profile: str = "base"
) -> AuditReport:
    """`profile` picks the thresholds (verify.thresholds): "store" holds a fixture to what its store carries."""
    root = Path(fixture_dir)
    engine = Engine.from_pretrained(root / "target", root / "draft", config=EngineConfig(trace=True))
    assert engine.draft is not None and engine.trace is not None
    draft = engine.draft
    outputs = engine.generate(prompts, SamplingParams(max_tokens=max_tokens))
    block = engine.block_size
    seqs = [torch.tensor(list(o.prompt_ids) + list(o.token_ids)) for o in outputs]
    with torch.inference_mode():
        feats = [full_forward(engine.target, s[None], draft.config.target_layer_ids)[1][0] for s in seqs]  # type: ignore[index]

    traced, changed = [], dict.fromkeys(("reset", "pending_only", "swap", "shift", "causal", "sdpa", "weights"), 0)
    dense_agree, margins, steps_total, walk_departs = 0, [], 0, 0
    acceptance: dict[str, list[int]] = {k: [] for k in ("right", "reset", "pending_only", "swap")}
    causal_draft, noisy_draft = _causal_copy(draft), _perturbed_copy(draft, 0.05, seed=1)
    # [perturbation][block position] -> [changed, counted], over the steps drafted while the store held something
    # and, beside them, over every step (a request's first draft after prefill reads pending rows only).
    store_changed = {k: [[0, 0] for _ in range(block - 1)] for k in STORE_PERTURBATIONS}
    store_changed_all = {k: [[0, 0] for _ in range(block - 1)] for k in STORE_PERTURBATIONS}
    for i, out in enumerate(outputs):
        records = engine.trace.for_request(out.request_id)
        steps = [Step(r.committed_len, r.store_len_before, r.positions[1] - r.positions[0] + 1) for r in records]
        other = feats[(i + 1) % len(feats)]
        ids, f = seqs[i], feats[i]
        contexts = _contexts(f, other)
        right, m, argmax = _draft_blocks(draft, engine, ids, steps, contexts["right"])
        margins += m
        walk_departs += sum(a != b for a, b in zip(right, argmax, strict=True))
        traced += [r.drafted_ids for r in records]
        dense_agree += sum(a == r.drafted_ids for a, r in zip(right, records, strict=True))
        steps_total += len(steps)
        for name in ("reset", "pending_only", "swap", "shift"):
            moved, _, _ = _draft_blocks(draft, engine, ids, steps, contexts[name])
            changed[name] += sum(a != b for a, b in zip(moved, right, strict=True))
        for name, variant in (("causal", causal_draft), ("weights", noisy_draft)):
            moved, _, _ = _draft_blocks(variant, engine, ids, steps, contexts["right"])
            changed[name] += sum(a != b for a, b in zip(moved, right, strict=True))
        store = _store_contexts(engine, ids, f, seqs[(i + 1) % len(seqs)], block + STORE_WINDOW_EXTRA)
        for name in STORE_PERTURBATIONS:
            moved, _, _ = _draft_blocks(draft, engine, ids, steps, store[name])
            for step, a, b in zip(steps, moved, right, strict=True):
                for j in range(len(b)):
                    for table in (store_changed_all, store_changed) if step.pending_from > 0 else (store_changed_all,):
                        table[name][j][0] += a[j] != b[j]
                        table[name][j][1] += 1
        with mock.patch.object(runner.draft, "attention_mask", _sdpa_causal_mask):
            moved, _, _ = _draft_blocks(draft, engine, ids, steps, contexts["right"])
        changed["sdpa"] += sum(a != b for a, b in zip(moved, right, strict=True))
        max_len = len(out.prompt_ids) + max_tokens
        for name in acceptance:
            acceptance[name] += _replay(draft, engine, ids, len(out.prompt_ids), max_len, block, contexts[name])

    engine_acceptance = [a for o in outputs for a in o.acceptance_lengths]
    per_position = [len({b[j] for b in traced if len(b) > j}) for j in range(block - 1)]
    right_acc = statistics.fmean(engine_acceptance)

    thresholds = thresholds_for(profile)

    def fig(name: str, value: float) -> Figure:
        return Figure(name, value, thresholds.get(name, Threshold.none()), block_size=block)

    def shares(table: list[list[int]]) -> list[float]:
        return [changed / counted if counted else 0.0 for changed, counted in table]

    figures: list[Figure] = [
        fig("block_diversity", len(set(traced)) / len(traced)),
        fig("distinct_ids_per_position_min", float(min(per_position))),
        fig("context_sensitivity_reset", changed["reset"] / steps_total),
        fig("context_sensitivity_pending_only", changed["pending_only"] / steps_total),
        fig("context_sensitivity_swap", changed["swap"] / steps_total),
        fig("context_sensitivity_shift", changed["shift"] / steps_total),
        fig("mask_sensitivity_causal_sdpa", changed["sdpa"] / steps_total),
        fig("mask_sensitivity_causal_aligned", changed["causal"] / steps_total),
        fig("weight_sensitivity", changed["weights"] / steps_total),
        fig("acceptance_right", right_acc),
        fig("acceptance_replay_right", statistics.fmean(acceptance["right"])),
        fig("acceptance_reset_ratio", statistics.fmean(acceptance["reset"]) / right_acc),
        fig("acceptance_pending_only_ratio", statistics.fmean(acceptance["pending_only"]) / right_acc),
        fig("acceptance_swap_ratio", statistics.fmean(acceptance["swap"]) / right_acc),
        fig("dense_paged_agreement", dense_agree / steps_total),
        fig("margin_p10", statistics.quantiles(margins, n=10)[0]),
        fig("margin_median", statistics.median(margins)),
    ]
    for name in STORE_PERTURBATIONS:
        per_position = shares(store_changed[name])
        figures += [fig(f"store_{name}_p{j + 1}", v) for j, v in enumerate(per_position)]
        figures.append(fig(f"store_{name}_min", min(per_position)))
        figures.append(fig(f"store_{name}_min_all_blocks", min(shares(store_changed_all[name]))))
    if draft.candidate_selector is not None:
        figures.append(fig("walk_departs_from_argmax", walk_departs / steps_total))
    return AuditReport(root.name, tuple(figures))
