"""Mutants that bend their own verdict, against the real CLI at --jobs 2: one that rewrites pytest's report
construction, one that deafens the recorder's red set (found through the garbage collector), one that blocks
every catchable signal and sleeps, and a job budget capped by max_job_s. Each beside controls."""

from __future__ import annotations

from pathlib import Path

from tests.arith_texts import CORE
from verify.mutation import Mutation
from verify.report.json_report import read_json
from verify.report.verdict import MutationResult, Status
from verify.run.execution.ceilings import load_scale
from verify.run.execution.overtime import limit_s

GATES = """import time

import pytest
from hostile import core


@pytest.mark.gate
def test_add():
    assert core.add(2, 3) == 5


@pytest.mark.gate
def test_mul():
    assert core.mul(4, 3) == 12


@pytest.mark.gate
def test_slow():
    time.sleep(1.0)
    assert core.add(1, 1) == 2 and core.mul(1, 1) == 1
"""

# What the hostile mutants call: a module of the project the mutated lines import, unchanged itself.
FORGE = '''"""How a mutant in the gates' own process bends its verdict."""
import gc
import signal
import time


def forge_report():
    from _pytest.reports import TestReport

    original = TestReport.from_item_and_call.__func__

    def passed(cls, item, call):
        report = original(cls, item, call)
        report.outcome, report.longrepr = "passed", None
        return report

    TestReport.from_item_and_call = classmethod(passed)


def deafen_recorder():
    class Deaf(dict):
        def __setitem__(self, key, value):
            pass

    for thing in gc.get_objects():
        if type(thing).__name__ == "Recorder":
            thing._red = Deaf()


def deaf_hang():
    catchable = set(signal.Signals) - {signal.SIGKILL, signal.SIGSTOP}
    signal.pthread_sigmask(signal.SIG_BLOCK, catchable)
    for signum in catchable:
        try:
            signal.signal(signum, signal.SIG_IGN)
        except (OSError, ValueError):
            pass
    while True:
        time.sleep(3600)
'''

MUTATIONS = {
    "assertion-kill": ("return a + b", "return a + b + 1"),
    "changes-nothing": ("return a * b", "return b * a"),
    "forges-report": ("return a + b", "return __import__('hostile.forge').forge.forge_report() or a + b + 1"),
    "deafens-recorder": ("return a * b", "return __import__('hostile.forge').forge.deafen_recorder() or a * b + 1"),
    "deaf-hang": ("return a + b", "return __import__('hostile.forge').forge.deaf_hang()"),
    "sleeps": ("return a * b", "__import__('time').sleep(600)"),
}


def _project(make, root: Path, names: list[str], **settings: object) -> Path:
    return (
        make(root)
        .write(
            core=CORE,
            gates={"test_core.py": GATES},
            modules={"forge.py": FORGE},
            mutations=[Mutation(name, f"hostile: {name}", "hostile/core.py", *MUTATIONS[name]) for name in names],
            settings={"jobs": 2, "preload": [], "flake_reruns": 1, **settings},
        )
        .root
    )


def _run(cli, tmp_path: Path, root: Path) -> tuple[dict[str, MutationResult], str]:
    result = cli("--project", str(root), "--jobs", "2", "--json", str(tmp_path / "r.json"))
    return {r.name: r for r in read_json(tmp_path / "r.json")[0].mutations}, result.output


