"""Mutations of what the draft reads from its store (runner/draft.py, runner/proposer.py): a store that keeps
only its newest rows, rows that sit at the wrong positions, and rows of one request read by another. On the
stride fixture these are nearly invisible (its newest features already say the stride); the copy fixture's
drafted blocks live far back in the store."""

from verify import Mutation, register

STORE_GATE = "tests/gates/test_gate_store_reads.py"

register(
    Mutation(
        name="store-window",
        bug_class="The draft's paged read keeps only the newest block + 8 context positions (a ring-buffer store "
        "sized for a sliding window, used by full-attention layers): far-back context silently disappears.",
        file="runner/draft.py",
        anchor="key_valid = key_positions < inputs.read_lens[:, None]",
        replacement="key_valid = (key_positions < inputs.read_lens[:, None]) & "
        "(key_positions >= inputs.block_positions[:, :1] - 12)",
        expect_killed_by=(f"{STORE_GATE}::test_paged_block_logits_match_dense",),
    ),
    Mutation(
        name="store-offset",
        bug_class="Context K/V enter the store rotated at their position minus 4 (positions counted from a 4-token "
        "offset, as if a prefix lived elsewhere): every stored row sits 4 positions early.",
        file="runner/draft.py",
        anchor="cos, sin = self.rotary(positions, h.dtype, bound)",
        # Only on the paged path (the dense arm keeps no store), only the context's rows.
        replacement="cos, sin = self.rotary.angles(torch.cat((inputs.ctx_positions - 4 * paged, "
        "inputs.block_positions), dim=1), h.dtype)",
        expect_killed_by=(f"{STORE_GATE}::test_long_context_drafts_like_dense[offset]",),
    ),
    Mutation(
        name="store-shared-between-rows",
        bug_class="Every row's draft call uses the first row's draft block table, so the rows of a batch write and "
        "read one shared store (a broadcast of one row's table).",
        file="runner/proposer.py",
        anchor="block_table=rows.draft_block_table[:num_rows] if paged else None,",
        replacement="block_table=rows.draft_block_table[:1].expand(num_rows, -1) if paged else None,",
        expect_killed_by=(f"{STORE_GATE}::test_rows_sharing_recent_tokens_draft_apart",),
    ),
)
