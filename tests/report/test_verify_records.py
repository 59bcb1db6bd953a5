"""The mutation record and registry, and the derived facts of a run report."""

from __future__ import annotations

import dataclasses
import json

import pytest

from verify.mutation import Mutation, MutationError, all_mutations, get, mutation, register, reset_registry
from verify.report.decode import result_from_dict
from verify.report.verdict import (
    Baseline,
    GateOutcome,
    MutationResult,
    Outcome,
    RunReport,
    Status,
    status_from,
)

GOOD = {"name": "draft-skips-mask", "bug_class": "mask dropped (seen in a draft)", "file": "runner/draft.py",
        "anchor": "x = 1", "replacement": "x = 2"}  # fmt: skip


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("name", "Draft_Mask", "kebab-case"),
        ("name", "", "kebab-case"),
        ("bug_class", " ", "non-empty"),
        ("bug_class", "one\ntwo", "one line"),
        ("file", "/abs/runner.py", "relative posix path"),
        ("file", "../runner.py", "relative posix path"),
        ("file", "runner/draft.txt", "Python source file"),
        ("anchor", "", "non-empty code"),
        ("replacement", "x = 1", "changes nothing"),
        ("expect_killed_by", ["tests/gates"], "tuple of non-empty gate ids"),
    ],
    ids=lambda value: str(value)[:20],
)
def test_malformed_mutation_is_refused(field, value, message) -> None:
    with pytest.raises(MutationError, match=message):
        Mutation(**{**GOOD, field: value})


def test_register_and_decorator_fill_one_registry() -> None:
    register(Mutation(**GOOD))

    @mutation
    def other() -> Mutation:
        return Mutation(**{**GOOD, "name": "another-bug"})

    assert list(all_mutations()) == ["another-bug", "draft-skips-mask"]
    assert other().name == "another-bug"  # the decorator hands back the function
    assert get("draft-skips-mask").anchor == "x = 1"
    with pytest.raises(MutationError, match="registered twice"):
        register(Mutation(**GOOD))
    with pytest.raises(MutationError, match="unknown mutation"):
        get("nope")
    reset_registry()
    assert all_mutations() == {}


def test_decorator_refuses_a_function_not_returning_a_mutation() -> None:
    with pytest.raises(MutationError, match="must return a Mutation"):
        mutation(lambda: "not a mutation")


def _report(*results: MutationResult, pins=(), required=None, expected=()) -> RunReport:
    gates = tuple(GateOutcome(g, Outcome.PASSED, 0.1) for g in ("t.py::a", "t.py::b"))
    names = tuple(r.name for r in results)
    required = names if required is None else required
    return RunReport(Baseline("green", gates), results, required, pins, expected_survivors=expected)


def _killed(name: str, *gates: str) -> MutationResult:
    outcomes = tuple(GateOutcome(g, Outcome.ASSERTION, 0.1, "AssertionError") for g in gates)
    return MutationResult(name, Status.KILLED, gates, gates, 0.5, "", outcomes)


def test_score_counts_timeouts_and_crashes_but_not_stale_skipped_errors_or_declared() -> None:
    report = _report(
        _killed("k", "t.py::a"),
        MutationResult("ca", Status.CAUGHT, ("t.py::a",)),
        MutationResult("s", Status.SURVIVED),
        MutationResult("t", Status.TIMEOUT),
        MutationResult("c", Status.CRASHED),
        MutationResult("st", Status.STALE),
        MutationResult("sk", Status.SKIPPED),
        MutationResult("e", Status.ERROR),
        MutationResult("eq", Status.EQUIVALENT),
        MutationResult("u", Status.UNCOVERED),
    )
    assert report.score == pytest.approx(2 / 5)  # (killed + caught) / (killed + caught + survived + timeout + crashed)
    assert report.detected == pytest.approx(4 / 5)
    assert _report().score is None  # nothing judged: no score, and the run fails
    assert "empty catalog" in " ".join(_report().failures())


def test_count_detected_passes_a_suite_that_fails_by_raising_and_says_so_on_the_verdict_line() -> None:
    from verify.report.summary import judge, verdict_line

    results = (_killed("k", "t.py::a"), MutationResult("c", Status.CRASHED), MutationResult("t", Status.TIMEOUT))
    killed = _report(*results)
    assert killed.failures() == ("c: crashed", "t: timeout")
    assert verdict_line(judge(killed)).startswith("FAIL 1/3 killed, score 0.333 | crashed: c | timeout: t")
    detected = dataclasses.replace(killed, counting="detected")
    assert detected.failures() == ()
    assert verdict_line(judge(detected)) == "PASS 3/3 detected, score 0.333, detected 1.000"
    survivor = dataclasses.replace(_report(*results, MutationResult("s", Status.SURVIVED)), counting="detected")
    assert verdict_line(judge(survivor)) == "FAIL 3/4 detected, score 0.250, detected 0.750 | survived: s"
    assert "detected 0.750 is under --fail-under 0.800" in survivor.failures(fail_under=0.8)


