"""`dflash verify explain` with no observer configured: the engine's own gates that reach a mutant's changed lines
are the workloads, what the source roots' functions return is recorded in call order, and the first function
whose result differs is named (qualified name, file:line, what differs) with the gates that reached it, measured
in the run. A do-nothing rewrite of a reached line is observably equivalent; a change no gate runs is not observed.
Through the real CLI, on the toy, on a copy of this repository's runner and on a copy of examples/lookup-engine."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from verify.cli import app
from verify.observe import gate_record
from verify.observe.record import Recorder

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()

# A gate of the toy that runs its engine and checks only the number of ids: scale-off survives it.
TOY_GATE = """import pytest
import torch

from toy.engine import ids

pytestmark = pytest.mark.gate


def test_ids_come_out() -> None:
    assert len(ids(torch.arange(4.0))) == 4
"""


def _without_observer(toy: Path) -> Path:
    pyproject = toy / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('observe = "toy.observe:make_observer"\n', ""))
    (toy / "tests" / "test_toy_ids.py").write_text(TOY_GATE)
    return toy


def test_without_an_observer_the_gates_name_the_first_diverging_function(toy: Path) -> None:
    _without_observer(toy)
    out = toy / "explained.json"
    names = ["scale-off", "times-one", "no-op"]
    done = runner.invoke(app, ["verify", "explain", *names, "--jobs", "2", "--json", str(out), "--project", str(toy)])
    assert done.exit_code == 0, done.output
    gate = "tests/test_toy_ids.py::test_ids_come_out"
    assert f"scale-off: first divergence: {gate}, step 0: toy.engine.scale: max |diff|" in done.output
    assert "first function whose result differs: toy.engine.scale (toy/engine.py:6), its return number 1" in done.output
    assert "first at (1,): 2.5 -> 3" in done.output  # the first differing index and both values
    assert f"a gate that would see it: {gate} (measured in this run" in done.output
    assert f"gates that ran the changed lines (measured): {gate}" in done.output
    assert "times-one: observably equivalent on these fixtures" in done.output
    assert "no-op: observably equivalent on these fixtures" in done.output
    data = json.loads(out.read_text())["explanations"]
    assert data["scale-off"]["first"]["what"] == "toy.engine.scale"
    assert data["scale-off"]["where"] == "toy/engine.py:6"
    assert data["scale-off"]["gates_diverging"] == [gate] and data["scale-off"]["gates_reached"] == [gate]
    assert data["times-one"]["equivalent"] is True and "toy.engine.ids" in data["times-one"]["compared"]
    assert data["no-op"]["coverage"]["toy/engine.py"]["gates"] == [gate]  # the changed line ran, in that gate


def test_a_change_no_gate_runs_is_not_observed(toy: Path) -> None:
    _without_observer(toy)
    (toy / "tests" / "test_toy_ids.py").write_text(TOY_GATE.replace("from toy.engine import ids", "ids = len"))
    done = runner.invoke(app, ["verify", "explain", "scale-off", "--project", str(toy)])
    assert done.exit_code == 0, done.output
    assert "scale-off: not observed: toy/engine.py line 7 not reached in 0 workloads" in done.output


def test_the_recording_is_bounded_and_says_so() -> None:
    recorder = Recorder()
    limits = gate_record.RecordLimits(calls_per_gate=3, tensor_elements=4, items=2)
    plugin = gate_record._Recorder(REPO, ("verify",), recorder, limits, None, None)
    value = plugin._bounded(torch.arange(10.0), 0)
    assert value[0] == "tensor sampled" and value[1] == (10,) and value[2].tolist() == [0.0, 3.0, 6.0, 9.0]
    assert plugin._bounded([1, 2, 3, 4], 0) == (1, 2, "... 2 more")
    plugin._end("g")
    assert plugin.capped == {"g": "1 tensors over 4 values sampled"}
    with pytest.raises(ValueError, match="calls_per_gate must be an integer >= 1"):
        gate_record.RecordLimits(calls_per_gate=0)


# ---- this repository's runner, copied without its observer and with one weak gate -----------------------------

RUNNER_GATE = """import json
from pathlib import Path

