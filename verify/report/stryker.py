"""The Stryker mutation-testing-report-schema JSON (schemaVersion "1"): what Stryker's viewer and dashboard render.

It is the one summary the HTML page (`html.py`) and the review annotations (`annotations.py`) are drawn from,
so a key added here shows up in all three with no change there.

Statuses map one to one where Stryker has the same notion: killed and caught (a gate's check or a named
invariant fired) are Killed; crashed is RuntimeError; timeout is Timeout; survived is Survived, or
NoCoverage when no gate reaches the mutated lines; stale (the anchor no longer matches, or the mutant does not
compile) is CompileError; equivalent, uncovered, skipped, error (the harness got no verdict) and a declared
survivor are Ignored, outside the score as in ours. Stryker scores its own way (a Timeout counts as
detected, RuntimeError and CompileError are left out: our `detected` figure mirrors it), so each mutant's
statusReason opens with dflash's status and `config` carries dflash's own verdict and score: the figure the
terminal, JSON, HTML and JUnit reports show.

The gates are Stryker's tests: `testFiles` holds each gate file's source with every gate at its `def`, and each
mutant names the gates that ran against it (`coveredBy`) and the ones that turned red (`killedBy`). The
statusReason's lines after the first give each red gate's kind of red (assertion, refusal, invariant,
exception, timeout, not-run) and its message. This module reads the project's sources and formats; it never
runs anything.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from verify.report.json_report import Detail, ReportInputs, RunInfo
from verify.report.summary import judge, status_label, status_reason
from verify.report.verdict import MutationResult, Outcome, RunReport, Status

__all__ = ["STRYKER_STATUS", "stryker_status", "to_stryker", "write_report", "write_stryker"]

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


def stryker_status(report: RunReport, result: MutationResult) -> str:
    if report.is_declared_survivor(result):
        return "Ignored"  # declared to survive: outside the score, as in ours
    if result.status == Status.SURVIVED and not result.ran:
        return "NoCoverage"
    return STRYKER_STATUS.get(result.status, "RuntimeError")


def _status_reason(report: RunReport, result: MutationResult, detail: Detail) -> str:
    """`dflash: STATUS (why)`, then one line a red or unrun gate: `gate: kind: Type: message`, then a survivor's
    explanation (`dflash verify explain`: its first diverging observable) where one was made."""
    why = status_reason(report, result)
    lines = [f"dflash: {status_label(report, result)}" + (f" ({why})" if why else "")]
    for outcome in result.outcomes:
        if outcome.outcome is Outcome.PASSED:
            continue
        message = ": ".join(part for part in (outcome.exc_type, outcome.message) if part)
        lines.append(f"{outcome.gate_id}: {outcome.outcome}" + (f": {message}" if message else ""))
    if result.status == Status.SURVIVED and result.ran:
        lines.append(f"{len(result.ran)} gate(s) reaching the mutated lines ran and stayed green")
    if detail.explanation:
        lines.append(detail.explanation)
    return "\n".join(lines)


def _position(line: int, column: int) -> dict[str, int]:
    return {"line": max(1, line), "column": max(1, column)}


def _location(detail: Detail, source: str) -> dict[str, dict[str, int]]:
    """The anchor's span (end exclusive, as the schema says); 1:1 when the source no longer holds it."""
    if detail.last_line > source.count("\n") + 1:  # the file changed or is gone: a viewer must not index past it
        return {"start": _position(1, 1), "end": _position(1, 1)}
    return {
        "start": _position(detail.first_line, detail.first_column),
        "end": _position(detail.last_line, detail.last_column),
    }


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8") if path.is_file() else ""
    except (OSError, UnicodeDecodeError):
        return ""


def _definitions(source: str) -> dict[str, int]:
    """`func` and `Class::func` of a test module to the line of their `def` (pytest's node id spelling)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    lines: dict[str, int] = {}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines[prefix + node.name] = node.lineno
            elif isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}::")

    visit(tree.body, "")
    return lines


def _test_files(gate_ids: tuple[str, ...], root: Path) -> dict[str, dict[str, Any]]:
    """Stryker's `testFiles`: each gate file's source and its gates, each at its `def` line when found."""
    test_files: dict[str, dict[str, Any]] = {}
    definitions: dict[str, dict[str, int]] = {}
    for gate_id in gate_ids:
        path, _, name = gate_id.partition("::")
        if path not in test_files:
            source = _read(root / path)
            test_files[path] = {"source": source, "tests": []}
            definitions[path] = _definitions(source)
        test: dict[str, Any] = {"id": gate_id, "name": name or gate_id}
        line = definitions[path].get(name.partition("[")[0])
        if line is not None:
            test["location"] = {"start": _position(line, 1)}
        test_files[path]["tests"].append(test)
    return test_files


def to_stryker(
    report: RunReport, details: Mapping[str, Detail], root: Path, info: RunInfo | None = None
) -> dict[str, Any]:
    info = info or RunInfo()
    verdict = judge(report, info.fail_under)
    files: dict[str, dict[str, Any]] = {}
    for result in report.mutations:
        detail = details.get(result.name) or Detail("", "unknown.py")
        if detail.file not in files:
            files[detail.file] = {"language": "python", "source": _read(Path(root) / detail.file), "mutants": []}
        files[detail.file]["mutants"].append(
            {
                "id": result.name,
                "mutatorName": result.name,
                "description": detail.bug_class,
                "replacement": detail.replacement,
                "location": _location(detail, files[detail.file]["source"]),
                "status": stryker_status(report, result),
                "statusReason": _status_reason(report, result, detail),
                "killedBy": list(result.killed_by),
                "coveredBy": list(result.ran),
                "testsCompleted": len(result.outcomes) or len(result.ran),
                "duration": round(result.duration_s * 1000),
            }
        )
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
        "testFiles": _test_files(report.baseline.gate_ids, Path(root)),
    }


def write_stryker(
    report: RunReport, path: Path, details: Mapping[str, Detail], root: Path, info: RunInfo | None = None
) -> None:
    Path(path).write_text(json.dumps(to_stryker(report, details, root, info), indent=2) + "\n")


def write_report(inputs: ReportInputs, path: Path) -> None:
    """The `--stryker` format's writer."""
    write_stryker(inputs.report, path, inputs.details, inputs.root, inputs.info)
