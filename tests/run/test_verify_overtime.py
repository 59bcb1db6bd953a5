"""The journal's sealed records and "current gate" line, the parent's deadline over it, the job budget's cap, the
integrity snapshot and the verdict a tampering gets: plain records and a real pytest session, no executor."""

from __future__ import annotations

import dataclasses
import json
import time

import _pytest.reports
import pytest

from verify.config.settings import ConfigError, ProjectConfig
from verify.report.decode import result_from_dict
from verify.report.verdict import GateOutcome, Outcome, Status
from verify.run.child.integrity import Snapshot
from verify.run.child.journal import Journal, Reader, new_key, read_journal
from verify.run.child.recorder import Recorder
from verify.run.execution.overtime import GateClock, job_budget, limit_s
from verify.run.phases.corroboration import Policy
from verify.run.phases.judge import tampered, verdict

GATES = """import time


def test_green():
    assert 1 + 1 == 2


def test_red():
    assert 1 + 1 == 3


def test_z_green():
    assert 2 + 2 == 4
"""


def _run_recorder(tmp_path, key: bytes, deadlines: dict[str, float]) -> Recorder:
    (tmp_path / "test_g.py").write_text(GATES)
    recorder = Recorder(tmp_path / "journal.jsonl", deadlines=deadlines, key=key)
    # importlib: each test's test_g.py is a module of its own, not the one an earlier test imported
    args = [
        str(tmp_path / "test_g.py"),
        "-q",
        "-p",
        "no:cacheprovider",
        "--import-mode=importlib",
        "--rootdir",
        str(tmp_path),
    ]
    pytest.main(args, plugins=[recorder])
    return recorder


def test_each_gate_start_is_journalled_with_when_and_its_deadline_and_every_line_is_sealed(tmp_path) -> None:
    key = new_key()
    before = time.monotonic()
    _run_recorder(tmp_path, key, {"test_g.py::test_green": 3.0})
    lines = [json.loads(line) for line in (tmp_path / "journal.jsonl").read_text().splitlines()]
    started = [line for line in lines if "started" in line]
    assert [line["started"] for line in started] == [
        "test_g.py::test_green",
        "test_g.py::test_red",
        "test_g.py::test_z_green",
    ]
    assert before <= started[0]["at"] <= time.monotonic()
    assert [line["deadline_s"] for line in started] == [3.0, None, None]  # the others have none
    assert all(len(line["seal"]) == 64 for line in lines)
    entries = read_journal(tmp_path / "journal.jsonl", key)
    assert entries.tampered == ""
    assert entries.started == ["test_g.py::test_green", "test_g.py::test_red", "test_g.py::test_z_green"]
    assert {g: o.outcome for g, o in entries.finished.items()} == {
        "test_g.py::test_green": Outcome.PASSED,
        "test_g.py::test_red": Outcome.ASSERTION,
        "test_g.py::test_z_green": Outcome.PASSED,
    }


def _forge_passed(path) -> None:
    """What a mutant that knows the format, not the key, writes: its red gate as passed."""
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    red = next(line for line in lines if line.get("gate_id", "").endswith("test_red"))
    red["outcome"], red["exc_type"], red["message"] = "passed", "", ""
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


@pytest.mark.parametrize("forgery", ["rewritten", "appended", "dropped", "other key"])
def test_a_journal_the_mutant_rewrites_without_the_key_reads_as_tampered(tmp_path, forgery) -> None:
    key = new_key()
    _run_recorder(tmp_path, key, {})
    path = tmp_path / "journal.jsonl"
    text = path.read_text()
    if forgery == "rewritten":
        _forge_passed(path)
    elif forgery == "appended":
        path.write_text(
            text + json.dumps({"gate_id": "test_g.py::test_red", "outcome": "passed", "duration_s": 0}) + "\n"
        )
    elif forgery == "dropped":  # the red gate's line taken out of the chain, the lines after it kept
        path.write_text(
            "".join(line + "\n" for line in text.splitlines() if "test_red" not in line or "started" in line)
        )
    entries = read_journal(path, new_key() if forgery == "other key" else key)
    assert "seal" in entries.tampered
    assert entries.finished.get("test_g.py::test_red") is None or forgery == "appended"
    if forgery == "appended":  # what came before the forged line stands; the forged line is not read
        assert entries.finished["test_g.py::test_red"].outcome is Outcome.ASSERTION


def test_a_line_cut_short_by_a_kill_is_not_tampering_and_without_a_key_lines_read_unsealed(tmp_path) -> None:
    key = new_key()
    journal = Journal(tmp_path / "j", key)
    journal.write({"started": "g"})
    with open(tmp_path / "j", "a") as file:
        file.write('{"gate_id": "g", "outc')  # the kill came mid-line
    entries = read_journal(tmp_path / "j", key)
    assert (entries.started, entries.tampered) == (["g"], "")
    Journal(tmp_path / "plain").write({"started": "h"})
    assert "seal" not in (tmp_path / "plain").read_text()
    assert read_journal(tmp_path / "plain").started == ["h"]