def test_the_json_report_keeps_what_the_gate_counted(tmp_path) -> None:
    from verify.report.json_report import read_report, to_json, write_json

    report = dataclasses.replace(_report(MutationResult("c", Status.CRASHED)), counting="detected")
    data = to_json(report)
    assert data["count"] == "detected" and data["verdict"]["result"] == "PASS" and data["verdict"]["killed"] == 1
    write_json(report, tmp_path / "r.json")
    assert read_report(tmp_path / "r.json")[0].counting == "detected"


@pytest.mark.parametrize(
    ("kinds", "status"),
    [
        (("passed", "assertion", "exception"), Status.KILLED),
        (("refusal",), Status.KILLED),
        (("invariant", "exception", "timeout"), Status.CAUGHT),
        (("exception", "timeout", "not-run"), Status.CRASHED),
        (("passed", "timeout"), Status.TIMEOUT),
        (("passed", "not-run"), Status.ERROR),
        (("passed", "passed"), Status.SURVIVED),
    ],
)
def test_status_follows_the_strongest_kind_of_red(kinds: tuple[str, ...], status: Status) -> None:
    outcomes = tuple(GateOutcome(f"t.py::g{i}", Outcome(kind), 0.1) for i, kind in enumerate(kinds))
    assert status_from(outcomes) is status


def test_declared_survivor_is_reported_not_failed_and_its_kill_is_news() -> None:
    survivor = _report(MutationResult("s", Status.SURVIVED), _killed("k", "t.py::a"), expected=(("s", "equivalent"),))
    assert survivor.failures() == () and survivor.score == 1.0 and survivor.surprises == ()
    killed = _report(_killed("s", "t.py::a"), expected=(("s", "equivalent"),))
    assert killed.surprises == ("s",) and killed.failures() == ()


def test_vacuous_gates_and_kills() -> None:
    report = _report(_killed("k", "t.py::a"))
    assert report.gate_kills == {"t.py::a": 1, "t.py::b": 0}
    assert report.vacuous_gates == ("t.py::b",)
    assert _report(MutationResult("st", Status.STALE)).vacuous_gates == ()  # no mutant ran: nothing to judge


def test_failures_name_survivors_stale_and_lost_pins() -> None:
    report = _report(
        _killed("k", "t.py::a"),
        MutationResult("s", Status.SURVIVED),
        MutationResult("st", Status.STALE, reason="anchor not found"),
        pins=(("k", ("t.py::b",)), ("s", ("t.py",))),
        required=("k", "st"),
    )
    assert report.lost_pins == (("k", "t.py::b"), ("s", "t.py"))
    failures = report.failures()
    assert "st: stale (anchor not found)" in failures
    assert "k: pinned gate t.py::b no longer kills it" in failures
    assert not any(f.startswith("s: survived") for f in failures)  # not required
    assert _report(_killed("k", "t.py::a"), pins=(("k", ("t.py",)),)).failures() == ()  # a prefix pin


def test_records_round_trip_through_plain_json() -> None:
    result = _killed("k", "t.py::a")
    text = json.dumps(dataclasses.asdict(result))  # no custom encoder: StrEnums are strings
    assert result_from_dict(json.loads(text)) == result


def test_generated_mutants_fail_neither_by_staleness_nor_by_an_empty_run() -> None:
    """A sweep's mutants are generated: one a type checker rejects (stale) is no broken catalog entry, and a sweep
    with nothing to mutate is nothing to do; its score and survivors still fail it as they fail a catalog run."""
    stale = (_killed("k", "t.py::a"), MutationResult("st", Status.STALE, reason="caught by type check"))
    assert _report(*stale).failures() == ("st: stale (caught by type check)",)
    assert dataclasses.replace(_report(*stale), generated=True).failures() == ()
    assert dataclasses.replace(_report(), generated=True).failures() == ()
    survivor = dataclasses.replace(_report(MutationResult("s", Status.SURVIVED), required=()), generated=True)
    assert survivor.failures(fail_under=1.0) == ("score 0.000 is under --fail-under 1.000",)


def test_survivors_no_gate_reaches_are_said_apart_in_the_counts() -> None:
    """A survivor no gate ran against is a gap in the gates' reach, not a gate that missed a bug: the counts say
    how many of the survivors are that (Stryker's NoCoverage)."""
    from verify.report.summary import judge

    reached = MutationResult("reached", Status.SURVIVED, ran=("g1",))
    alone = MutationResult("alone", Status.SURVIVED, reason="no gate reaches the mutated lines")
    killed = MutationResult("k", Status.KILLED, killed_by=("g1",), ran=("g1",))
    assert judge(_report(reached, alone, killed)).counts_text == "1 killed, 2 survived (1 reached by no gate)"
    assert judge(_report(reached, killed)).counts_text == "1 killed, 1 survived"
