"""Honest by construction: every catalog entry, its killing gates removed (a simulated survivor), is explained by
a diverging observable; rewrites that provably change nothing (x * 1.0 on float tensors) and a no-op are
observably equivalent, bit for bit, so two runs of the same code in two processes observe the same thing.

One observation session for all of them (two children at a time, each mutant stopped at the first workload
that diverges): the cost of one pristine run plus one per mutant."""

from __future__ import annotations

from pathlib import Path

from verify.cli.explain import add_explanations
from verify.config.catalog import load_mutations
from verify.config.settings import load_config
from verify.mutation import Mutation
from verify.observe.api import SessionOptions
from verify.report.json_report import Detail
from verify.report.verdict import Baseline, GateOutcome, MutationResult, Outcome, RunReport, Status

REPO = Path(__file__).resolve().parents[2]

NOTHING_CHANGES = (
    Mutation("draft-logits-times-one", "x * 1.0 on the draft's float logits: exact", "runner/draft.py",
             "logits = lm_head(hidden) * cfg.output_multiplier",
             "logits = lm_head(hidden) * 1.0 * cfg.output_multiplier"),
    Mutation("sampling-scores-times-one", "x * 1.0 on the sampling scores: exact", "runner/sampling.py",
             "scores = logits.float() / temperature", "scores = logits.float() * 1.0 / temperature"),
    Mutation("accept-counts-no-op", "a comment and a pass statement", "runner/sampling.py",
             ") -> torch.Tensor:\n    \"\"\"drafted: [R, B-1]; target_argmax",
             ") -> torch.Tensor:  # the same\n    pass\n    \"\"\"drafted: [R, B-1]; target_argmax"),
)  # fmt: skip
# The same no-op in a function no workload calls (runner.sampling.draw): never run, so no claim either way.
NEVER_RUN = (
    Mutation("draw-no-op", "a comment and a pass statement", "runner/sampling.py",
             "def draw(probs: torch.Tensor, generator: torch.Generator | None) -> int:\n",
             "def draw(probs: torch.Tensor, generator: torch.Generator | None) -> int:  # the same\n    pass\n"),
)  # fmt: skip
# The same maths with other roundings: its floats move in their last bits, within the stated tolerance.
REORDERS = (
    Mutation("silu-spelt-out", "silu(x) as x * sigmoid(x)", "runner/layers.py", "F.silu(gate) * up",
             "gate * torch.sigmoid(gate) * up"),
)  # fmt: skip


def test_every_catalog_entry_is_explained_and_nothing_changing_is_equivalent() -> None:
    config = load_config(REPO)
    catalog = load_mutations(config)
    mutations = {**catalog, **{m.name: m for m in (*NOTHING_CHANGES, *REORDERS, *NEVER_RUN)}}
    # Every gate passed: the entry's killing gates are gone, so it is a survivor the run must explain.
    passed = (GateOutcome("tests/gates/test_gate_store.py::a_gate", Outcome.PASSED, 0.1),)
    report = RunReport(
        Baseline("green", passed),
        tuple(MutationResult(name, Status.SURVIVED, ran=(passed[0].gate_id,), outcomes=passed) for name in mutations),
        required=tuple(mutations),
    )
    details = {name: Detail(m.bug_class, m.file) for name, m in mutations.items()}
    explained = add_explanations(
        config, mutations, report, details, SessionOptions(jobs=2, first_only=True, gate_workloads=False)
    )
    unexplained = {
        name: explained[name].divergence for name in catalog if "first divergence" not in explained[name].divergence
    }
    assert not unexplained, f"catalog entries with no diverging observable: {unexplained}"
    for name in catalog:
        assert "a gate that would see it: " in explained[name].explanation
    for mutation in NOTHING_CHANGES:
        detail = explained[mutation.name]
        assert detail.divergence.startswith("observably equivalent on these fixtures"), detail.explanation
        assert "moved in their last bits" not in detail.explanation  # bit-identical, not only within tolerance
        assert "refusals" in detail.explanation and "draft store" in detail.explanation
    for mutation in NEVER_RUN:
        detail = explained[mutation.name]
        assert detail.divergence.startswith("not observed: runner/sampling.py line 95 not reached"), detail.explanation
    for mutation in REORDERS:
        detail = explained[mutation.name]
        assert detail.divergence.startswith("observably equivalent on these fixtures"), detail.explanation
        assert "moved in their last bits" in detail.explanation  # within the bound, and said so
