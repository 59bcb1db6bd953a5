"""The reports agree: JSON, JUnit, Stryker, HTML and the terminal give each mutation the same status and the run
the same verdict and score; `dflash verify show` renders the saved report again without running anything."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from verify.cli.reporting import LAST_REPORT
from verify.report.json_report import read_report
from verify.report.stryker import STRYKER_STATUS
from verify.report.summary import judge, verdict_line

_JUNIT_KIND = {"failure": ("survived", "crashed", "timeout"), "error": ("stale", "error")}


def test_every_format_gives_the_same_statuses_and_verdict(toy_run) -> None:
    data = json.loads((toy_run.reports / "report.json").read_text())
    statuses = {m["name"]: m["status"] for m in data["mutations"]}
    assert statuses == {r.name: str(r.status) for r in toy_run.report.mutations}
    verdict = judge(toy_run.report)
    assert data["verdict"]["result"] == verdict.word == "FAIL"
    assert data["verdict"]["score"] == data["score"] == toy_run.report.score
    assert data["verdict"]["counts"] == {s: list(statuses.values()).count(s) for s in set(statuses.values())}

    suite = ET.parse(toy_run.reports / "report.xml").getroot()
    for case in suite.iter("testcase"):
        status = statuses[case.get("name")]
        for kind, kinds in _JUNIT_KIND.items():
            assert (case.find(kind) is not None) == (status in kinds), (case.get("name"), kind)
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["verdict"] == "FAIL" and properties["score"] == f"{toy_run.report.score:.3f}"

    stryker = json.loads((toy_run.reports / "stryker.json").read_text())
    for mutant in (m for f in stryker["files"].values() for m in f["mutants"]):
        status = statuses[mutant["id"]]
        assert mutant["status"] in (STRYKER_STATUS[status], "NoCoverage"), mutant["id"]
        assert mutant["statusReason"].startswith(f"dflash: {status}")
    assert stryker["config"]["dflash"]["verdict"] == "FAIL"
    assert stryker["config"]["dflash"]["score"] == toy_run.report.score

    page = (toy_run.reports / "report.html").read_text()
    rows = dict(re.findall(r'<td class="name"><a href="#m-([^"]+)">[^<]*</a></td><td class="s-([a-z-]+)">', page))
    assert rows == statuses  # every status in the matrix, timeouts and crashes included
    assert 'class="banner fail"' in page and "FAIL 3/8 killed, score 0.375" in page

    output = " ".join(toy_run.result.output.split())
    for name, status in statuses.items():
        assert re.search(rf"\b{re.escape(name)} {status}\b", output), name
    assert toy_run.result.output.rstrip("\n").splitlines()[-1].startswith("FAIL 3/8 killed, score 0.375 | ")


def test_json_says_how_the_run_was_made(toy_run) -> None:
    data = json.loads((toy_run.reports / "report.json").read_text())
    assert data["tool"]["name"] == "dflash-verify" and data["tool"]["version"]
    assert "commit" in data["project"]  # "" here: the toy copy is not a git repository
    assert data["settings"]["jobs"] >= 1 and data["settings"]["use_cache"] is True
    assert data["wall_s"] > 0


def test_junit_times_are_this_runs_not_summed_cache(toy_copy, cli, tmp_path) -> None:
    root = toy_copy()
    args = ("--project", str(root), "-m", "add-off-by-one", "-m", "sub-swaps-operands")
    cli(*args, "--junit", str(tmp_path / "first.xml"))
    cli(*args, "--junit", str(tmp_path / "second.xml"))
    first, second = (ET.parse(tmp_path / f"{n}.xml").getroot() for n in ("first", "second"))
    assert all(float(c.get("time")) > 0 for c in first.iter("testcase"))
    assert all(c.get("time") == "0.000" for c in second.iter("testcase"))  # replayed from the cache
    assert float(second.get("time")) < float(first.get("time"))  # the suite's time is the run's wall time


def test_html_cells_link_to_the_gates_message(toy_run) -> None:
    page = (toy_run.reports / "report.html").read_text()
    targets = re.findall(r'<td class="cell c-[A-Za-z]+"[^>]*><a href="#(m-[^"]+-g\d+)">', page)
    assert targets, "no linked cell"
    for target in targets:
        assert f'<tr id="{target}">' in page
    assert "TypeError" in page  # add-type-error's gate message is on the page


def test_show_renders_the_last_report_without_running(toy_run, cli, tmp_path: Path) -> None:
    root = toy_run.shown_project(tmp_path / "toy")
    saved = root / LAST_REPORT
    report, _, info = read_report(saved)
    assert [r.name for r in report.mutations] == [r.name for r in toy_run.report.mutations]
    shown = cli("show", "--project", str(root))
    assert shown.exit_code == 1, shown.output
    last = shown.output.rstrip("\n").splitlines()[-1]
    assert last.startswith(verdict_line(judge(report), info.wall_s).split(" | reports")[0].rsplit(" | ", 1)[0])
    assert "+    return a + b + 1" not in shown.output  # killed mutations' diffs are not listed
    assert "-    return a + b\n+    return a + b + 1" not in shown.output
    assert "describe-label" in shown.output and "survived" in shown.output

    one = cli("show", "--project", str(root), "-m", "add-type-error")
    assert one.exit_code == 0, one.output
    assert "TypeError" in one.output and "test_add" in one.output

    from_file = cli("show", "--json", str(toy_run.reports / "report.json"), "--no-survivors")
    assert from_file.exit_code == 1 and "add-off-by-one" in from_file.output
    positional = cli("show", str(toy_run.reports / "report.json"), "--no-survivors")  # the report as an argument
    assert positional.exit_code == 1 and positional.output == from_file.output
    both = cli("show", str(toy_run.reports / "report.json"), "--json", str(saved))
    assert both.exit_code == 2 and "two reports named" in both.output
    vacuous = cli("show", "--project", str(root), "--vacuous")
    assert "test_describe_runs" in vacuous.output


def test_show_without_a_report_says_what_to_run(tmp_path, cli) -> None:
    result = cli("show", "--project", str(tmp_path))
    assert result.exit_code == 2 and "run `dflash verify` first" in result.output


# The rules of the official mutation-testing-report-schema (stryker-mutator/mutation-testing-elements,
# packages/report-schema, draft-07) for every key this report writes.
_STRYKER_STATES = {"Killed", "Survived", "NoCoverage", "CompileError", "RuntimeError", "Timeout", "Ignored", "Pending"}
_MUTANT_TYPES = {"id": str, "mutatorName": str, "status": str, "description": str, "replacement": str,
                 "statusReason": str, "duration": (int, float), "testsCompleted": (int, float),
                 "coveredBy": list, "killedBy": list}  # fmt: skip


def _position_ok(position: object) -> bool:
    return isinstance(position, dict) and all(
        isinstance(position.get(k), int) and not isinstance(position.get(k), bool) and position[k] >= 1
        for k in ("line", "column")
    )


def test_stryker_report_follows_the_official_schema(toy_run) -> None:
    data = json.loads((toy_run.reports / "stryker.json").read_text())
    assert {"schemaVersion", "thresholds", "files"} <= set(data)
    assert re.fullmatch(r"([1-2]\d*|0)(\.(([1-9]\d*)|0)){0,2}", data["schemaVersion"])
    assert all(isinstance(data["thresholds"][k], int) and 0 <= data["thresholds"][k] <= 100 for k in ("high", "low"))
    assert isinstance(data["config"], dict) and isinstance(data["framework"]["name"], str)
    ids = []
    for file in data["files"].values():
        assert isinstance(file["language"], str) and isinstance(file["source"], str)
        for mutant in file["mutants"]:
            assert {"id", "mutatorName", "location", "status"} <= set(mutant)
            for key, kind in _MUTANT_TYPES.items():
                assert key not in mutant or isinstance(mutant[key], kind), key
            assert all(isinstance(t, str) for t in mutant["coveredBy"] + mutant["killedBy"])
            assert mutant["status"] in _STRYKER_STATES
            assert _position_ok(mutant["location"]["start"]) and _position_ok(mutant["location"]["end"])
            ids.append(mutant["id"])
    assert len(ids) == len(set(ids)) == len(toy_run.report.mutations)
    for test_file in data["testFiles"].values():
        assert all(isinstance(t["id"], str) and isinstance(t["name"], str) for t in test_file["tests"])
