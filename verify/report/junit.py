"""JUnit XML: one testcase per mutation, so a CI's test view lists survivors as failures.

killed and caught pass; survived, crashed and timeout fail; stale and error are errors (the harness or the
catalog, not the gates); equivalent, uncovered and skipped are skipped. Times are real: a testcase's time is
what its child took in this run (0 for a result replayed from the cache, marked so), and the suite's time is
the run's wall time, not a sum of cached durations.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path

from verify.report.json_report import Detail, ReportInputs, RunInfo
from verify.report.summary import DECLARED, judge, status_label, status_reason
from verify.report.verdict import RunReport

__all__ = ["write_junit", "write_report"]

_FAILURE = ("survived", "crashed", "timeout")
_ERROR = ("stale", "error")
_SKIPPED = ("equivalent", "uncovered", "skipped", DECLARED)


def write_junit(
    report: RunReport, path: Path, details: Mapping[str, Detail] | None = None, info: RunInfo | None = None
) -> None:
    details, info = details or {}, info or RunInfo()
    statuses = [status_label(report, r) for r in report.mutations]
    verdict = judge(report, info.fail_under)
    suite = ET.Element("testsuite", name="dflash-verify", tests=str(len(statuses)))
    suite.set("failures", str(sum(s in _FAILURE for s in statuses)))
    suite.set("errors", str(sum(s in _ERROR for s in statuses)))
    suite.set("skipped", str(sum(s in _SKIPPED for s in statuses)))
    ran_s = sum(r.duration_s for r in report.mutations if not r.cached)
    suite.set("time", f"{info.wall_s if info.wall_s is not None else ran_s:.3f}")
    properties = ET.SubElement(suite, "properties")
    for name, value in (
        ("verdict", verdict.word),
        ("score", "" if verdict.score is None else f"{verdict.score:.3f}"),
        ("tool_version", info.tool_version),
        ("commit", info.commit),
    ):
        ET.SubElement(properties, "property", name=name, value=value)
    for result in report.mutations:
        status = status_label(report, result)  # a declared survivor is skipped: outside the score, as elsewhere
        case = ET.SubElement(suite, "testcase", classname="dflash.mutations", name=result.name)
        case.set("time", f"{0.0 if result.cached else result.duration_s:.3f}")
        detail = details.get(result.name)
        why = status_reason(report, result)
        message = f"{status}: {why}" if why else status
        if status in _FAILURE:
            failure = ET.SubElement(case, "failure", message=message, type=status)
            failure.text = f"{detail.bug_class}\n{detail.diff}" if detail else message
        elif status in _ERROR:
            ET.SubElement(case, "error", message=message, type=status)
        elif status in _SKIPPED:
            ET.SubElement(case, "skipped", message=message)
        else:
            cached = " (cached)" if result.cached else ""
            killers = f" by {', '.join(result.killed_by)}" if result.killed_by else ""
            ET.SubElement(case, "system-out").text = f"{status}{killers}{cached}"
    ET.indent(suite)
    ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)


def write_report(inputs: ReportInputs, path: Path) -> None:
    """The `--junit` format's writer."""
    write_junit(inputs.report, path, inputs.details, inputs.info)
