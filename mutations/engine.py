"""Mutations of the engine's bookkeeping: the position invariant, row moves, commits and the trace
(runner/engine.py, runner/engine_config.py, runner/batch.py, runner/request.py)."""

from verify import Mutation, register

register(
    Mutation(
        name="delete-position-invariant",
        bug_class="The check that the first pending position equals the draft store's length is removed; a wrong "
        "context is then drafted from silently (deleted in a production port with the whole suite green).",
        file="runner/batch.py",
        anchor="if first != store_len or last + 1 != request.num_committed:",
        replacement="if False:",
        expect_killed_by=("tests/gates/test_gate_store.py::test_corrupted_store_raises_position_invariant",),
    ),
    Mutation(
        name="reset-store-on-row-move",
        bug_class="When rows are compacted, a survivor's draft store is re-initialised (its page mapping reset) while "
        "its length is carried: it drafts from a wiped context (seen in a production port).",
        file="runner/batch.py",
        anchor="self.draft_block_table[dst] = self.draft_block_table[src]",
        replacement="self.draft_block_table[dst] = 0",
        expect_killed_by=(
            "tests/gates/test_gate_drafts.py::test_concurrent_batch_drafts_equal_solo",
            "tests/gates/test_gate_store_reads.py::test_survivors_draft_like_their_solo_runs[copy-dflash]",
        ),
    ),
    Mutation(
        name="target-block-table-not-moved",
        bug_class="Row compaction moves the request but not its target block table (a survivor reads the previous "
        "occupant's KV pages).",
        file="runner/batch.py",
        anchor="self.target_block_table[dst] = self.target_block_table[src]",
        replacement="pass",
        expect_killed_by=("tests/gates/test_gate_drafts.py::test_concurrent_batch_drafts_equal_solo",),
    ),
    Mutation(
        name="bonus-from-last-row",
        bug_class="The bonus token is read from the block's last row instead of the row after the accepted prefix "
        "(an indexing slip in greedy verification).",
        file="runner/engine.py",
        anchor="bonus = argmax.gather(1, accepted[:, None])[:, 0]",
        replacement="bonus = argmax[:, -1]",
        expect_killed_by=("tests/gates/test_gate_acceptance.py::test_speculative_equals_plain_decoding",),
    ),
    Mutation(
        name="pending-context-shifted",
        bug_class="The committed tokens' features are taken one row late, so the draft context is the verified "
        "block's features shifted by one position.",
        file="runner/engine.py",
        anchor="self.rows.pending[row] = taps[row, :produced]",
        replacement="self.rows.pending[row] = taps[row, 1 : produced + 1]",
        expect_killed_by=("tests/gates/test_gate_numerics.py::test_pending_context_is_the_committed_tokens_features",),
    ),
    Mutation(
        name="stop-token-dropped",
        bug_class="A stop token inside an accepted block ends the request but is not emitted (off-by-one in the "
        "stop scan).",
        file="runner/request.py",
        anchor="produced = i + 1",
        replacement="produced = i",
        expect_killed_by=("tests/gates/test_gate_acceptance.py::test_stop_token_ends_inside_an_accepted_block",),
    ),
    Mutation(
        name="first-token-ignores-budget",
        bug_class="A request with max_tokens=1 is not finished by its prefill token and decodes one more.",
        file="runner/request.py",
        anchor="elif self.num_committed + 1 >= self.max_length:",
        replacement="elif self.num_committed + 1 > self.max_length:",
        expect_killed_by=("tests/gates/test_gate_acceptance.py::test_budget_ends_inside_a_block[1]",),
    ),
    Mutation(
        name="budget-overrun",
        bug_class="max_tokens is exceeded by one when the budget ends inside an accepted block.",
        file="runner/request.py",
        anchor="produced = min(len(new_ids), self.max_length - self.num_committed - 1)",
        replacement="produced = min(len(new_ids), self.max_length - self.num_committed)",
        expect_killed_by=("tests/gates/test_gate_acceptance.py::test_budget_ends_inside_a_block",),
    ),
    Mutation(
        name="trace-reports-produced-as-accepted",
        bug_class="The trace records the committed count (accepted + bonus) as the accepted count.",
        file="runner/engine.py",
        anchor="accepted=count,",
        replacement="accepted=produced,",
        expect_killed_by=("tests/gates/test_gate_trace.py::test_trace_agrees_with_outputs",),
    ),
    Mutation(
        name="engine-config-accepts-zero",
        bug_class="EngineConfig accepts zero rows, pages or page size; the engine then fails later with an "
        "unnamed error (division by zero in the slot maths, an empty pool) instead of a named refusal.",
        file="runner/engine_config.py",
        anchor="or value < 1:",
        replacement="or value < 0:",
        expect_killed_by=("tests/gates/test_gate_rules.py::test_invalid_engine_config_is_refused_by_name[no-rows]",),
    ),
    Mutation(
        name="trace-drops-first-step",
        bug_class="The trace's per-request view loses the request's first step (an off-by-one in a filter).",
        file="runner/trace.py",
        anchor="return [r for r in self.records if r.request_id == request_id]",
        replacement="return [r for r in self.records if r.request_id == request_id][1:]",
        expect_killed_by=("tests/gates/test_gate_trace.py::test_trace_agrees_with_outputs",),
    ),
    Mutation(
        name="paged-draft-falls-back-to-dense",
        bug_class="A paged engine drafts through the dense path (the store never written, the context recomputed "
        "from a history): every token stays right, only the memory and time a paged store exists to save are lost.",
        file="runner/engine.py",
        anchor='store = self.draft_store if self.config.draft_attention == "paged" else None',
        replacement="store = None",
        expect_killed_by=("tests/gates/test_gate_lifecycle.py::test_paged_engine_drafts_from_its_paged_store",),
    ),
    Mutation(
        name="abort-keeps-running-row",
        bug_class="Aborting a running request marks it aborted but leaves it in its row: its pages stay held and "
        "it keeps being decoded beside the others.",
        file="runner/engine.py",
        anchor="self._retire()  # running: released and compacted away like a request that finished",
        replacement="pass",
        expect_killed_by=(
            "tests/gates/test_gate_lifecycle.py::test_aborted_requests_release_everything_and_survivors_run_as_alone",
        ),
    ),
)
