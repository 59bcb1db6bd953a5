"""The Stryker mutation-testing-elements report (schemaVersion "1"), which Stryker dashboards render.

Statuses map one to one where Stryker has the same notion: killed and caught (a gate's check or a named
invariant fired) are Killed; crashed is RuntimeError; timeout is Timeout; survived is Survived, or
NoCoverage when no gate reaches the mutated lines; stale (the anchor no longer matches, or the mutant does not
compile) is CompileError; equivalent, uncovered, skipped, error (the harness got no verdict) and a declared
survivor are Ignored, outside the score as in ours. Stryker scores its own way (a Timeout counts as
detected, RuntimeError and CompileError are left out: our `detected` figure mirrors it), so each mutant's
statusReason carries dflash's status and `config` carries dflash's own verdict and score: the figure the
terminal, JSON, HTML and JUnit reports show.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from verify.report.files import Detail, RunInfo
from verify.report.summary import judge
from verify.report.verdict import RunReport

__all__ = ["STRYKER_STATUS", "to_stryker", "write_stryker"]

STRYKER_STATUS = {
    "killed": "Killed",
    "caught": "Killed",
    "crashed": "RuntimeError",
    "timeout": "Timeout",
    "survived": "Survived",
    "error": "Ignored",
    "stale": "CompileError",
    "equivalent": "Ignored",
    "uncovered": "Ignored",
    "skipped": "Ignored",
}


def to_stryker(
    report: RunReport, details: Mapping[str, Detail], root: Path, info: RunInfo | None = None
) -> dict[str, Any]:
    info = info or RunInfo()
    verdict = judge(report, info.fail_under)
    files: dict[str, dict[str, Any]] = {}
    for result in report.mutations:
        detail = details.get(result.name) or Detail("", "unknown.py")
        if detail.file not in files:
            source_path = Path(root) / detail.file
            source = source_path.read_text() if source_path.is_file() else ""
            files[detail.file] = {"language": "python", "source": source, "mutants": []}
        status = str(result.status)
        stryker_status = STRYKER_STATUS.get(status, "RuntimeError")
        if status == "survived" and not result.ran:
            stryker_status = "NoCoverage"
        if report.is_declared_survivor(result):
            stryker_status = "Ignored"  # declared to survive: outside the score, as in ours
        reason = f"dflash: {status}" + (f" ({result.reason})" if result.reason else "")
        if detail.explanation:
            reason += f"\n{detail.explanation}"
        files[detail.file]["mutants"].append(
            {
                "id": result.name,
                "mutatorName": result.name,
                "description": detail.bug_class,
                "replacement": detail.replacement,
                "location": {
                    "start": {"line": max(1, detail.first_line), "column": max(1, detail.first_column)},
                    "end": {"line": max(1, detail.last_line), "column": max(1, detail.last_column)},
                },
                "status": stryker_status,
                "statusReason": reason,
                "killedBy": list(result.killed_by),
                "coveredBy": list(result.ran),
                "testsCompleted": len(result.outcomes) or len(result.ran),
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
        "config": {
            "dflash": {
                "verdict": verdict.word,
                "score": verdict.score,
                "counts": dict(verdict.counts),
                "failures": list(verdict.failures),
                "commit": info.commit,
            }
        },
        "framework": {"name": "dflash-verify", "version": info.tool_version or "unknown"},
        "files": files,
        "testFiles": test_files,
    }


def write_stryker(
    report: RunReport, path: Path, details: Mapping[str, Detail], root: Path, info: RunInfo | None = None
) -> None:
    Path(path).write_text(json.dumps(to_stryker(report, details, root, info), indent=2) + "\n")
