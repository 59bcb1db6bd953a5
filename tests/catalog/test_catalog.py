"""The shipped catalog: every registered mutation is well-formed and applies to today's runner, and on the
embedded default `dflash verify` kills all of them, the five production bug classes by gates that observe
drafts or the store (red on an assertion, not by a crash)."""

from __future__ import annotations

from pathlib import Path

import pytest

from verify.config.catalog import load_mutations
from verify.config.settings import load_config
from verify.mutation import Mutation
from verify.mutation.apply import Applied, apply_mutation
from verify.report.verdict import Outcome, Status, matches_gate
from verify.run.phases.run import RunOptions, run_verify

ROOT = Path(__file__).resolve().parents[2]
CATALOG = load_mutations(load_config(ROOT))
FIVE = {
    "delete-position-invariant": ("test_gate_store",),
    "force-causal-block-mask": ("test_gate_numerics", "test_gate_paths"),
    "skip-draft-kv-write": ("test_gate_numerics", "test_gate_paths"),
    "stale-seq-lens": ("test_gate_numerics", "test_gate_paths"),
    "reset-store-on-row-move": ("test_gate_drafts", "test_gate_numerics"),
}
# The store's bug classes, each red on an assertion of the named gate on the copy fixture (whose drafted blocks
# live far back in the store): the survivor compared with its solo run, the paged store with the dense path.
STORE_GATE = "tests/gates/test_gate_store_reads.py::"
STORE_KILLERS = {
    "reset-store-on-row-move": "test_survivors_draft_like_their_solo_runs[copy-dflash]",
    # A windowed store drafts near-constant blocks: the drafted-block comparisons refuse that arm (degenerate),
    # the block-logits comparison fails on it.
    "store-window": "test_paged_block_logits_match_dense",
    "store-offset": "test_long_context_drafts_like_dense[offset]",
    "store-shared-between-rows": "test_rows_sharing_recent_tokens_draft_apart",
}


def test_catalog_size_and_coverage() -> None:
    assert len(CATALOG) >= 15
    assert set(FIVE) <= set(CATALOG)
    assert set(STORE_KILLERS) <= set(CATALOG)
    touched = {m.file for m in CATALOG.values()}
    runner_modules = {f"runner/{p.name}" for p in (ROOT / "runner").glob("*.py") if p.name != "__init__.py"}
    # Every module of the runner that serves requests is mutated at least once.
    serving = runner_modules - {"runner/errors.py", "runner/compat.py"}  # compat: a 3.10 shim, no logic
    assert serving <= touched, f"modules without a registered mutation: {sorted(serving - touched)}"


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_mutation_applies_to_todays_runner(name: str) -> None:
    mutation: Mutation = CATALOG[name]
    applied = apply_mutation(mutation, ROOT)
    assert isinstance(applied, Applied), f"{name} is stale: {applied}"
    assert mutation.bug_class.strip()
    compile(applied.mutated, mutation.file, "exec")  # the mutant is valid Python


@pytest.mark.slow
def test_embedded_default_kills_every_mutation() -> None:
    config = load_config(ROOT)
    report = run_verify(config, CATALOG, RunOptions(jobs=0, use_cache=False, first_kill=True), progress=None)
    assert not report.failures(), report.failures()
    statuses = {r.name: r for r in report.mutations}
    assert all(r.status is Status.KILLED for r in statuses.values()), {
        r.name: (str(r.status), r.reason, r.attempts) for r in statuses.values() if r.status is not Status.KILLED
    }
    # An honest catalog: each entry is killed by an assertion (or a gate's refusal) of a gate it pins, never
    # only by an exception.
    for name, mutation in CATALOG.items():
        result = statuses[name]
        pinned = [g for g in result.red_by_check if any(matches_gate(g, p) for p in mutation.expect_killed_by)]
        assert pinned, f"{name}: no pinned gate went red by assertion or refusal (red by check: {result.red_by_check})"
    for name, gate_files in FIVE.items():
        result = statuses[name]
        observing = [g for g in result.red_by_check if any(f in g for f in gate_files)]
        assert observing, f"{name} was not killed on an assertion by an observing gate: {result.killed_by}"
    for name, gate in STORE_KILLERS.items():
        asserted = [o.gate_id for o in statuses[name].outcomes if o.outcome is Outcome.ASSERTION]
        assert STORE_GATE + gate in asserted, f"{name} not red on an assertion of {gate}: {asserted}"
