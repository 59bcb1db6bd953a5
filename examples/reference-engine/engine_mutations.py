"""The example's mutation catalog: the bug classes of a DFlash port that no output token shows, planted in the
engine this project owns (src/refengine/engine.py). `dflash verify` checks that the gates catch each one.

Each record names the exact source it replaces (the anchor must occur exactly once in the file).
"""

from verify import Mutation, register

ENGINE = "src/refengine/engine.py"
DRAFTS = "tests/test_gates.py::test_drafts_and_acceptance_equal_the_reference"
PLAIN = "tests/test_gates.py::test_speculative_equals_plain_target_decoding"
LOGITS = "tests/test_gates.py::test_verify_logits_equal_a_fresh_forward"

register(
    # The draft's context.
    Mutation(
        "context-keeps-rejected-rows",
        "The next draft's context keeps the features of rejected drafts (not trimmed to the committed rows)",
        ENGINE,
        "context = extract_context_feature(out.hidden_states, layer_ids)[:, :produced, :]",
        "context = extract_context_feature(out.hidden_states, layer_ids)",
        expect_killed_by=(DRAFTS,),
    ),
    Mutation(
        "context-positions-shifted",
        "The context's features are rotated at positions one too late (the block's own are right)",
        ENGINE,
        "block_positions = positions[:, start - context.shape[1] : start + size]",
        "block_positions = torch.cat([positions[:, start - context.shape[1] : start] + 1,"
        " positions[:, start : start + size]], dim=1)",
        expect_killed_by=(DRAFTS,),
    ),
    # The block mask.
    Mutation(
        "sdpa-causal-block-mask",
        "The block is made causal the way SDPA's is_causal does when q_len < kv_len (top-left: slot i sees the "
        "first i + 1 keys)",
        ENGINE,
        "        if not self.draft.layers[0].self_attn.is_causal:\n            return None\n"
        "        query = num_keys - num_block + torch.arange(num_block)[:, None]",
        "        query = torch.arange(num_block)[:, None]",
        expect_killed_by=(DRAFTS,),
    ),
    Mutation(
        "aligned-causal-block-mask",
        "The block is made causal (position-aligned) although the draft's layers are non-causal",
        ENGINE,
        "        if not self.draft.layers[0].self_attn.is_causal:\n            return None\n",
        "",
        expect="survives",
        reason="known gap: the stride-dflash draft never needs a later block slot (its audit's "
        "mask_sensitivity_causal_aligned is 0.000), so no drafted block changes; only a gate on the draft's "
        "block logits against an independent implementation would see it",
    ),
    # Cache cropping.
    Mutation(
        "draft-cache-keeps-block",
        "The draft's KV cache is not cropped after drafting, so the block's mask-token K/V stay as context",
        ENGINE,
        "        _crop_to(cache, start)  # the cache keeps the context",
        "        pass  # the cache keeps the context",
        expect_killed_by=(DRAFTS,),
    ),
    Mutation(
        "target-cache-keeps-rejected",
        "The target's KV cache keeps the K/V of rejected drafts",
        ENGINE,
        "            _crop_to(target_cache, start)  # drop the target K/V of rejected drafts",
        "            pass  # drop the target K/V of rejected drafts",
        expect_killed_by=(LOGITS,),
    ),
    # The acceptance rule.
    Mutation(
        "greedy-accepts-one-extra",
        "Greedy acceptance takes one drafted token past the longest prefix that matches the target",
        ENGINE,
        "accepted = int((block[:, 1:] == posterior[:, :-1]).cumprod(dim=1).sum())",
        "accepted = min(int((block[:, 1:] == posterior[:, :-1]).cumprod(dim=1).sum()) + 1, size - 1)",
        expect_killed_by=(PLAIN,),
    ),
)
