"""`dflash verify explain` and `dflash sweep explain` on a toy project with an observer: a real bug is named by
its first divergence, a rewrite that changes nothing (x * 1.0) and a no-op are observably equivalent, identical
observations are grouped as duplicates, a pristine tree that raises is a harness error, and survivors carry their
explanation into every report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verify.cli import app
from verify.config.catalog import load_mutations
from verify.config.settings import load_config
from verify.mutation import all_mutations
from verify.observe.api import NoObserverError, SessionOptions, explain_overrides
from verify.observe.session import ObserveJob
from verify.report.json_report import Detail, read_report, write_json
from verify.report.stryker import to_stryker
from verify.report.verdict import Baseline, MutationResult, RunReport, Status
from verify.sweep import equivalents
from verify.sweep.report import write_json as write_sweep
from verify.sweep.result import SweepMutant, SweepOutcome, SweepResult
from verify.sweep.triage import annotate_equivalents, triage, write_equivalents

runner = CliRunner()


def test_explain_names_the_bug_and_proves_the_rewrites_equivalent(toy: Path) -> None:
    names = ["scale-off", "times-one", "no-op", "scale-off-again"]
    out = toy / "explained.json"
    done = runner.invoke(app, ["verify", "explain", *names, "--jobs", "2", "--json", str(out), "--project", str(toy)])
    assert done.exit_code == 0, done.output
    assert "scale-off: first divergence: ramp, step 0, row 0: scaled: max |diff|" in done.output
    # Measured, not the observer's mapping: the toy's only gate never runs its engine.
    assert (
        "a gate that would see it: none: no gate runs the changed lines (measured in the pristine run)" in done.output
    )
    assert "times-one: observably equivalent on these fixtures (2 workloads, 2 observables compared)" in done.output
    assert "no-op: observably equivalent on these fixtures" in done.output
    assert "duplicates (identical observations, counted once): scale-off, scale-off-again" in done.output
    assert "2 observable, 2 observably equivalent, 1 duplicates" in done.output
    data = json.loads(out.read_text())
    assert data["explanations"]["scale-off"]["first"]["what"] == "scaled"
    assert data["explanations"]["scale-off-again"]["duplicate_of"] == "scale-off"
    assert data["explanations"]["times-one"]["equivalent"] is True
    assert data["explanations"]["times-one"]["compared"] == ["scaled", "ids"]


def test_a_pristine_tree_that_raises_is_a_harness_error(toy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOY_OBSERVER_RAISES", "1")
    done = runner.invoke(app, ["verify", "explain", "scale-off", "--project", str(toy)])
    assert done.exit_code == 3, done.output
    assert "harness error: the pristine tree fails its own observation run: workload 'steps'" in done.output
    assert "RuntimeError: the toy observer was told to raise" in done.output
    assert "first divergence" not in done.output


def test_an_observer_whose_two_pristine_runs_differ_is_a_harness_error(toy: Path, monkeypatch) -> None:
    # Every comparison with such an observer would be noise: no mutant is explained, and the draw is named.
    monkeypatch.setenv("TOY_OBSERVER_UNSEEDED", "1")
    done = runner.invoke(app, ["verify", "explain", "scale-off", "no-op", "--project", str(toy)])
    assert done.exit_code == 3, done.output
    assert "the observer is not deterministic: two runs of the pristine tree differ" in " ".join(done.output.split())
    assert "unseeded draw" in done.output and "observably equivalent" not in done.output


def test_a_mutant_may_be_named_like_the_pristine_run(toy: Path) -> None:
    source = (toy / "toy" / "engine.py").read_text()
    mutants = {"pristine": {"toy/engine.py": source.replace("x * 2.5", "x * 3.0")},
               "pristine-again": {"toy/engine.py": source.replace("x * 2.5", "x * 1.0 * 2.5")}}  # fmt: skip
    run = explain_overrides(load_config(toy), mutants, SessionOptions(jobs=2))
    assert run.failures == {}
    assert run.explanations["pristine"].first is not None and run.explanations["pristine"].first.what == "scaled"
    assert run.explanations["pristine-again"].is_equivalent


def test_bad_input_is_refused_by_name(toy: Path) -> None:
    done = runner.invoke(app, ["verify", "explain", "no-such-bug", "--project", str(toy)])
    assert done.exit_code == 2 and "unknown mutation: no-such-bug" in done.output
    pyproject = toy / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('observe = "toy.observe:make_observer"\n', ""))
    # No observer and the gates off: nothing to observe, named. (No observer alone: the gates are the workloads.)
    with pytest.raises(NoObserverError, match="names no observer and the gates are not run as workloads"):
        explain_overrides(load_config(toy), {"x": {}}, SessionOptions(gate_workloads=False))


def test_an_observation_job_refuses_an_observer_that_is_not_module_function(toy: Path) -> None:
    with pytest.raises(ValueError, match="observe_spec must be 'module:function', got 'toy.observe'"):
        ObserveJob(toy, ("toy/arith.py",), (".",), ("toy",), "toy.observe", {})


def test_survivors_carry_their_explanation_into_every_report(toy: Path) -> None:
    from verify.cli.explain import add_explanations

    config = load_config(toy)
    mutations = load_mutations(config)
    survivors = ("scale-off", "times-one")
    report = RunReport(
        Baseline("green", ()),
        tuple(MutationResult(name, Status.SURVIVED if name in survivors else Status.KILLED) for name in mutations),
        required=tuple(mutations),
    )
    details = {name: Detail(m.bug_class, m.file) for name, m in mutations.items()}
    explained = add_explanations(config, mutations, report, details)
    assert explained["scale-off"].divergence.startswith("first divergence: ramp, step 0, row 0: scaled")
    assert explained["times-one"].divergence.startswith("observably equivalent on these fixtures")
    assert not explained["no-op"].divergence  # killed: only survivors are explained
    write_json(report, toy / "report.json", explained)
    _, read_back, _ = read_report(toy / "report.json")
    assert read_back["scale-off"].explanation == explained["scale-off"].explanation
    entry = next(m for m in json.loads((toy / "report.json").read_text())["mutations"] if m["name"] == "scale-off")
    assert entry["first_divergence"] == explained["scale-off"].divergence
    stryker = to_stryker(report, explained, toy)
    mutant = next(m for f in stryker["files"].values() for m in f["mutants"] if m["id"] == "scale-off")
    assert "first divergence: ramp, step 0, row 0: scaled" in mutant["statusReason"]
    last = toy / ".dflash-cache" / "last-report.json"
    last.parent.mkdir(exist_ok=True)  # made already: the explanations are kept there (verify.observe.kept)
    last.write_text((toy / "report.json").read_text())
    shown = runner.invoke(app, ["verify", "show", "-m", "scale-off", "--project", str(toy)])
    assert "explained: scale-off: first divergence: ramp, step 0, row 0: scaled" in shown.output


def test_the_sweep_sorts_its_survivors_and_writes_the_equivalent_ones_with_evidence(toy: Path) -> None:
    config = load_config(toy)
    mutations = load_mutations(config)

    def survivor(key: str, name: str) -> SweepMutant:
        m = all_mutations()[name]
        return SweepMutant(key, m.file, "scale", Status.SURVIVED, original=m.anchor, mutated=m.replacement,
                           anchor=m.anchor, replacement=m.replacement)  # fmt: skip

    keys = {"toy.engine.x_scale__mutmut_1": "scale-off", "toy.engine.x_scale__mutmut_2": "times-one",
            "toy.engine.x_scale__mutmut_3": "scale-off-again"}  # fmt: skip
    result = SweepResult(str(toy), ("toy/engine.py",), tuple(survivor(k, n) for k, n in keys.items()), (),
                         SweepOutcome.COMPLETE, 1.0, 1)  # fmt: skip
    found = triage(config, result)
    assert found.counts == {"observed": 3, "observably equivalent": 1, "observable": 2, "duplicates": 1,
                            "not observed (not reached)": 0, "not observed (harness)": 0}  # fmt: skip
    path = toy / "mutations" / "equivalents.toml"
    assert write_equivalents(path, found, result) == 1
    assert write_equivalents(path, found, result) == 0  # already marked: nothing appended twice
    (entry,) = equivalents.load(path)
    assert entry.matches(result.find("toy.engine.x_scale__mutmut_2"))  # type: ignore[arg-type]
    assert entry.evidence.startswith("observably equivalent (dflash sweep explain): 2 workloads")
    assert "|mutant - pristine| <= 1e-06" in entry.evidence and entry.evidence.endswith("bit-identical")
    # An entry argued in prose gains the observation's evidence beside its reason, once.
    prose = equivalents.entry_toml(result.find("toy.engine.x_scale__mutmut_2"), "x * 1.0 is exact")  # type: ignore[arg-type]
    path.write_text("# header kept\n\n" + prose)
    assert annotate_equivalents(path, found, result) == 1
    assert annotate_equivalents(path, found, result) == 0
    (entry,) = equivalents.load(path)
    assert entry.reason == "x * 1.0 is exact" and entry.evidence.endswith("bit-identical")
    assert path.read_text().startswith("# header kept\n")
    state = toy / "sweep.json"
    write_sweep(state, result, mutations)
    done = runner.invoke(app, ["sweep", "explain", "toy.engine.x_scale__mutmut_1", "--root", str(toy),
                               "--state", str(state)])  # fmt: skip
    assert done.exit_code == 0, done.output
    assert "toy.engine.x_scale__mutmut_1: first divergence: ramp, step 0, row 0: scaled" in done.output


def test_a_mutant_that_hangs_is_observed_as_a_timeout_and_one_that_dies_is_the_harness_s(toy: Path) -> None:
    source = (toy / "toy" / "engine.py").read_text()
    mutants = {
        "hangs": {"toy/engine.py": source.replace("return x * 2.5", "while True:\n        pass")},
        "dies": {"toy/engine.py": source.replace("return x * 2.5", "import os\n\n    os._exit(7)")},
    }
    run = explain_overrides(load_config(toy), mutants, SessionOptions(min_budget_s=1.0, budget_factor=1.0))
    hangs = run.explanations["hangs"]
    assert hangs.first is not None and (hangs.first.workload, hangs.first.what) == ("ramp", "timeout")
    assert "dies" not in run.explanations  # no observation: never explained, never equivalent
    assert "the child ended without a result" in run.failures["dies"]
