"""Mutations of the draft: its attention, its context and its inputs (runner/draft.py, runner/proposer.py)."""

from verify import Mutation, register

NUMERICS = "tests/gates/test_gate_numerics.py::test_draft_block_logits_match_dense_reference"
SCALED = "tests/gates/test_gate_numerics.py::test_draft_logits_scaled_and_capped_as_configured"

register(
    Mutation(
        name="force-causal-block-mask",
        bug_class="Block attention made causal although the layer is non-causal; seen in a production DFlash port "
        "where every token-level test stayed green.",
        file="runner/draft.py",
        anchor="is_causal=layer.is_causal,",
        replacement="is_causal=True,",
        expect_killed_by=(NUMERICS, "tests/gates/test_gate_paths.py::test_forced_causal_mask_moves_the_draft"),
    ),
    Mutation(
        name="skip-draft-kv-write",
        bug_class="The paged K/V write of the context before the draft's read is skipped, so the draft attends over "
        "unwritten slots (a missing cache write before a paged-attention read).",
        file="runner/draft.py",
        anchor="inputs.block_table, positions, torch.cat((inputs.ctx_valid, inputs.block_valid), dim=1)",
        # The context's rows are sent to the scratch slot, as padding is: none reaches its own slot.
        replacement="inputs.block_table, positions, torch.cat((torch.zeros_like(inputs.ctx_valid), "
        "inputs.block_valid), dim=1)",
        expect_killed_by=(NUMERICS, "tests/gates/test_gate_paths.py::test_dense_path_drafts_like_paged"),
    ),
    Mutation(
        name="stale-seq-lens",
        bug_class="The draft's read uses the store's seq_lens instead of the bound extended by the block, dropping the "
        "block rows from its keys (stale attention metadata).",
        file="runner/proposer.py",
        anchor="read_lens=committed + valid.sum(1) if paged else None,",
        replacement="read_lens=committed if paged else None,",
        expect_killed_by=(NUMERICS, "tests/gates/test_gate_paths.py::test_dense_path_drafts_like_paged"),
    ),
    Mutation(
        name="draft-context-positions-shifted",
        bug_class="Context K/V rotated at positions off by one (the HF position_ids slice of the reference taken one "
        "too late).",
        file="runner/draft.py",
        anchor="cos, sin = self.rotary(positions, h.dtype, bound)",
        replacement="cos, sin = self.rotary(torch.cat((inputs.ctx_positions + 1, inputs.block_positions), dim=1), "
        "h.dtype, bound)",
        expect_killed_by=(NUMERICS,),
    ),
    Mutation(
        name="anchor-replaced-by-mask",
        bug_class="The block is drafted from [MASK x B] without the anchor token (block ids built before the anchor "
        "is written).",
        file="runner/proposer.py",
        anchor="block_ids[:, 0] = anchors",
        replacement="pass  # anchor never written into the block",
        expect_killed_by=(NUMERICS, "tests/gates/test_gate_acceptance.py::test_acceptance_above_measured_floor"),
    ),
    Mutation(
        name="draft-logits-skip-output-multiplier",
        bug_class="The draft's output_multiplier is not applied to its logits (a config key read by the reference "
        "but dropped by a port); invisible on a draft whose multiplier is 1.",
        file="runner/draft.py",
        anchor="logits = lm_head(hidden) * cfg.output_multiplier",
        replacement="logits = lm_head(hidden)",
        expect_killed_by=(SCALED,),
    ),
    Mutation(
        name="draft-logits-skip-softcap",
        bug_class="The draft's final_logit_softcapping is not applied to its logits (dropped by a port); invisible "
        "on a draft without a soft-cap.",
        file="runner/draft.py",
        anchor="if cfg.final_logit_softcapping is not None and cfg.final_logit_softcapping > 0:",
        replacement="if False:",
        expect_killed_by=(SCALED,),
    ),
    Mutation(
        name="sdpa-causal-block-mask",
        bug_class="The block is made causal through SDPA's is_causal flag, which aligns the mask top-left when "
        "q_len < kv_len: block slot i sees only the first i + 1 keys of the context.",
        file="runner/draft.py",
        anchor="                        inputs.block_positions,\n                        key_positions,\n"
        "                        key_valid,\n                        is_causal=layer.is_causal,",
        replacement="                        inputs.block_positions - inputs.block_positions[:, :1],\n"
        "                        key_positions,\n                        key_valid,\n"
        "                        is_causal=True,",
        expect_killed_by=(NUMERICS, "tests/gates/test_gate_paths.py::test_sdpa_style_causal_mask_changes_the_drafts"),
    ),
)