import pytest

import runner
from runner import Engine, EngineConfig, SamplingParams

pytestmark = pytest.mark.gate
FIXTURE = Path(runner.__file__).parent / "fixtures" / "stride-dflash"


def test_the_engine_emits_tokens() -> None:
    prompts = json.loads((FIXTURE / "manifest.json").read_text())["audit_prompts"][:2]
    engine = Engine.from_pretrained(FIXTURE / "target", FIXTURE / "draft", config=EngineConfig(max_num_seqs=2))
    outputs = engine.generate([list(p) for p in prompts], SamplingParams(max_tokens=12))
    assert all(len(out) > 0 for out in outputs)
"""


def _dflash(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "verify", *args], cwd=root, capture_output=True, text=True, env=env,
                          timeout=900, check=False)  # fmt: skip


@pytest.mark.slow
def test_explain_without_an_observer_on_this_repositorys_runner(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copytree(REPO / "runner", root / "runner", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "mutations", root / "mutations", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "gates").mkdir()
    (root / "gates" / "test_smoke.py").write_text(RUNNER_GATE)
    (root / "pyproject.toml").write_text(
        '[project]\nname = "copy"\nversion = "0"\n\n[tool.dflash]\nmutation_modules = ["mutations"]\n'
        'gates = ["gates"]\nsource_roots = ["runner"]\ninvariant_errors = ["runner.errors.RunnerError"]\n'
    )
    done = _dflash(root, "verify", "explain", "draft-context-positions-shifted")
    assert done.returncode == 0, done.stdout + done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith(
        "draft-context-positions-shifted: first divergence: gates/test_smoke.py::test_the_engine_"
    ), first
    assert "first function whose result differs: runner." in done.stdout
    assert "a gate that would see it: gates/test_smoke.py::test_the_engine_emits_tokens (measured" in done.stdout


# ---- examples/lookup-engine, copied without its observer ---------------------------------------------------------

LOOKUP_TABLE = """
[tool.dflash]
mutation_modules = ["engine_mutations"]
source_roots = ["lookupspec"]
gates = ["tests"]
gate_marker = ""
invariant_errors = []
jobs = 2
"""
# A do-nothing rewrite of a line every rule check runs: x * 1.0 is exact.
TIMES_ONE = """
register(Mutation(name="ratio-times-one", bug_class="p * 1.0: exact", file="lookupspec/accept.py",
                  anchor="ratio = p[i, x] / q[i, x]", replacement="ratio = p[i, x] * 1.0 / q[i, x]"))
"""


@pytest.mark.slow
def test_explain_without_an_observer_on_the_lookup_example(tmp_path: Path) -> None:
    root = tmp_path / "lookup-engine"
    shutil.copytree(REPO / "examples" / "lookup-engine", root, ignore=shutil.ignore_patterns("__pycache__", "mutants"))
    (root / "lookupspec" / "observe.py").unlink()  # no observer at all: the user writes only gates
    (root / "pyproject.toml").write_text((root / "pyproject.toml").read_text() + LOOKUP_TABLE)
    (root / "engine_mutations.py").write_text((root / "engine_mutations.py").read_text() + TIMES_ONE)
    done = _dflash(root, "verify", "explain", "drafter-context-one-back", "ratio-times-one", "--jobs", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith("drafter-context-one-back: first divergence: tests/test_engine.py::"), first
    assert "first function whose result differs: lookupspec.drafter.NGramDrafter." in done.stdout
    assert "a gate that would see it: tests/test_engine.py::" in done.stdout
    assert "ratio-times-one: observably equivalent on these fixtures" in done.stdout
    assert "lookupspec/accept.py changed line 17: 1/1 ran" in done.stdout
    assert "recording capped: tests/test_engine.py::test_acceptance_rule_has_speculative_samplings_law: " in done.stdout