def test_the_parent_ends_a_gate_past_its_own_deadline_stretched_by_the_load_plus_a_margin(tmp_path) -> None:
    key = new_key()
    journal = Journal(tmp_path / "j", key)
    clock = GateClock(tmp_path / "j", {"a": 2.0, "b": 10.0}, key)
    clock.watch(now=100.0)
    assert clock.overdue(1.0, now=1000.0) == ""  # no gate started: the job's budget alone
    journal.write({"started": "a", "at": 0.0, "deadline_s": 999.0})  # the child's numbers are not trusted
    clock.watch(now=100.0)
    assert (clock.gate, clock.since) == ("a", 100.0)
    assert limit_s(2.0, 1.0) == 4.0 and limit_s(2.0, 3.0) == 8.0  # 2 s margin, or a quarter of the stretched one
    assert clock.overdue(1.0, now=104.0) == ""
    why = clock.overdue(1.0, now=104.5)
    assert "past its deadline (2.0s x load 1.00" in why and "ended by the executor" in why
    assert clock.overdue(3.0, now=104.5) == ""  # a loaded machine stretches it, as the child's alarm is
    journal.write({"gate_id": "a", "outcome": "passed", "duration_s": 0.1})  # its end: a clock for its teardown
    clock.watch(now=110.0)
    assert clock.overdue(1.0, now=113.0) == ""
    journal.write({"started": "b", "at": 0.0})
    clock.watch(now=120.0)
    assert clock.gate == "b" and clock.overdue(1.0, now=130.0) == ""
    assert clock.overdue(1.0, now=132.6)


def test_lines_a_mutant_writes_restart_a_gates_clock_at_most_twice(tmp_path) -> None:
    journal = Journal(tmp_path / "j")
    clock = GateClock(tmp_path / "j", {"a": 2.0})
    for now in (0.0, 10.0, 20.0, 30.0):
        journal.write({"started": "a"})
        clock.watch(now=now)
    assert clock.since == 10.0  # the third and fourth lines did not move it
    journal.write({"started": "not-a-gate-of-this-job"})
    clock.watch(now=40.0)
    assert (clock.gate, clock.since) == ("a", 10.0)
    assert clock.overdue(1.0, now=40.0)


def test_the_job_budget_is_capped_by_max_job_s_and_the_key_is_validated(tmp_path) -> None:
    assert job_budget(10.0, 3.0, 0.0) == 30.0
    assert job_budget(10.0, 3.0, 12.0) == 12.0
    assert job_budget(10.0, 0.5, 0.0) == 10.0  # never less than on an idle machine
    assert ProjectConfig(root=tmp_path, max_job_s=60).max_job_s == 60
    for bad in (-1, True, "60"):
        with pytest.raises(ConfigError, match="max_job_s"):
            ProjectConfig(root=tmp_path, max_job_s=bad)


def test_the_snapshot_names_pytests_reporting_path_and_the_recorders_state_when_either_changes(tmp_path) -> None:
    recorder = Recorder(tmp_path / "j")
    snapshot = recorder.integrity
    assert snapshot.changed() == []
    original = _pytest.reports.TestReport.__dict__["from_item_and_call"]
    try:
        _pytest.reports.TestReport.from_item_and_call = classmethod(lambda cls, item, call: None)  # type: ignore[assignment]
        assert "_pytest.reports.TestReport.from_item_and_call" in snapshot.changed()
    finally:
        _pytest.reports.TestReport.from_item_and_call = original  # type: ignore[method-assign]
    assert snapshot.changed() == []
    code = original.__func__.__code__
    try:
        original.__func__.__code__ = (lambda cls, item, call: None).__code__
        assert "_pytest.reports.TestReport.from_item_and_call" in snapshot.changed()
    finally:
        original.__func__.__code__ = code
    pluginmanager = pytest.PytestPluginManager()
    snapshot.gates_start(pluginmanager, recorder)
    assert snapshot.changed() == []
    recorder._red = type("Deaf", (dict,), {"__setitem__": lambda self, key, value: None})()
    assert snapshot.changed() == ["the recorder's _red"]
    fresh = Recorder(tmp_path / "k")
    fresh.integrity.gates_start(pluginmanager, fresh)
    fresh._finish = lambda *args: None  # type: ignore[method-assign]
    assert fresh.integrity.changed() == ["the recorder's _finish (set on it)"]
    assert Snapshot().changed() == []


def test_a_reader_fed_while_the_child_writes_reads_each_line_once(tmp_path) -> None:
    key = new_key()
    journal, reader = Journal(tmp_path / "j", key), Reader(tmp_path / "j", key)
    assert reader.feed() == []  # no file yet
    journal.write({"started": "a"})
    assert reader.feed() == [{"started": "a"}]
    assert reader.feed() == []
    journal.write({"gate_id": "a", "outcome": "passed", "duration_s": 0.0})
    journal.write({"started": "b"})
    assert [r.get("started", r.get("gate_id")) for r in reader.feed()] == ["a", "b"]
    assert reader.entries.started == ["a", "b"] and reader.entries.tampered == ""


def test_a_tampered_result_is_an_error_naming_it_whatever_its_gates_said() -> None:
    outcomes = (
        GateOutcome("g", Outcome.ASSERTION, 0.1, "AssertionError", "boom"),
        GateOutcome("h", Outcome.PASSED, 0.1),
    )
    killed = verdict("m", outcomes, ("g", "h"), 0.2, 1)
    assert killed.status is Status.KILLED
    result = tampered(killed, "_pytest.reports.TestReport.from_item_and_call")
    assert (result.status, result.killed_by, result.tampered) == (
        Status.ERROR, (), "_pytest.reports.TestReport.from_item_and_call"
    )  # fmt: skip
    assert result.reason == "tampered with the harness: _pytest.reports.TestReport.from_item_and_call"
    assert Policy().recorded(result) == (result, False)  # never cached: the next run tries it again
    assert result_from_dict(json.loads(json.dumps(dataclasses.asdict(result)))) == result


def test_a_job_state_is_an_enum_whatever_form_it_comes_in() -> None:
    """Job states are compared as a typed JobState; a result read back as data (a Ray node's) names one by its
    word, and an unknown word is refused where the record is made."""
    from verify.run.execution.jobs import JobResult, JobState

    assert JobResult("k", "lost", 0.0).state is JobState.LOST
    assert JobResult("k", JobState.DONE, 0.0).state == "done"
    with pytest.raises(ValueError):
        JobResult("k", "finished", 0.0)
