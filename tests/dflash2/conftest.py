"""Fixtures of the DFlash2 tests: a DFlash2 pair whose candidate walk matters, edited copies of its draft
folder, the upstream reference's models on the same folders, and one-request runs of both.

The synthetic pair's codebooks are drawn at the same scale as every other weight, which makes the walk's
pairwise term ~0.02 against logit gaps of ~0.5: the walk would then almost always pick the per-slot argmax
and a runner that skipped it would pass. Scaling both codebooks by 4 makes the pairwise term comparable to
the logits (the walk leaves the argmax in most steps, checked in test_dflash2_walk.py). A vocab of 6 makes the random
draft agree with its target often enough that acceptance lengths vary (checked in test_dflash2_reference.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
import torch
import transformers
from dflash2kit import CODEBOOK_SCALE, WALK_PAIR, Pair, Result, edit_draft


@pytest.fixture(scope="session")
def walk_pair(make_pair, tmp_path_factory: pytest.TempPathFactory) -> Pair:
    """(target_dir, draft_dir): the vocab-6 DFlash2 pair with codebooks scaled so that the walk matters."""
    target_dir, draft_dir = make_pair(**WALK_PAIR)
    return target_dir, edit_draft(draft_dir, tmp_path_factory.mktemp("walk-draft"), codebook_scale=CODEBOOK_SCALE)


@pytest.fixture(scope="session")
def edited_pair(walk_pair, tmp_path_factory: pytest.TempPathFactory) -> Callable[[dict[str, Any]], Pair]:
    """walk_pair with its draft's dflash_config entries changed (weights unchanged); memoised."""
    made: dict[str, Pair] = {}

    def make(changes: dict[str, Any]) -> Pair:
        key = json.dumps(changes, sort_keys=True)
        if key not in made:
            target_dir, draft_dir = walk_pair
            made[key] = (target_dir, edit_draft(draft_dir, tmp_path_factory.mktemp("edited-draft"), changes))
        return made[key]

    return make


@pytest.fixture(scope="session")
def reference_models(reference) -> Callable[[Pair], tuple[torch.nn.Module, torch.nn.Module]]:
    """The reference's (Qwen3ForCausalLM target, DFlash2DraftModel draft) loaded from a pair's folders."""
    loaded: dict[Pair, tuple[torch.nn.Module, torch.nn.Module]] = {}

    def load(pair: Pair) -> tuple[torch.nn.Module, torch.nn.Module]:
        if pair not in loaded:
            target = transformers.Qwen3ForCausalLM.from_pretrained(pair[0], dtype=torch.float32).eval()
            draft = reference.DFlash2DraftModel.from_pretrained(pair[1], dtype=torch.float32).eval()
            loaded[pair] = (target, draft)
        return loaded[pair]

    return load


@pytest.fixture(scope="session")
def reference_decode(reference, reference_models) -> Callable[..., Result]:
    """One greedy reference decode (`dflash_generate`) of one prompt; memoised. The drafted block of each verify
    step is recorded from the draft's `propose`."""
    results: dict[tuple[Any, ...], Result] = {}

    def decode(pair: Pair, prompt: tuple[int, ...], max_tokens: int, stop_token_ids: tuple[int, ...], block_size: int):
        key = (pair, prompt, max_tokens, stop_token_ids, block_size)
        if key in results:
            return results[key]
        target, draft = reference_models(pair)
        drafted: list[tuple[int, ...]] = []

        def propose(*args: Any, **kwargs: Any):
            tokens, indices, probs = type(draft).propose(draft, *args, **kwargs)
            drafted.append(tuple(tokens[0].tolist()))
            return tokens, indices, probs

        with pytest.MonkeyPatch.context() as patch:
            # return_stats=True times with torch.cuda.synchronize, which fails without CUDA.
            patch.setattr(reference, "_cuda_time", time.perf_counter)
            patch.setattr(draft, "propose", propose, raising=False)
            stats = reference.dflash_generate(
                draft,
                target,
                torch.tensor([list(prompt)]),
                max_tokens,
                list(stop_token_ids) or None,
                block_size=block_size,
                return_stats=True,
            )
        results[key] = Result(
            tuple(stats.output_ids[0, len(prompt) :].tolist()), tuple(stats.acceptance_lengths), tuple(drafted)
        )
        return results[key]

    return decode