def test_a_mutant_that_rewrites_pytests_report_or_the_recorders_red_set_is_an_error_naming_it(
    tmp_path, cli, hostile_project
) -> None:
    names = ["assertion-kill", "changes-nothing", "forges-report", "deafens-recorder"]
    root = _project(hostile_project, tmp_path / "p", names, timeout_factor=5.0, timeout_min_s=10.0)
    results, output = _run(cli, tmp_path, root)
    assert results["assertion-kill"].status is Status.KILLED, output
    assert results["changes-nothing"].status is Status.SURVIVED, output
    forged, deaf = results["forges-report"], results["deafens-recorder"]
    assert forged.status is Status.ERROR, (forged, output)
    assert "_pytest.reports.TestReport.from_item_and_call" in forged.tampered
    assert forged.reason.startswith("tampered with the harness") and forged.attempts == 1
    assert deaf.status is Status.ERROR, (deaf, output)
    assert "the recorder's _red" in deaf.tampered
    # The controls' verdicts are cached; a tampering is an error, never cached: the next run finds it again.
    again = cli("--project", str(root), "--jobs", "2", "--json", str(tmp_path / "r2.json"))
    second = {r.name: r for r in read_json(tmp_path / "r2.json")[0].mutations}
    assert second["assertion-kill"].cached and not second["forges-report"].cached, again.output
    assert second["forges-report"].status is Status.ERROR and second["forges-report"].tampered


def test_a_hang_that_blocks_every_signal_ends_at_its_gates_deadline_not_the_jobs_budget(
    tmp_path, cli, hostile_project
) -> None:
    # test_add's deadline is timeout_min_s (2 s: its baseline time is next to nothing); the job also runs
    # test_slow (1 s, so a budget of 50 s), and the deaf mutant hangs in test_add, the first gate it runs.
    root = _project(hostile_project, tmp_path / "p", ["deaf-hang", "assertion-kill"], timeout_factor=50.0,
                    timeout_min_s=2.0)  # fmt: skip
    load = load_scale()
    results, output = _run(cli, tmp_path, root)
    load = max(load, load_scale())
    hang = results["deaf-hang"]
    assert hang.status is Status.TIMEOUT, (hang, output)
    assert hang.killed_by == ("tests/gates/test_core.py::test_add",)
    assert "ended by the executor" in hang.reason
    assert hang.attempts == 2  # confirmed by a second child, which costs one more deadline
    # Each child: its start, test_add's deadline x load plus the margin, the parent's watch. The load measured
    # before and after the run, taken at twice the worse of the two; each child gets 10 s for the rest.
    bound = 2 * (limit_s(2.0, 2 * load) + 10.0)
    assert hang.duration_s < bound, (hang.duration_s, bound, load)
    assert hang.duration_s < 2 * 50.0  # what the job's budget alone would have cost, at the least load
    assert results["assertion-kill"].status is Status.KILLED


def test_max_job_s_caps_a_jobs_budget(tmp_path, cli, hostile_project) -> None:
    # A gate deadline and a job budget of 40 s x load, capped at 3 s of wall time for each mutant's child.
    root = _project(hostile_project, tmp_path / "p", ["sleeps", "assertion-kill"], timeout_factor=5.0,
                    timeout_min_s=40.0, max_job_s=3)  # fmt: skip
    results, output = _run(cli, tmp_path, root)
    sleeps = results["sleeps"]
    assert sleeps.status is Status.TIMEOUT, (sleeps, output)
    assert "past max_job_s = 3s" in sleeps.reason
    assert sleeps.attempts == 2 and sleeps.duration_s < 2 * (3.0 + 5.0), sleeps
    assert results["assertion-kill"].status is Status.KILLED  # a quick job is not touched by the cap


def test_gates_whose_own_conftest_rewrites_pytests_reporting_are_refused_naming_it(tmp_path, cli, hostile_project):
    # Not a mutant's doing: the unmutated gates themselves. No child's report could be trusted, so the run stops
    # at the baseline (exit 3) instead of judging any mutant.
    root = _project(hostile_project, tmp_path / "p", ["assertion-kill"])
    (root / "tests" / "gates" / "conftest.py").write_text(
        "from _pytest.reports import TestReport\n\n"
        "_original = TestReport.from_item_and_call.__func__\n"
        "TestReport.from_item_and_call = classmethod(lambda cls, item, call: _original(cls, item, call))\n"
    )
    result = cli("--project", str(root), "--jobs", "2")
    assert result.exit_code == 3, result.output
    words = " ".join(result.output.split())
    assert "changed the harness's reporting path" in words and "TestReport.from_item_and_call" in words, words
