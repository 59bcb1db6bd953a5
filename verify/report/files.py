"""Report writers (JSON, JUnit XML, Stryker JSON, offline HTML) and the merge of shard reports.

The JSON schema "dflash-verify/1" is stable; keys are only ever added:

    {"schema": "dflash-verify/1", "shard": "K/N" or "", "interrupted": bool,
     "baseline": {"status": "green", "gates": [{"id", "duration_s"}]},
     "mutations": [{"name", "status", "killed_by", "ran", "duration_s", "reason", "cached",
                    "red_by_assertion", "red_by_exception", "outcomes": [{"gate_id", "outcome",
                    "duration_s", "exc_type"}], "bug_class", "file", "diff"}],
     "gates": [{"id", "kills", "vacuous"}],
     "score": float, "required": [names], "pins": [{"name", "expect_killed_by"}]}

This module turns records into files; it never runs anything and never prints.
"""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verify.report.verdict import Baseline, GateOutcome, MutationResult, Outcome, RunReport, Status, result_from_dict

__all__ = [
    "SCHEMA",
    "Detail",
    "MergeError",
    "merge",
    "read_json",
    "to_json",
    "write_json",
    "write_junit",
    "write_stryker",
]

SCHEMA = "dflash-verify/1"


class MergeError(Exception):
    """Shard reports that cannot be joined: another schema, another baseline, or a mutation twice."""


@dataclass(frozen=True, slots=True)
class Detail:
    """What a report shows about a mutation beyond its verdict: the bug class, where it is, its diff."""

    bug_class: str
    file: str
    diff: str = ""
    replacement: str = ""
    first_line: int = 1  # 1-based line and column span of the anchor in the current source
    first_column: int = 1
    last_line: int = 1
    last_column: int = 1


def to_json(report: RunReport, details: Mapping[str, Detail] | None = None) -> dict[str, Any]:
    details = details or {}
    kills, vacuous = report.gate_kills, set(report.vacuous_gates)
    mutations = []
    for result in report.mutations:
        entry = dataclasses.asdict(result)
        entry["red_by_check"] = list(result.red_by_check)
        entry["red_by_exception"] = list(result.red_by_exception)
        detail = details.get(result.name)
        if detail is not None:
            entry.update(bug_class=detail.bug_class, file=detail.file, diff=detail.diff)
        mutations.append(entry)
    return {
        "schema": SCHEMA,
        "shard": report.shard,
        "interrupted": report.interrupted,
        "baseline": {
            "status": report.baseline.status,
            "gates": [{"id": g.gate_id, "duration_s": g.duration_s} for g in report.baseline.gates],
        },
        "mutations": mutations,
        "gates": [{"id": g, "kills": n, "vacuous": g in vacuous} for g, n in kills.items()],
        "score": report.score,
        "detected": report.detected,
        "counts": {str(s): report.count(s) for s in Status if report.count(s)},
        "interrupted_by": report.interrupted_by,
        "self_check": report.self_check,
        "flaky_gates": [{"id": g, "what": what} for g, what in report.flaky_gates],
        "expected_survivors": [{"name": n, "reason": why} for n, why in report.expected_survivors],
        "surprises": list(report.surprises),
        "harness_errors": list(report.harness_errors),
        "required": list(report.required),
        "pins": [{"name": name, "expect_killed_by": list(pins)} for name, pins in report.pins],
    }


def write_json(report: RunReport, path: Path, details: Mapping[str, Detail] | None = None) -> None:
    Path(path).write_text(json.dumps(to_json(report, details), indent=2) + "\n")


