"""The example that is not DFlash-shaped (examples/lookup-engine: an n-gram lookup drafter in front of a tiny
attention model, an unmarked suite calling the gate kit) adopted as a user would, through the real CLI in
subprocesses: `dflash init`, `dflash verify`, `dflash verify explain` on its survivor, `dflash sweep`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from verify.compat import tomllib

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "lookup-engine"
SUITE = "tests/test_engine.py"
RULE = f"{SUITE}::test_acceptance_rule_has_speculative_samplings_law"
GREEDY = f"{SUITE}::test_speculative_equals_plain_under_greedy"
BATCH = f"{SUITE}::test_batched_logits_equal_each_prompt_alone"
FIRST = f"{SUITE}::test_first_token_follows_the_targets_law"
# Each registered bug and the gate kit checks that kill it (the example's README table); None: it survives.
KILLED_BY: dict[str, set[str] | None] = {
    "ratio-inverted": {RULE, FIRST},
    "residual-not-subtracting-draft": {RULE, FIRST},
    "bonus-off-by-one": {RULE},
    "acceptance-past-first-mismatch": {GREEDY},
    "cache-crop-off-by-one": {GREEDY},
    "cache-write-shifted": {BATCH},
    "position-offset": {BATCH},
    "drafter-context-one-back": None,  # lossless: only the drafted blocks change
}
# What the suite makes of mutmut 3.8.1's operator mutants of lookupspec/greedy.py (14, numbered by mutmut): two
# are marked equivalent in the example's equivalents.toml (`strict=None`, `strict` left out); `strict=True` and
# `accepted = 1` survive, since no greedy prompt accepts a whole drafted block.
SWEEP = {f"lookupspec.greedy.x_greedy_accept__mutmut_{n}": "equivalent" for n in (5, 8)}
SWEEP |= {f"lookupspec.greedy.x_greedy_accept__mutmut_{n}": "survived" for n in (9, 12)}


def _dflash(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "verify", *args], cwd=root, capture_output=True, text=True, env=env, timeout=600,
        check=False,
    )  # fmt: skip


def adopt(root: Path) -> subprocess.CompletedProcess[str]:
    """`dflash init` adopts the engine's existing, unmarked suite (and checks its baseline), then the one edit a
    user of this engine makes: the catalog is the engine's own module, not init's example, plus its observer.
    The one place that knows what init writes: adapt it here when init changes."""
    done = _dflash(root, "init")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "baseline: green" in done.stdout, done.stdout
    pyproject = root / "pyproject.toml"
    table = tomllib.loads(pyproject.read_text())["tool"]["dflash"]
    assert table["gates"] == ["tests"] and table["gate_marker"] == "", table  # the whole suite, no marker
    assert not (root / "tests" / "gates").exists()  # nothing DFlash-shaped written beside the suite
    # The suite's law checks (the gate kit's statistical ones) are marked statistical; the exact ones are not.
    assert table["statistical_gates"] == [RULE, FIRST], table
    # Init's catalogs: its example and the proposals from the engine's code (measured in tests/propose).
    assert table["mutation_modules"] == ["lookupspec_mutations", "proposed_mutations"], table
    text = pyproject.read_text().replace(
        'mutation_modules = ["lookupspec_mutations", "proposed_mutations"]', 'mutation_modules = ["engine_mutations"]'
    )
    pyproject.write_text(text + 'observe = "lookupspec.observe:make_observer"\njobs = 2\n')
    (root / "lookupspec_mutations.py").unlink()  # init's example mutation: this engine has its own catalog
    (root / "proposed_mutations.py").unlink()
    table = tomllib.loads(pyproject.read_text())["tool"]["dflash"]
    assert table["mutation_modules"] == ["engine_mutations"], table
    return done


@pytest.fixture(scope="module")
def adopted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str], dict]:
    root = tmp_path_factory.mktemp("outside") / "lookup-engine"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("__pycache__", ".dflash-cache", "mutants"))
    adopt(root)
    report = root.parent / "verify.json"
    done = _dflash(root, "verify", "--json", str(report))
    print(done.stdout)  # the run's table, for the record
    return root, done, json.loads(report.read_text()) if report.is_file() else {}


@pytest.mark.slow
def test_the_gate_kit_kills_every_rule_bug_and_the_survivor_is_reported(adopted) -> None:
    _, done, report = adopted
    assert done.returncode == 1, done.stdout + done.stderr  # one survivor: exit 1
    assert {m["name"]: set(m["killed_by"]) or None for m in report["mutations"]} == KILLED_BY
    assert "survived: drafter-context-one-back: first divergence: greedy, step 0, row 0: drafted" in done.stdout


@pytest.mark.slow
def test_explain_names_the_survivors_first_divergence(adopted) -> None:
    root, _, _ = adopted
    done = _dflash(root, "verify", "explain", "drafter-context-one-back")
    assert done.returncode == 0, done.stdout + done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith("drafter-context-one-back: first divergence: greedy, step 0, row 0: drafted:"), first
    # Measured in the run (the gates whose recorded values differ), not the observer's mapping.
    assert "a gate that would see it: tests/test_engine.py::test_speculative_equals_plain_under_greedy" in done.stdout


@pytest.mark.slow
def test_a_sweep_of_greedy_acceptance_finds_what_the_suite_never_exercises(adopted, tmp_path: Path) -> None:
    root, _, _ = adopted
    report = tmp_path / "sweep.json"
    args = ["--jobs", "2", "--no-explain", "--workdir", str(tmp_path / "work"), "--state", str(tmp_path / "s.json")]
    args += ["--equivalents", "equivalents.toml", "--json", str(report)]
    done = _dflash(root, "sweep", *args, "lookupspec/greedy.py")
    assert done.returncode == 1, done.stdout + done.stderr  # survivors: under --fail-under 1.0
    mutants = {m["name"]: m["status"] for m in json.loads(report.read_text())["mutations"]}
    assert len(mutants) == 14 and {n: s for n, s in mutants.items() if s != "killed"} == SWEEP, mutants
