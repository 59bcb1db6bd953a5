"""Hostile mutants against the real CLI: nothing the harness suffers may become a verdict.

A small project is written per test: mutants that delete a gate file, write into the tree, raise
KeyboardInterrupt, SystemExit or RuntimeError, break a declared invariant, sleep past any budget or change
nothing; a gate that fails one run in three on the unmutated tree; and a run ended by SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from verify.mutation import Mutation
from verify.report.json_report import read_json
from verify.report.verdict import Status

CORE = '''"""Code under test."""


class InvariantBroken(Exception):
    """The project's own named check."""


def add(a, b):
    return a + b


def checked(n):
    if n < 0:
        raise InvariantBroken("negative")
    return n


def mul(a, b):
    return a * b
'''

GATES = """import pytest
from hostile import core


@pytest.mark.gate
def test_add():
    assert core.add(2, 3) == 5


@pytest.mark.gate
def test_checked():
    assert core.checked(3) == 3


@pytest.mark.gate
def test_mul():
    assert core.mul(4, 3) == 12


@pytest.mark.gate
@pytest.mark.skip(reason="needs a GPU")
def test_gpu_only():
    assert core.mul(1, 1) == 2
"""

# A gate that fails every third run on the unmutated tree; the counter lives outside the project (the
# harness gives every child a fresh copy, so a counter inside it would never advance).
FLAKY_GATE = """import os
import pytest
from hostile import core


@pytest.mark.gate
def test_sometimes():
    path = os.environ["HOSTILE_COUNTER"]
    count = int(open(path).read() or 0) if os.path.exists(path) else 0
    open(path, "w").write(str(count + 1))
    core.add(1, 1)
    # Green on its first run (the baseline's), then red on every third: runs 3, 6, 9, ...
    assert count < 2 or count % 3 != 2, f"flaky failure on run {count}"
"""

# A gate that writes down a draw from numpy's global generator, never seeded (outside the project, as above).
RANDOM_GATE = """import os
import numpy
import pytest
from hostile import core


@pytest.mark.gate
def test_draws():
    with open(os.environ["HOSTILE_DRAWS"], "a") as draws:
        draws.write(f"{numpy.random.randint(2**31)}\\n")
    assert core.add(1, 1) == 2
"""

MUTATIONS = {
    "assertion-kill": ("return a + b", "return a + b + 1"),
    "deletes-gate-file": (
        "return a + b",
        "return __import__('os').remove(__import__('pathlib').Path(__file__).parents[1] / 'tests/gates/test_core.py')"
        " or a + b",
    ),
    "writes-into-tree": (
        "return a * b",
        "return (__import__('pathlib').Path(__file__).parent / 'written.txt').write_text('x') and a * b",
    ),
    "keyboard-interrupt": ("return a * b", "raise KeyboardInterrupt"),
    "system-exit": ("return a * b", "raise SystemExit(3)"),
    "runtime-error": ("return a * b", "raise RuntimeError('boom')"),
    "breaks-invariant": ("return n\n", "return checked(-1)\n"),
    "sleeps": ("return a * b", "__import__('time').sleep(600)"),
    "changes-nothing": ("return a + b", "return b + a"),
}

EXPECTED = {
    "assertion-kill": Status.KILLED,
    "deletes-gate-file": Status.SURVIVED,
    "writes-into-tree": Status.SURVIVED,
    "keyboard-interrupt": Status.CRASHED,
    "system-exit": Status.CRASHED,
    "runtime-error": Status.CRASHED,
    "breaks-invariant": Status.CAUGHT,
    "sleeps": Status.TIMEOUT,
    "changes-nothing": Status.SURVIVED,
}


def _write_project(
    make,
    root: Path,
    names: list[str],
    *,
    flaky: bool = False,
    jobs: int = 2,
    gate_sleep: float = 0,
    draws: bool = False,
) -> Path:
    # The flaky and random gates keep their counters in the folder beside the project, declared writable: a
    # confined child may write nothing else outside its own copy.
    body = (
        GATES
        if not gate_sleep
        else GATES.replace("def test_add():", f"def test_add():\n    __import__('time').sleep({gate_sleep})")
    )
    gates = {"test_core.py": body}
    if flaky:
        gates["test_flaky.py"] = FLAKY_GATE
    if draws:
        gates["test_draws.py"] = RANDOM_GATE
    return make(root).write(
        core=CORE,
        gates=gates,
        mutations=[Mutation(name, f"hostile: {name}", "hostile/core.py", *MUTATIONS[name]) for name in names],
        settings={
            "jobs": jobs, "timeout_factor": 5.0, "timeout_min_s": 3.0, "flake_reruns": 3,
            "preload": ["numpy.random"] if draws else [], "invariant_errors": ["hostile.core.InvariantBroken"],
        },
    ).root  # fmt: skip


def _statuses(path: Path) -> dict[str, Status]:
    return {r.name: r.status for r in read_json(path)[0].mutations}


def test_hostile_mutants_get_honest_verdicts_and_cannot_touch_each_other(
    tmp_path, cli, hash_tree, hostile_project
) -> None:
    root = _write_project(hostile_project, tmp_path / "p", list(MUTATIONS))
    before = hash_tree(root)
    result = cli("--project", str(root), "--json", str(tmp_path / "r.json"))
    report = read_json(tmp_path / "r.json")[0]
    statuses = {r.name: r.status for r in report.mutations}
    assert statuses == EXPECTED, result.output
    # A gate that skips itself on this machine is not one of its gates: not in the baseline, never "not-run".
    assert "tests/gates/test_core.py::test_gpu_only" not in report.baseline.gate_ids
    by_name = {r.name: r for r in report.mutations}
    assert by_name["keyboard-interrupt"].outcomes[0].exc_type == "KeyboardInterrupt"
    assert by_name["system-exit"].outcomes[0].exc_type == "SystemExit"
    assert all(by_name[n].attempts == 2 for n in ("keyboard-interrupt", "runtime-error", "sleeps", "breaks-invariant"))
    assert result.exit_code == 1, result.output  # survivors and crashes fail the run; nothing is an error
    assert hash_tree(root) == before  # the user's tree is byte-identical, the writer's file included

    # A mutant that deleted a gate file in its copy changed nobody else's verdict: the same run without it.
    others = [n for n in MUTATIONS if n not in ("deletes-gate-file", "sleeps")]
    alone = _write_project(hostile_project, tmp_path / "q", others)
    cli("--project", str(alone), "--json", str(tmp_path / "q.json"))
    assert _statuses(tmp_path / "q.json") == {n: EXPECTED[n] for n in others}

    # Timeouts, crashes and errors are never cached: a second run re-runs them.
    again = cli("--project", str(root), "--json", str(tmp_path / "r2.json"))
    second = {r.name: r for r in read_json(tmp_path / "r2.json")[0].mutations}
    assert second["assertion-kill"].cached and second["changes-nothing"].cached, again.output
    for name in ("sleeps", "runtime-error", "keyboard-interrupt"):
        assert not second[name].cached and second[name].status is EXPECTED[name]


def test_a_gate_failing_one_run_in_three_is_flaky_and_its_kills_do_not_count(
    tmp_path, cli, monkeypatch, hostile_project
) -> None:
    monkeypatch.setenv("HOSTILE_COUNTER", str(tmp_path / "shared" / "counter"))
    root = _write_project(hostile_project, tmp_path / "p", ["changes-nothing", "assertion-kill"], flaky=True, jobs=1)
    result = cli("--project", str(root), "--json", str(tmp_path / "r.json"))
    report = read_json(tmp_path / "r.json")[0]
    assert [g for g, _ in report.flaky_gates] == ["tests/gates/test_flaky.py::test_sometimes"], result.output
    statuses = {r.name: r for r in report.mutations}
    assert statuses["changes-nothing"].status is Status.SURVIVED  # whatever the flaky gate did to it
    assert statuses["assertion-kill"].status is Status.KILLED
    assert "test_flaky" not in " ".join(statuses["assertion-kill"].killed_by)
    assert "flaky" in result.output
    # The same tree again, verdicts from the cache: the flaky gate is still flaky and its kill still void (a
    # cached result must not turn what the flake check found back into a kill).
    again = cli("--project", str(root), "--json", str(tmp_path / "r2.json"))
    second = read_json(tmp_path / "r2.json")[0]
    assert [g for g, _ in second.flaky_gates] == ["tests/gates/test_flaky.py::test_sometimes"], again.output
    cached = {r.name: r for r in second.mutations}
    assert all(r.cached for r in cached.values()), again.output
    assert cached["changes-nothing"].status is Status.SURVIVED, again.output
    assert "test_flaky" not in " ".join(cached["assertion-kill"].killed_by)


def test_first_kill_by_a_flaky_gate_runs_the_mutant_on_past_it(tmp_path, cli, monkeypatch, hostile_project) -> None:
    # A gate green on the unmutated baseline that then fails every other run, the mutant's first. It is the
    # fastest gate reaching `assertion-kill`, so first-kill mode stops that mutant at its red; the flake check
    # then finds it flaky. Judged on the gates before it alone, the mutant would "survive"; it must run on and
    # die to test_add.
    monkeypatch.setenv("HOSTILE_COUNTER", str(tmp_path / "shared" / "counter"))
    root = _write_project(hostile_project, tmp_path / "p", ["assertion-kill"], flaky=True, jobs=1, gate_sleep=0.3)
    gate = root / "tests" / "gates" / "test_flaky.py"
    gate.write_text(gate.read_text().replace("count < 2 or count % 3 != 2", "count % 2 == 0"))
    result = cli("--project", str(root), "--first-kill", "--json", str(tmp_path / "r.json"))
    report = read_json(tmp_path / "r.json")[0]
    assert [g for g, _ in report.flaky_gates] == ["tests/gates/test_flaky.py::test_sometimes"], result.output
    (mutant,) = report.mutations
    assert mutant.outcomes[0].gate_id.endswith("test_sometimes"), "the flaky gate did not run first"
    assert mutant.status is Status.KILLED, result.output
    assert mutant.killed_by == ("tests/gates/test_core.py::test_add",)


def test_every_child_draws_fresh_random_numbers_as_a_fresh_process_would(
    tmp_path, cli, monkeypatch, hostile_project
) -> None:
    # The parent has imported (and so seeded) numpy's global generator before forking. A child that kept the
    # parent's state would draw the same number as every other child, so a gate failing by chance would fail
    # in all of them or in none: invisible to the flake check, or a kill that is only the draw.
    monkeypatch.setenv("HOSTILE_DRAWS", str(tmp_path / "shared" / "draws"))
    root = _write_project(hostile_project, tmp_path / "p", ["changes-nothing", "assertion-kill"], jobs=1, draws=True)
    # --no-explain: the survivor's explanation runs the gates again in its own children, which draw too.
    result = cli("--project", str(root), "--all-gates", "--no-explain")
    draws = (tmp_path / "shared" / "draws").read_text().split()
    # The baseline's, one per mutant, and the flake check's three re-runs (assertion-kill turns it red too).
    assert len(draws) == 6, result.output
    assert len(set(draws)) == len(draws), draws


def test_sigterm_kills_every_child_cleans_up_and_the_next_run_resumes(tmp_path, hostile_project) -> None:
    names = ["assertion-kill", "changes-nothing", "runtime-error", "writes-into-tree", "system-exit"]
    root = _write_project(hostile_project, tmp_path / "p", names, jobs=1, gate_sleep=1.5)
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp)}
    command = [sys.executable, "-m", "verify", "verify", "--project", str(root)]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    last = root / ".dflash-cache" / "last-report.json"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if last.is_file() and json.loads(last.read_text() or "{}").get("mutations"):
            break
        time.sleep(0.1)
    assert process.poll() is None, process.communicate()[0]
    children = subprocess.run(["pgrep", "-P", str(process.pid)], capture_output=True, text=True).stdout.split()
    sent = time.monotonic()
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=30)
    assert process.returncode == 143, output
    assert time.monotonic() - sent < 10
    time.sleep(2)
    for pid in children:
        with pytest.raises(ProcessLookupError):
            os.kill(int(pid), 0)
    assert list(temp.iterdir()) == [], "temp dirs left behind"
    finished = {m["name"] for m in json.loads(last.read_text())["mutations"]}
    assert finished and len(finished) < len(names)
    assert "interrupted by SIGTERM" in " ".join(output.split())
    resumed = subprocess.run(command + ["--json", str(tmp_path / "r.json")], env=env, capture_output=True, text=True)
    report = read_json(tmp_path / "r.json")[0]
    assert {r.name for r in report.mutations} == set(names), resumed.stdout
    assert {r.name for r in report.mutations if r.cached} >= finished - {"runtime-error", "system-exit"}
