"""The gates `dflash verify` runs every mutation of the engine against (marker `gate`).

Speculative decoding is lossless: a draft with the wrong context, mask or cache costs acceptance and never a
token, so comparing output tokens alone is blind to those bugs. These gates also observe what the draft
proposed and how much of it was accepted, on a fixture whose draft drafts well only from the right context.
"""

from __future__ import annotations

import pytest
import torch


def _reference_run(reference, engine, prompt, max_new_tokens: int, block_size: int | None = None):
    """(generated ids, acceptance lengths, drafted blocks) of the reference's own `dflash_generate`."""
    drafted: list[tuple[int, ...]] = []
    draft = engine.draft

    def compute_logits(*args, **kwargs):
        logits = type(draft).compute_logits(draft, *args, **kwargs)
        drafted.append(tuple(logits[0].argmax(-1).tolist()))
        return logits

    draft.compute_logits = compute_logits
    try:
        stats = reference.dflash_generate(
            draft, engine.target, torch.tensor([list(prompt)]), max_new_tokens, None,
            block_size=block_size, return_stats=True,
        )  # fmt: skip
    finally:
        del draft.__dict__["compute_logits"]
    return tuple(stats.output_ids[0, len(prompt) :].tolist()), tuple(stats.acceptance_lengths), tuple(drafted)


def _assert_not_degenerate(blocks) -> None:
    """Refuse a comparison of drafts that could pass whatever the context was (a constant draft)."""
    if len(blocks) < 3 or len(set(blocks)) < 0.5 * len(blocks) or len({t for b in blocks for t in b}) < 3:
        pytest.fail(f"degenerate drafts, nothing to compare: {blocks[:6]}")


@pytest.mark.gate
def test_drafts_and_acceptance_equal_the_reference(pair, engine, reference) -> None:
    for prompt in pair.audit_prompts:
        ours = engine.generate(prompt, pair.audit_max_tokens)
        ids, acceptance, drafted = _reference_run(reference, engine, prompt, pair.audit_max_tokens)
        _assert_not_degenerate(ours.drafted_blocks)
        assert ours.drafted_blocks == drafted, f"prompt {prompt}: drafts differ from the reference's"
        assert ours.acceptance_lengths == acceptance, f"prompt {prompt}: acceptance differs from the reference's"
        assert ours.token_ids == ids


@pytest.mark.gate
def test_speculative_equals_plain_target_decoding(pair, engine, reference) -> None:
    for prompt in pair.audit_prompts:
        plain, _, _ = _reference_run(reference, engine, prompt, pair.audit_max_tokens, block_size=1)
        assert engine.generate(prompt, pair.audit_max_tokens).token_ids == plain


@pytest.mark.gate
def test_verify_logits_equal_a_fresh_forward(pair, engine) -> None:
    """Every target call of a decode (prefill and each verify step) gives the logits a fresh forward of the
    committed tokens plus that block gives: a stale KV cache shows here even when no token changes."""
    calls = []
    target = engine.target
    forward = target.forward

    def recording(input_ids=None, **kwargs):
        out = forward(input_ids=input_ids, **kwargs)
        calls.append((input_ids[0].tolist(), int(kwargs["position_ids"][0, 0]), out.logits[0].clone()))
        return out

    for prompt in pair.audit_prompts:  # rejections (where a stale cache shows) are rare: use every prompt
        calls.clear()
        target.forward = recording
        try:
            sequence = list(prompt) + list(engine.generate(prompt, pair.audit_max_tokens).token_ids)
        finally:
            del target.forward
        assert len(calls) > 3, "too few target calls to compare"
        with torch.inference_mode():
            for block_ids, start, logits in calls:
                fresh = target(torch.tensor([sequence[:start] + block_ids])).logits[0, start:]
                torch.testing.assert_close(logits, fresh, atol=1e-4, rtol=1e-4)


@pytest.mark.gate
def test_acceptance_reaches_the_fixture_floor(pair, engine) -> None:
    lengths = [n for p in pair.audit_prompts for n in engine.generate(p, pair.audit_max_tokens).acceptance_lengths]
    mean = sum(lengths) / len(lengths)
    assert mean >= pair.acceptance_floor, f"mean acceptance {mean:.3f} < floor {pair.acceptance_floor}"


@pytest.mark.gate
def test_stop_token_ends_inside_a_block(pair, engine) -> None:
    prompt = pair.audit_prompts[0]
    free = engine.generate(prompt, pair.audit_max_tokens)
    stop = free.token_ids[5]
    stopped = engine.generate(prompt, pair.audit_max_tokens, stop_token_ids=(stop,))
    assert stopped.token_ids == free.token_ids[: free.token_ids.index(stop) + 1]