def read_json(path: Path) -> tuple[RunReport, dict[str, Detail]]:
    """A report written by `write_json`, back as records (details only where the file has them)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise MergeError(f"{path}: not a readable JSON report ({error})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise MergeError(f"{path}: schema {data.get('schema') if isinstance(data, dict) else None!r}, want {SCHEMA}")
    gates = tuple(GateOutcome(g["id"], Outcome.PASSED, float(g["duration_s"])) for g in data["baseline"]["gates"])
    report = RunReport(
        baseline=Baseline(data["baseline"]["status"], gates),
        mutations=tuple(result_from_dict(m) for m in data["mutations"]),
        required=tuple(data.get("required", ())),
        pins=tuple((p["name"], tuple(p["expect_killed_by"])) for p in data.get("pins", ())),
        shard=data.get("shard", ""),
        interrupted=bool(data.get("interrupted", False)),
        interrupted_by=data.get("interrupted_by", ""),
        expected_survivors=tuple((e["name"], e["reason"]) for e in data.get("expected_survivors", ())),
        flaky_gates=tuple((g["id"], g["what"]) for g in data.get("flaky_gates", ())),
        self_check=data.get("self_check", ""),
        harness_errors=tuple(data.get("harness_errors", ())),
    )
    details = {
        m["name"]: Detail(m["bug_class"], m["file"], m.get("diff", "")) for m in data["mutations"] if "file" in m
    }
    return report, details


def merge(paths: Sequence[Path]) -> tuple[RunReport, dict[str, Detail]]:
    """Join shard reports into one: same schema and baseline gates, each mutation in exactly one shard."""
    if not paths:
        raise MergeError("nothing to merge")
    reports, details = [], {}
    for path in paths:
        report, found = read_json(path)
        reports.append(report)
        details.update(found)
    first = reports[0]
    results: dict[str, MutationResult] = {}
    for path, report in zip(paths, reports, strict=True):
        if set(report.baseline.gate_ids) != set(first.baseline.gate_ids):
            raise MergeError(f"{path}: ran against other gates than {paths[0]}")
        for result in report.mutations:
            if result.name in results:
                raise MergeError(f"{path}: mutation {result.name!r} is in more than one report")
            results[result.name] = result
    merged = RunReport(
        baseline=first.baseline,
        mutations=tuple(results[name] for name in sorted(results)),
        required=tuple(sorted({name for r in reports for name in r.required})),
        pins=tuple(sorted({pin for r in reports for pin in r.pins})),
        interrupted=any(r.interrupted for r in reports),
        expected_survivors=tuple(sorted({e for r in reports for e in r.expected_survivors})),
        flaky_gates=tuple(sorted({g for r in reports for g in r.flaky_gates})),
        harness_errors=tuple(e for r in reports for e in r.harness_errors),
    )
    return merged, details


_JUNIT_FAILURE = (Status.SURVIVED, Status.TIMEOUT, Status.CRASHED)
_JUNIT_ERROR = (Status.STALE, Status.ERROR)
_JUNIT_SKIPPED = (Status.SKIPPED, Status.EQUIVALENT, Status.UNCOVERED)


def write_junit(report: RunReport, path: Path, details: Mapping[str, Detail] | None = None) -> None:
    """One testcase per mutation: killed passes, survived/timeout/crashed fail, stale errs, skipped skips."""
    details = details or {}
    suite = ET.Element("testsuite", name="dflash-verify", tests=str(len(report.mutations)))
    suite.set("failures", str(sum(1 for r in report.mutations if r.status in _JUNIT_FAILURE)))
    suite.set("errors", str(sum(1 for r in report.mutations if r.status in _JUNIT_ERROR)))
    suite.set("skipped", str(sum(1 for r in report.mutations if r.status in _JUNIT_SKIPPED)))
    suite.set("time", f"{sum(r.duration_s for r in report.mutations):.3f}")
    for result in report.mutations:
        case = ET.SubElement(suite, "testcase", classname="dflash.mutations", name=result.name)
        case.set("time", f"{result.duration_s:.3f}")
        detail = details.get(result.name)
        message = f"{result.status}: {result.reason}" if result.reason else str(result.status)
        if result.status in _JUNIT_FAILURE:
            failure = ET.SubElement(case, "failure", message=message, type=str(result.status))
            failure.text = f"{detail.bug_class}\n{detail.diff}" if detail else message
        elif result.status in _JUNIT_ERROR:
            ET.SubElement(case, "error", message=message, type=str(result.status))
        elif result.status in _JUNIT_SKIPPED:
            ET.SubElement(case, "skipped", message=message)
        else:
            ET.SubElement(case, "system-out").text = f"{result.status} by " + ", ".join(result.killed_by)
    ET.indent(suite)
    ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)


# Stryker's mutant states; a mutant no gate reaches is "NoCoverage", one that does not apply "Ignored".
# Stryker leaves RuntimeError, CompileError and Ignored out of its score, as ours leaves out errors, stale
# and declared mutants; it counts Timeout as detected, which our `detected` figure mirrors.
_STRYKER_STATUS = {
    Status.KILLED: "Killed",
    Status.CAUGHT: "Killed",
    Status.CRASHED: "RuntimeError",
    Status.TIMEOUT: "Timeout",
    Status.SURVIVED: "Survived",
    Status.ERROR: "Ignored",
    Status.STALE: "CompileError",
    Status.EQUIVALENT: "Ignored",
    Status.UNCOVERED: "Ignored",
    Status.SKIPPED: "Ignored",
}


def to_stryker(report: RunReport, details: Mapping[str, Detail], root: Path) -> dict[str, Any]:
    """The mutation-testing-elements report (schemaVersion "1") that Stryker dashboards render."""
    files: dict[str, dict[str, Any]] = {}
    for result in report.mutations:
        detail = details.get(result.name) or Detail("", "unknown.py")
        if detail.file not in files:
            source_path = Path(root) / detail.file
            source = source_path.read_text() if source_path.is_file() else ""
            files[detail.file] = {"language": "python", "source": source, "mutants": []}
        status = _STRYKER_STATUS[result.status]
        if result.status is Status.SURVIVED and not result.ran:
            status = "NoCoverage"
        if result.status is Status.SURVIVED and result.name in dict(report.expected_survivors):
            status = "Ignored"  # declared to survive: outside the score, as in ours
        files[detail.file]["mutants"].append(
            {
                "id": result.name,
                "mutatorName": detail.bug_class or result.name,
                "replacement": detail.replacement,
                "location": {
                    "start": {"line": detail.first_line, "column": detail.first_column},
                    "end": {"line": detail.last_line, "column": detail.last_column},
                },
                "status": status,
                "statusReason": result.reason,
                "killedBy": list(result.killed_by),
                "coveredBy": list(result.ran),
                "duration": round(result.duration_s * 1000),
            }
        )
    test_files: dict[str, dict[str, Any]] = {}
    for gate_id in report.baseline.gate_ids:
        test_file = gate_id.partition("::")[0]
        test_files.setdefault(test_file, {"tests": []})["tests"].append({"id": gate_id, "name": gate_id})
    return {
        "schemaVersion": "1",
        "thresholds": {"high": 80, "low": 60},
        "projectRoot": str(root),
        "files": files,
        "testFiles": test_files,
    }


def write_stryker(report: RunReport, path: Path, details: Mapping[str, Detail], root: Path) -> None:
    Path(path).write_text(json.dumps(to_stryker(report, details, root), indent=2) + "\n")
