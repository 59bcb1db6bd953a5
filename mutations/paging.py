"""Mutations of the paged KV cache, the page allocator and the scheduler (runner/kv_cache.py,
runner/block_manager.py, runner/scheduler.py)."""

from verify import Mutation, register

register(
    Mutation(
        name="slot-ignores-block-table-page",
        bug_class="Slot mapping reads page 0 of the block table for every position (page index dropped), so "
        "sequences longer than one page overwrite themselves.",
        file="runner/kv_cache.py",
        anchor="pages = block_table.gather(1, positions // self.page_size)",
        replacement="pages = block_table.gather(1, (positions // self.page_size).clamp(max=0))",
        expect_killed_by=("tests/gates/test_gate_numerics.py::test_target_logits_match_dense_reference",),
    ),
    Mutation(
        name="freed-pages-leak",
        bug_class="Freed pages never return to the free list; the pool drains across requests.",
        file="runner/block_manager.py",
        anchor="            self._free.append(page)\n",
        replacement="            pass\n",
        expect_killed_by=("tests/gates/test_gate_store.py::test_pages_are_conserved",),
    ),
    Mutation(
        name="admit-past-max-rows",
        bug_class="Admission lets one request more than max_num_seqs into the running batch.",
        file="runner/scheduler.py",
        anchor="while self.waiting and self.num_running < self.max_rows:",
        replacement="while self.waiting and self.num_running <= self.max_rows:",
        expect_killed_by=("tests/gates/test_gate_rules.py::test_admission_respects_max_rows_and_pages",),
    ),
)
