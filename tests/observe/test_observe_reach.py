""" "Observably equivalent" only where the workloads ran the change: line and branch coverage of the mutated lines.

A generated project's observer never calls one function and never takes one way of a condition: a mutant there
is "not observed", naming the line or the way, and a rewrite the workloads run stays "observably equivalent"
with its coverage shown (terminal and JSON). On the embedded runner, a stop token inside an accepted block that
no longer cuts the output (a real bug the gates kill, once called equivalent) diverges on the new workloads.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from verify.cli import app
from verify.config.settings import load_config
from verify.mutation import Mutation
from verify.observe import reach
from verify.observe.api import SessionOptions, explain_overrides, mutant_texts

REPO = Path(__file__).resolve().parents[2]
_NOT_COPIED = (".venv", ".git", "site", ".cache", ".dflash-cache", "__pycache__", "mutants", "reports", ".pytest_cache")

ENGINE = """\
def scale(x):
    return x * 2.5


def clip(values, low):
    out = []
    for v in values:
        if v < low:
            v = low
        out.append(v)
    return out


def unused(x):
    return x - 1
"""
OBSERVER = """\
from gauge.engine import clip, scale


class Observer:
    workloads = ("ramp",)

    def run(self, workload, emit):
        for step in range(3):
            emit(step, 0, "scaled", scale(float(step)))
            emit(step, 0, "clipped", clip([1.0, 2.0, 3.0], 0.0))  # never below the floor


def make_observer():
    return Observer()
"""
CATALOG = """\
from verify.mutation import Mutation, register

register(
    Mutation("unused-off", "a function nothing calls", "gauge/engine.py", "return x - 1", "return x - 2"),
    Mutation("clip-at-the-floor", "clips at the floor too", "gauge/engine.py", "if v < low:", "if v <= low:"),
    Mutation("times-one", "x * 1.0: exact", "gauge/engine.py", "return x * 2.5", "return x * 1.0 * 2.5"),
)
"""
PYPROJECT = """\
[tool.dflash]
mutation_modules = ["gauge_mutations"]
source_roots = ["gauge"]
gates = ["tests"]
observe = "gauge.observe:make_observer"
"""


def _project(root: Path) -> Path:
    files = {"gauge/__init__.py": "", "gauge/engine.py": ENGINE, "gauge/observe.py": OBSERVER,
             "gauge_mutations.py": CATALOG, "pyproject.toml": PYPROJECT, "tests/.keep": ""}  # fmt: skip
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_changed_lines_and_what_was_not_reached() -> None:
    assert reach.changed_lines("a\nb\nc\n", "a\nB\nc\n") == [2]
    assert reach.changed_lines("a\nb\nc\n", "a\nc\n") == [2]  # a deletion marks the line now in its place
    facts = {"f.py": {"lines": [8, 15], "ran": [8], "branches": {"8": {"exits": [9, 10], "taken": [10]}}, "gates": []}}
    assert reach.unreached(facts) == ("f.py line 8: the way to line 9 never taken", "f.py line 15 not reached")
    assert reach.describe(facts) == "f.py changed lines 8, 15: 1/2 ran; line 8: 1/2 ways taken"


def test_equivalent_only_where_the_change_ran_and_its_branch_was_taken(tmp_path: Path) -> None:
    root = _project(tmp_path / "project")
    out = tmp_path / "explained.json"
    names = ["unused-off", "clip-at-the-floor", "times-one"]
    done = CliRunner().invoke(app, ["verify", "explain", *names, "--json", str(out), "--project", str(root)])
    assert done.exit_code == 0, done.output
    text = " ".join(done.output.split())
    assert "unused-off: not observed: gauge/engine.py line 15 not reached in 1 workloads: no claim either way" in text
    assert (
        "clip-at-the-floor: not observed: gauge/engine.py line 8: the way to line 9 never taken in 1 workloads" in text
    )
    assert (
        "times-one: observably equivalent on these fixtures (1 workloads, 2 observables compared), "
        "gauge/engine.py changed line 2: 1/1 ran" in text
    )
    assert "0 observable, 1 observably equivalent, 0 duplicates, 2 not observed" in text
    data = json.loads(out.read_text())["explanations"]
    assert (data["unused-off"]["equivalent"], data["unused-off"]["observed"]) == (False, False)
    assert data["unused-off"]["not_reached"] == ["gauge/engine.py line 15 not reached"]
    assert data["clip-at-the-floor"]["coverage"] == {
        "gauge/engine.py": {"lines": [8], "ran": [8], "branches": {"8": {"exits": [9, 10], "taken": [10]}}, "gates": []}
    }
    assert data["times-one"]["equivalent"] and data["times-one"]["not_reached"] == []
    assert data["times-one"]["coverage"] == {"gauge/engine.py": {"lines": [2], "ran": [2], "branches": {}, "gates": []}}


def test_a_stop_token_inside_an_accepted_block_that_no_longer_cuts_is_observable(tmp_path: Path) -> None:
    """Once called "observably equivalent": no workload stopped inside a block. The gates kill it. On a copy of
    the repository: its checkout is watched for the whole observation (minutes), and the suite's other
    processes write bytecode into it (its .venv included), which the watch rightly calls a change."""
    root = tmp_path / "repo"
    shutil.copytree(REPO, root, ignore=shutil.ignore_patterns(*_NOT_COPIED))
    config = load_config(root)
    bug = Mutation(
        "stop-inside-block-not-cut", "a stop token inside an accepted block ends the request but the block's "
        "tokens after it are kept", "runner/request.py", "                produced = i + 1\n",
        "                produced = produced\n",
    )  # fmt: skip
    texts, stale = mutant_texts({bug.name: bug}, root)
    assert not stale
    run = explain_overrides(config, texts, SessionOptions(jobs=2, first_only=True))
    explanation = run.explanations[bug.name]
    assert explanation.first is not None, explanation.text()
    assert explanation.first.workload.endswith("ends inside a block"), explanation.text()
    assert explanation.reach["runner/request.py"]["ran"] == explanation.reach["runner/request.py"]["lines"] != []
