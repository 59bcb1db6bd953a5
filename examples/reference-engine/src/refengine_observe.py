"""This engine's observer, for `dflash verify explain` (`[tool.dflash] observe = "refengine_observe:make_observer"`).

A module beside the package, not inside it: importing `refengine` imports the upstream `dflash`, so the
reference's folder (DFLASH_REFERENCE_PATH, as the gates' conftest reads it) goes on sys.path first, here.

It drives `SpecEngine.generate` on the stride-dflash fixture and records, per verify step, what the decode loop
hands the models and what they return: the target's K/V cache as each call reads it, the target's logits, the
draft's context features, positions, block mask and cache, its block logits, the drafted blocks, acceptance
lengths and output tokens. Forward hooks and one wrapped method, removed afterwards: the engine knows nothing
of being observed. The protocol: `workloads` (names) and `run(workload, emit)`, emit(step, row, what, value).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import torch

_REFERENCE = os.environ.get("DFLASH_REFERENCE_PATH")  # where the upstream dflash==0.1.0 is installed
if _REFERENCE and os.path.abspath(_REFERENCE) not in sys.path:
    sys.path.insert(0, os.path.abspath(_REFERENCE))

from refengine.engine import SpecEngine  # noqa: E402

GATES = {
    "drafted": "drafts = the reference's dflash_generate (test_drafts_and_acceptance_equal_the_reference)",
    "block logits": "drafts = the reference's (test_drafts_and_acceptance_equal_the_reference), if a token flips",
    "draft context": "drafts = the reference's (test_drafts_and_acceptance_equal_the_reference)",
    "draft positions": "drafts = the reference's (test_drafts_and_acceptance_equal_the_reference)",
    "draft cache": "drafts = the reference's (test_drafts_and_acceptance_equal_the_reference)",
    "block mask": "drafts = the reference's, on a draft whose layers are causal",
    "target cache": "verify logits = a fresh forward (test_verify_logits_equal_a_fresh_forward)",
    "target logits": "verify logits = a fresh forward (test_verify_logits_equal_a_fresh_forward)",
    "acceptance lengths": "acceptance above the floor, = the reference's (test_acceptance_floor)",
    "output tokens": "speculative = plain target decoding (test_speculative_equals_plain_target_decoding)",
}


def _cache(cache: Any) -> torch.Tensor | None:
    """The K/V a call reads from a transformers cache: [layers, 2, heads, length, head_dim]."""
    layers = getattr(cache, "layers", None) or []
    if not layers or getattr(layers[0], "keys", None) is None or layers[0].keys.numel() == 0:
        return None
    return torch.stack([torch.stack([layer.keys[0], layer.values[0]]) for layer in layers])


class Observer:
    gates = GATES
    workloads = ("stride-dflash: greedy", "stride-dflash: stop token")

    def run(self, workload: str, emit: Any) -> None:
        from verify import load_fixture

        torch.manual_seed(0)
        pair = load_fixture("stride-dflash")
        engine = SpecEngine.from_folders(pair.target_dir, pair.draft_dir)
        prompts = [list(p) for p in pair.audit_prompts]
        if workload == "stride-dflash: greedy":
            for row, prompt in enumerate(prompts):
                self._generate(engine, prompt, 24, (), row, emit)
        else:
            free = engine.generate(prompts[0], 12).token_ids
            self._generate(engine, prompts[0], 12, (free[5],), 0, emit)

    @staticmethod
    def _generate(engine: Any, prompt: list[int], max_tokens: int, stops: tuple[int, ...], row: int, emit: Any) -> None:
        step = {"n": -1}

        def target_pre(module: Any, args: Any, kwargs: dict[str, Any]) -> None:
            step["n"] += 1
            emit(step["n"], row, "target cache", _cache(kwargs.get("past_key_values")))

        def target_post(module: Any, args: Any, kwargs: dict[str, Any], output: Any) -> None:
            emit(step["n"], row, "target logits", output.logits[0])

        def draft_pre(module: Any, args: Any, kwargs: dict[str, Any]) -> None:
            emit(step["n"], row, "draft context", kwargs.get("target_hidden"))
            emit(step["n"], row, "draft positions", kwargs.get("position_ids"))
            emit(step["n"], row, "block mask", kwargs.get("attention_mask"))
            emit(step["n"], row, "draft cache", _cache(kwargs.get("past_key_values")))

        compute_logits = engine.draft.compute_logits

        def logits(*args: Any, **kwargs: Any) -> Any:
            out = compute_logits(*args, **kwargs)
            emit(step["n"], row, "block logits", out[0])
            return out

        handles = [
            engine.target.register_forward_pre_hook(target_pre, with_kwargs=True),
            engine.target.register_forward_hook(target_post, with_kwargs=True),
            engine.draft.register_forward_pre_hook(draft_pre, with_kwargs=True),
        ]
        engine.draft.compute_logits = logits
        try:
            generation = engine.generate(prompt, max_tokens, stops)
        finally:
            for handle in handles:
                handle.remove()
            del engine.draft.compute_logits
        for number, block in enumerate(generation.drafted_blocks):
            emit(number, row, "drafted", block)
        emit(-1, row, "acceptance lengths", generation.acceptance_lengths)
        emit(-1, row, "output tokens", generation.token_ids)


def make_observer() -> Observer:
    return Observer()
