"""A sweep in `dflash verify`'s verdict model: the adapter's run report, the files verify's writers make of it, and
the exit code and last line judged as `dflash verify` judges, without running mutmut."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verify.cli.sweep import sweep_app
from verify.report.html import render_html
from verify.report.json_report import RunInfo
from verify.report.junit import write_junit
from verify.report.stryker import write_stryker
from verify.report.summary import judge, verdict_line
from verify.report.verdict import Baseline, GateOutcome, MutationResult, Outcome, RunReport, Status
from verify.sweep import report as sweep_report
from verify.sweep.result import NO_TESTS, NOT_CHECKED, SweepMutant, SweepOutcome, SweepResult
from verify.sweep.verdicts import to_run_report

MODULE = "runner/m.py"
SOURCE = "def f(a):\n    return a + 1\n\n\ndef g(a):\n    return a * 2\n"
GATE = "tests/gates/test_m.py::test_f"
DIFF = "--- a/runner/m.py\n+++ b/runner/m.py\n@@ -1,2 +1,2 @@\n def f(a):\n-    return a + 1\n+    return a - 1\n"


def _mutant(n: int, status: Status, mutmut: str = "", **extra: object) -> SweepMutant:
    gates = () if mutmut in (NO_TESTS, NOT_CHECKED) else (GATE,)
    return SweepMutant(f"runner.m.x_f__mutmut_{n}", MODULE, "f", status, mutmut=mutmut, gates=gates, **extra)  # type: ignore[arg-type]


SURVIVOR = _mutant(
    1, Status.SURVIVED, "survived", line=2, diff=DIFF, original="return a + 1", mutated="return a - 1",
    anchor="    return a + 1", replacement="    return a - 1",
)  # fmt: skip
MUTANTS = (
    SURVIVOR,
    _mutant(2, Status.SURVIVED, NO_TESTS, line=2, diff=DIFF, anchor="    return a + 1"),
    _mutant(3, Status.KILLED, "killed"),
    _mutant(4, Status.ERROR, "suspicious", reason="suspicious (exit code 35)"),
    _mutant(5, Status.SKIPPED, NOT_CHECKED),
    _mutant(6, Status.TIMEOUT, "timeout"),
    _mutant(7, Status.CRASHED, "segfault"),
    _mutant(8, Status.STALE, "caught by type check"),
    _mutant(9, Status.EQUIVALENT, "survived", reason="adding zero"),
)
# The same mutants written out by hand as `dflash verify` results: the adapter must give exactly these.
EXPECTED = (
    MutationResult("runner.m.x_f__mutmut_1", Status.SURVIVED, ran=(GATE,)),
    MutationResult("runner.m.x_f__mutmut_2", Status.SURVIVED, reason="no tests: no selected gate calls this function"),
    MutationResult("runner.m.x_f__mutmut_3", Status.KILLED, ran=(GATE,)),
    MutationResult("runner.m.x_f__mutmut_4", Status.ERROR, ran=(GATE,), reason="suspicious (exit code 35)"),
    MutationResult("runner.m.x_f__mutmut_5", Status.SKIPPED, reason=f"{NOT_CHECKED}: the budget or an interrupt "
                   "stopped the sweep first"),
    MutationResult("runner.m.x_f__mutmut_6", Status.TIMEOUT, ran=(GATE,)),
    MutationResult("runner.m.x_f__mutmut_7", Status.CRASHED, ran=(GATE,), reason="segfault"),
    MutationResult("runner.m.x_f__mutmut_8", Status.STALE, ran=(GATE,), reason="caught by type check"),
    MutationResult("runner.m.x_f__mutmut_9", Status.EQUIVALENT, ran=(GATE,), reason="adding zero"),
)  # fmt: skip


@pytest.fixture
def result(tmp_path: Path) -> SweepResult:
    (tmp_path / "runner").mkdir()
    (tmp_path / MODULE).write_text(SOURCE)
    return SweepResult(str(tmp_path), (MODULE,), MUTANTS, (), SweepOutcome.COMPLETE, 2.0, 2)


def _expected_report() -> RunReport:
    baseline = Baseline("green", (GateOutcome(GATE, Outcome.PASSED, 0.0),))
    return RunReport(baseline, EXPECTED, (), self_check="passed", first_kill=True, generated=True)


def test_each_mutant_is_a_verify_result_named_by_its_key(result: SweepResult) -> None:
    report, details = to_run_report(result)
    assert report == _expected_report()
    survivor = details[SURVIVOR.key]
    assert (survivor.file, survivor.bug_class, survivor.diff, survivor.replacement) == (
        MODULE, "operator mutant in f", DIFF, "    return a - 1",
    )  # fmt: skip
    # The anchor's span, where Stryker places the replacement; the whole function for a mutant read without lines.
    assert (survivor.first_line, survivor.first_column, survivor.last_line, survivor.last_column) == (2, 1, 2, 17)
    killed = details["runner.m.x_f__mutmut_3"]
    assert (killed.first_line, killed.first_column, killed.last_line, killed.last_column) == (1, 1, 2, 17)
    assert "[[equivalent]]" in survivor.hint and not killed.hint


def test_the_sweeps_files_are_verify_reports_writers_output(result: SweepResult, tmp_path: Path) -> None:
    info = RunInfo(tool_version="1", root=result.root, fail_under=1.0, title="dflash sweep")
    out = tmp_path / "out"
    paths = (None, out / "sweep.xml", out / "sweep.html", out / "stryker.json")
    assert sweep_report.write_reports(result, {}, info, paths) == [str(p) for p in paths[1:]]
    # verify's own writers, given the hand-written report and the adapter's details, write the same bytes.
    _, details = to_run_report(result)
    write_junit(_expected_report(), tmp_path / "verify.xml", details, info)
    write_stryker(_expected_report(), tmp_path / "verify.json", details, Path(result.root), info)
    assert (out / "sweep.xml").read_bytes() == (tmp_path / "verify.xml").read_bytes()
    assert (out / "stryker.json").read_bytes() == (tmp_path / "verify.json").read_bytes()
    tables = sweep_report.tables(result, {})
    page = (out / "sweep.html").read_text()
    assert page == render_html(_expected_report(), details, info, tables)

    kinds = {}
    for case in ET.parse(out / "sweep.xml").getroot().iter("testcase"):
        kinds[case.get("name")] = next((child.tag for child in case if child.tag != "system-out"), "passed")
    assert [kinds[m.key] for m in MUTANTS] == [
        "failure", "failure", "passed", "error", "skipped", "failure", "failure", "error", "skipped",
    ]  # fmt: skip
    stryker = json.loads((out / "stryker.json").read_text())
    statuses = [m["status"] for m in stryker["files"][MODULE]["mutants"]]
    assert statuses == [
        "Survived", "NoCoverage", "Killed", "Ignored", "Ignored", "Timeout", "RuntimeError", "CompileError", "Ignored",
    ]  # fmt: skip
    assert "-    return a + 1\n+    return a - 1" in page.replace("&#x27;", "'")
    assert (
        "<h2>Operator mutants by module</h2>" in page and "<td>runner/m.py</td><td>f</td><td>1</td><td>1</td>" in page
    )


@pytest.mark.parametrize(
    ("outcome", "statuses", "code", "last"),
    [
        (SweepOutcome.COMPLETE, (Status.KILLED, Status.SURVIVED), 1, "FAIL 1/2 killed, score 0.500 | survived: "),
        (SweepOutcome.COMPLETE, (Status.KILLED, Status.STALE), 0, "PASS 1/1 killed, score 1.000"),
        (SweepOutcome.COMPLETE, (Status.KILLED, Status.ERROR), 4, "FAIL 1/1 killed, score 1.000 | error: "),
        (SweepOutcome.BUDGET, (Status.KILLED, Status.SKIPPED), 0, "PASS 1/1 killed, score 1.000"),
        (SweepOutcome.INTERRUPTED, (Status.KILLED, Status.SKIPPED), 1, "FAIL 1/1 killed, score 1.000 | interrupted"),
        (SweepOutcome.EMPTY, (), 0, "PASS 0/0 killed, score -"),
        (SweepOutcome.FAILED, (), 3, "FAIL 0/0 killed, score - | harness error: mutmut run exited 1"),
    ],
    ids=["survivor", "type-checked", "no-verdict", "budget", "interrupted", "empty", "harness"],
)
def test_exit_code_and_last_line_are_judged_as_dflash_verify_judges(
    toy: Path, monkeypatch, outcome: SweepOutcome, statuses: tuple[Status, ...], code: int, last: str
) -> None:
    import verify.sweep.driver as driver

    mutants = tuple(_mutant(n, status) for n, status in enumerate(statuses, 1))
    message = "mutmut run exited 1:\nE   boom" if outcome is SweepOutcome.FAILED else ""
    swept = SweepResult(str(toy), (MODULE,), mutants, (), outcome, 1.0, 1, message=message)
    monkeypatch.setattr(driver, "run_sweep", lambda config, on_progress=None: swept)
    done = CliRunner().invoke(sweep_app, ["--root", str(toy), "--state", str(toy.parent / "s.json")], color=False)
    assert done.exit_code == code, done.output
    line = " ".join(done.output.rstrip("\n").splitlines()[-1].split())
    assert line.startswith(last), line
    # The line is verify's, judged from the adapted report at the sweep's default --fail-under 1.0.
    verdict = judge(to_run_report(swept)[0], 1.0)
    assert line.startswith(verdict_line(verdict).partition(" | ")[0])
    assert verdict.passed is (code == 0)
