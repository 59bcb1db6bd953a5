"""Survivors on the mutated line of a pull request: GitHub workflow-command annotations and GitLab's code quality.

Both are drawn from the Stryker JSON (`stryker.to_stryker`), so they say what the HTML viewer says: a mutant
that a gate did not catch by its own check (Survived, NoCoverage, Timeout, RuntimeError) is a warning on the
anchor's lines, and one whose anchor no longer applies (CompileError: stale) an error on its file; so is a
mutant whose span is unknown (an empty location: a report from before spans were kept, a file since gone). The
message is the mutant's description, its replacement and its statusReason (dflash's status, then each red
gate's kind and message), so whatever a later step adds to those reaches the review too.

GitHub reads `::warning file=PATH,line=N,endLine=M,title=T::MESSAGE` lines from a step's output (properties
and message percent-encoded as its toolkit does); GitLab reads a JSON array of Code Climate issues (the
subset its docs require: description, check_name, fingerprint, severity, location.path, location.lines.begin).
Paths are the Stryker file keys (relative to the project root) behind `path_prefix`, the project's folder
inside its repository, so they are relative to the repository root as both systems want. Plain strings only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from verify.report.json_report import ReportInputs

__all__ = ["Finding", "findings", "github_annotations", "to_codequality", "write_codequality", "write_report"]

# Stryker status -> (annotation level, Code Climate severity). Killed and Ignored are not findings.
_LEVELS = {
    "Survived": ("warning", "major"),
    "NoCoverage": ("warning", "major"),
    "Timeout": ("warning", "minor"),  # detected, but by a hang, not a check
    "RuntimeError": ("warning", "minor"),  # detected, but by a crash, not a check
    "CompileError": ("error", "critical"),  # the catalog no longer applies to this source
}


@dataclass(frozen=True, slots=True)
class Finding:
    """One mutant worth a reviewer's eye, where it is and what to say about it."""

    mutant_id: str
    status: str  # Stryker's
    level: str  # "warning" or "error"
    severity: str  # Code Climate's
    path: str  # relative to the repository root
    line: int  # 0: the file as a whole (the anchor is not in it)
    end_line: int
    title: str
    message: str


def _message(mutant: Mapping[str, Any]) -> str:
    head = mutant.get("description") or mutant["mutatorName"]
    replacement = mutant.get("replacement")
    if replacement:
        head += f"; replaced with: {replacement}"
    reason = mutant.get("statusReason") or ""
    return f"{head}\n{reason}" if reason else head


def findings(stryker: Mapping[str, Any], path_prefix: str = "") -> Iterator[Finding]:
    """The mutants to show in review, file by file in the report's order."""
    prefix = path_prefix.strip("/")
    for file, result in stryker["files"].items():
        path = f"{prefix}/{file}" if prefix else file
        for mutant in result["mutants"]:
            if mutant["status"] not in _LEVELS:
                continue
            level, severity = _LEVELS[mutant["status"]]
            start, end = mutant["location"]["start"], mutant["location"]["end"]
            # An empty span places nothing (an anchor is never empty): the source no longer holds it.
            placed = mutant["status"] != "CompileError" and start != end
            status = (mutant.get("statusReason") or "").partition("\n")[0].removeprefix("dflash: ").split(" (")[0]
            yield Finding(
                mutant_id=mutant["id"],
                status=mutant["status"],
                level=level,
                severity=severity,
                path=path,
                line=start["line"] if placed else 0,
                end_line=end["line"] if placed else 0,
                title=f"mutation {status or mutant['status']}: {mutant['id']}",
                message=_message(mutant),
            )


def _data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(value: str) -> str:
    return _data(value).replace(":", "%3A").replace(",", "%2C")


def github_annotations(stryker: Mapping[str, Any], path_prefix: str = "") -> list[str]:
    """One workflow command a finding, for a step's standard output."""
    lines = []
    for finding in findings(stryker, path_prefix):
        props = [f"file={_property(finding.path)}"]
        if finding.line:
            props += [f"line={finding.line}", f"endLine={finding.end_line}"]
        props.append(f"title={_property(finding.title)}")
        lines.append(f"::{finding.level} {','.join(props)}::{_data(finding.message)}")
    return lines


def to_codequality(stryker: Mapping[str, Any], path_prefix: str = "") -> list[dict[str, Any]]:
    """GitLab's code-quality report. The fingerprint names the mutant, its file and its status, not its line,
    so a merge request's report matches the target branch's for the same survivor even after lines move."""
    issues = []
    for finding in findings(stryker, path_prefix):
        key = f"dflash:{finding.path}:{finding.mutant_id}:{finding.status}"
        issues.append(
            {
                "description": f"{finding.title}: {finding.message}",
                "check_name": f"dflash-{finding.status}",
                "fingerprint": hashlib.sha256(key.encode()).hexdigest(),
                "severity": finding.severity,
                "location": {"path": finding.path, "lines": {"begin": max(1, finding.line)}},
            }
        )
    return issues


def write_codequality(stryker: Mapping[str, Any], path: Path, path_prefix: str = "") -> None:
    Path(path).write_text(json.dumps(to_codequality(stryker, path_prefix), indent=2) + "\n")


def write_report(inputs: ReportInputs, path: Path) -> None:
    """The `--codequality` format's writer."""
    from verify.report.stryker import to_stryker

    write_codequality(
        to_stryker(inputs.report, inputs.details, inputs.root, inputs.info), path, inputs.repository_prefix
    )
