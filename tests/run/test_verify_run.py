"""The engine end to end on the toy project: verdicts, the untouched tree, vacuity, reports."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from verify.report.json_report import SCHEMA
from verify.report.verdict import Status

GATE = "tests/gates/test_arith.py::"

EXPECTED = {
    "add-off-by-one": Status.KILLED,
    "add-type-error": Status.CRASHED,  # a TypeError is red, but no gate's check fired
    "sub-swaps-operands": Status.KILLED,
    "mul-adds": Status.KILLED,
    "describe-label": Status.SURVIVED,
    "orphan-unreached": Status.SURVIVED,
    "stale-absent": Status.STALE,
    "stale-twice": Status.STALE,
    "sub-hangs": Status.TIMEOUT,
    "mul-crashes": Status.CRASHED,
}


def _result(run, name: str):
    return next(r for r in run.report.mutations if r.name == name)


@pytest.mark.parametrize(("name", "status"), EXPECTED.items(), ids=list(EXPECTED))
def test_each_mutation_gets_its_verdict(toy_run, name: str, status: Status) -> None:
    assert _result(toy_run, name).status is status, toy_run.result.output


def test_run_covers_the_whole_catalog_and_fails(toy_run) -> None:
    assert sorted(r.name for r in toy_run.report.mutations) == sorted(EXPECTED)
    assert toy_run.result.exit_code == 1, toy_run.result.output
    # (killed + caught) / (killed + caught + survived + timeout + crashed)
    assert toy_run.report.score == pytest.approx(3 / 8)
    assert toy_run.report.detected == pytest.approx(6 / 8)


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("stale-absent", "anchor not found"),
        ("stale-twice", "anchor matches 2 times"),
        ("orphan-unreached", "no gate reaches the mutated lines"),
        ("mul-crashes", "SIGABRT: killed by SIGABRT"),
        ("sub-hangs", "Timeout: still running after"),
    ],
)
def test_reasons_name_the_cause(toy_run, name: str, reason: str) -> None:
    assert _result(toy_run, name).reason.startswith(reason)


def test_crashes_and_timeouts_are_confirmed_by_a_second_child(toy_run) -> None:
    for name in ("mul-crashes", "sub-hangs", "add-type-error"):
        assert _result(toy_run, name).attempts == 2, name
    assert _result(toy_run, "add-off-by-one").attempts == 1  # a gate's own check needs no confirmation


def test_killers_distinguish_assertion_from_exception(toy_run) -> None:
    by_assertion = _result(toy_run, "add-off-by-one")
    by_exception = _result(toy_run, "add-type-error")
    assert by_assertion.killed_by == by_assertion.red_by_check == (GATE + "test_add",)
    assert by_exception.killed_by == by_exception.red_by_exception == (GATE + "test_add",)
    assert by_exception.red_by_check == ()
    assert by_exception.outcomes[0].exc_type == "TypeError"


def test_coverage_selects_only_the_gates_that_reach_the_anchor(toy_run) -> None:
    assert _result(toy_run, "sub-swaps-operands").ran == (GATE + "test_sub",)
    assert _result(toy_run, "describe-label").ran == (GATE + "test_describe_runs",)
    assert _result(toy_run, "orphan-unreached").ran == ()


def test_working_tree_is_byte_identical_after_a_run(toy_run, hash_tree) -> None:
    assert hash_tree(toy_run.root) == toy_run.before
    assert not list(toy_run.root.rglob("__pycache__"))


def test_vacuous_gate_is_reported(toy_run) -> None:
    assert toy_run.report.vacuous_gates == (GATE + "test_describe_runs",)
    assert "vacuous" in toy_run.result.output


def test_pinned_killer_holds(toy_run) -> None:
    assert ("add-off-by-one", (GATE + "test_add",)) in toy_run.report.pins
    assert toy_run.report.lost_pins == ()


def test_json_report_schema(toy_run) -> None:
    data = json.loads((toy_run.reports / "report.json").read_text())
    assert data["schema"] == SCHEMA
    assert set(data) >= {"schema", "baseline", "mutations", "gates", "score"}
    assert data["baseline"]["status"] == "green"
    assert {g["id"] for g in data["baseline"]["gates"]} == {
        GATE + t for t in ("test_add", "test_sub", "test_mul", "test_describe_runs")
    }
    assert all(set(g) == {"id", "duration_s"} for g in data["baseline"]["gates"])
    for entry in data["mutations"]:
        assert set(entry) >= {"name", "status", "killed_by", "ran", "duration_s", "reason", "diff", "bug_class"}
    assert {g["id"]: g["vacuous"] for g in data["gates"]}[GATE + "test_describe_runs"] is True
    assert {g["id"]: g["kills"] for g in data["gates"]}[GATE + "test_add"] == 1  # the TypeError is no kill
    assert "test_not_a_gate" not in json.dumps(data)  # unmarked tests are not gates


def test_junit_report_parses(toy_run) -> None:
    suite = ET.parse(toy_run.reports / "report.xml").getroot()
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert set(cases) == set(EXPECTED)
    assert cases["describe-label"].find("failure") is not None
    assert cases["stale-twice"].find("error") is not None
    assert cases["add-off-by-one"].find("failure") is None
    assert suite.get("failures") == "5" and suite.get("errors") == "2"


def test_html_report_is_self_contained_and_escaped(toy_run) -> None:
    page = (toy_run.reports / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>")
    # Nothing loaded from elsewhere: no stylesheet link, no script or image source (tests/report/test_html_report.py
    # parses the page and loads it in a browser with the network off).
    for external in ("<link", " src=", "<img", "<iframe", "@import"):
        assert external not in page
    assert "-    return a + b\n+    return a + b + 1" in page  # the diff is embedded
    assert "return __import__(&#x27;os&#x27;).abort()" in page  # quotes escaped, not raw
    assert page.count('<tr><td class="name">') == len(EXPECTED)  # one matrix row per mutation


def test_stryker_report(toy_run) -> None:
    data = json.loads((toy_run.reports / "stryker.json").read_text())
    assert data["schemaVersion"] == "1"
    mutants = {m["id"]: m for f in data["files"].values() for m in f["mutants"]}
    assert mutants["add-off-by-one"]["status"] == "Killed"
    assert mutants["add-off-by-one"]["location"]["start"] == {"line": 5, "column": 5}
    assert mutants["orphan-unreached"]["status"] == "NoCoverage"
    assert mutants["sub-hangs"]["status"] == "Timeout"
    assert "def add(a, b):" in data["files"]["toy/arith.py"]["source"]
