"""The JSON report (schema "dflash-verify/1"), reading it back, and the merge of shard reports.

Keys are only ever added to the schema:

    {"schema": "dflash-verify/1", "tool": {"name", "version"}, "project": {"root", "commit"},
     "verdict": {"result": "PASS"|"FAIL", "failures": [...], "score", "detected", "killed", "judged",
                 "counts": {status: n}}, "settings": {...}, "wall_s": float|null, "self_check": str,
     "shard": "K/N" or "", "interrupted": bool, "interrupted_by": "SIGINT"|"SIGTERM"|"",
     "first_kill": bool, "count": "killed"|"detected", "generated": bool,
     "confinement": "landlock ABI n"|"off: why", then "; namespaces user, pid, ..." or "; namespaces off; ..."|"",
     "node_confinement": {node: "landlock ABI n"|"off: why"} (a Ray run's nodes; {} otherwise),
     "ceilings": "cgroup vN: memory..., pids.max"|"polled: why"|"" (the layer that enforced the ceilings),
     "baseline": {"status": "green", "gates": [{"id", "duration_s"}]},
     "mutations": [{"name", "status", "killed_by", "ran", "duration_s", "reason", "cached",
                    "attempts", "red_by_check", "red_by_exception",
                    "outcomes": [{"gate_id", "outcome", "duration_s", "exc_type", "message", "p_value",
                                  "corroboration": "once"|"repeated"|"reseeded"|"conclusive"|"unconfirmed"|"chance"}],
                    "bug_class", "file", "diff", "replacement",
                    "span": [first_line, first_column, last_line, last_column]}],
     "gates": [{"id", "kills", "vacuous"}], "score": float|null, "detected": float|null, "counts": {status: n},
     "flaky_gates": [{"id", "what"}], "expected_survivors": [{"name", "reason"}], "surprises": [names],
     "harness_errors": [str], "required": [names], "pins": [{"name", "expect_killed_by"}]}

The verdict block comes from `summary.judge`, the same function the terminal uses. This module turns
records into files and back; it never runs anything and never prints.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verify.report.decode import result_from_dict
from verify.report.summary import judge
from verify.report.verdict import Baseline, BaselineStatus, GateOutcome, MutationResult, Outcome, RunReport, Status

__all__ = [
    "ReportInputs",
    "write_report",
    "SCHEMA", "Detail", "MergeError", "RunInfo", "Table", "merge", "read_json", "read_report", "to_json", "write_json",
]  # fmt: skip

SCHEMA = "dflash-verify/1"


class MergeError(Exception):
    """Reports that cannot be read or joined: another schema, other gates, a mutation twice, a missing shard."""


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
    hint: str = ""  # what a reader may do about it (e.g. the entry that would mark it equivalent), shown after the diff
    divergence: str = ""  # a survivor's explanation in one line: its first diverging observable, or equivalence
    explanation: str = ""  # the whole explanation (`dflash verify explain`): what else diverges, what stays equal


@dataclass(frozen=True, slots=True)
class RunInfo:
    """How the report came to be: the tool, the project's commit, the run's settings and wall time."""

    tool_version: str = ""
    commit: str = ""  # the project's git HEAD, "+dirty" when the tree has uncommitted changes; "" outside git
    root: str = ""
    settings: Mapping[str, Any] = field(default_factory=dict)
    wall_s: float | None = None
    fail_under: float = 0.0
    title: str = "dflash verify"  # the command that made the report, as a page's heading names it


@dataclass(frozen=True, slots=True)
class ReportInputs:
    """What every report format's writer gets (verify.report.formats): the report, its mutations' details, where
    the sources are, and how the report came to be."""

    report: RunReport
    details: Mapping[str, Detail]
    root: Path  # the project's folder: writers that show source read it from here
    info: RunInfo
    repository_prefix: str = ""  # the project's folder inside its git repository, for files named from its top


@dataclass(frozen=True, slots=True)
class Table:
    """A titled table of plain text that a command adds to its report beside the verdicts (the renderers draw
    it; what it counts is the command's business), with notes printed under it."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if any(len(row) != len(self.columns) for row in self.rows):
            raise ValueError(f"table {self.title!r}: every row needs {len(self.columns)} cells")


def to_json(
    report: RunReport, details: Mapping[str, Detail] | None = None, info: RunInfo | None = None
) -> dict[str, Any]:
    details, info = details or {}, info or RunInfo()
    kills, vacuous = report.gate_kills, set(report.vacuous_gates)
    verdict = judge(report, info.fail_under)
    mutations = []
    for result in report.mutations:
        entry = dataclasses.asdict(result)
        entry["red_by_check"] = list(result.red_by_check)
        entry["red_by_exception"] = list(result.red_by_exception)
        detail = details.get(result.name)
        if detail is not None:
            entry.update(bug_class=detail.bug_class, file=detail.file, diff=detail.diff)
            if detail.divergence:
                entry.update(first_divergence=detail.divergence, explanation=detail.explanation)
            # What a report read back (`verify show`, `merge`) needs to place the mutant in its source again.
            entry.update(replacement=detail.replacement, span=list(_span(detail)))
        mutations.append(entry)
    return {
        "schema": SCHEMA,
        "tool": {"name": "dflash-verify", "version": info.tool_version},
        "project": {"root": info.root, "commit": info.commit},
        "verdict": {
            "result": verdict.word,
            "failures": list(verdict.failures),
            "score": verdict.score,
            "detected": report.detected,
            "killed": verdict.killed,
            "judged": verdict.judged,
            "counts": dict(verdict.counts),
        },
        "settings": dict(info.settings),
        "wall_s": info.wall_s,
        "self_check": report.self_check,
        "shard": report.shard,
        "interrupted": report.interrupted,
        "interrupted_by": report.interrupted_by,
        "first_kill": report.first_kill,
        "count": report.counting,
        "generated": report.generated,
        "confinement": report.confinement,
        "node_confinement": dict(report.node_confinement),
        "ceilings": report.ceilings,
        "baseline": {
            "status": report.baseline.status,
            "gates": [{"id": g.gate_id, "duration_s": g.duration_s} for g in report.baseline.gates],
        },
        "mutations": mutations,
        "gates": [{"id": g, "kills": n, "vacuous": g in vacuous} for g, n in kills.items()],
        "score": report.score,
        "detected": report.detected,
        "counts": {str(s): report.count(s) for s in Status if report.count(s)},
        "flaky_gates": [{"id": g, "what": what} for g, what in report.flaky_gates],
        "expected_survivors": [{"name": n, "reason": why} for n, why in report.expected_survivors],
        "surprises": list(report.surprises),
        "harness_errors": list(report.harness_errors),
        "required": list(report.required),
        "pins": [{"name": name, "expect_killed_by": list(pins)} for name, pins in report.pins],
    }


def write_json(
    report: RunReport, path: Path, details: Mapping[str, Detail] | None = None, info: RunInfo | None = None
) -> None:
    Path(path).write_text(json.dumps(to_json(report, details, info), indent=2) + "\n")


def write_report(inputs: ReportInputs, path: Path) -> None:
    """The `--json` format's writer."""
    write_json(inputs.report, path, inputs.details, inputs.info)


def read_report(path: Path) -> tuple[RunReport, dict[str, Detail], RunInfo]:
    """A report written by `write_json`, back as records (details only where the file has them)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise MergeError(f"{path}: not a readable JSON report ({error})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise MergeError(f"{path}: schema {data.get('schema') if isinstance(data, dict) else None!r}, want {SCHEMA}")
    gates = tuple(GateOutcome(g["id"], Outcome.PASSED, float(g["duration_s"])) for g in data["baseline"]["gates"])
    report = RunReport(
        baseline=Baseline(BaselineStatus(data["baseline"]["status"]), gates),
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
        first_kill=bool(data.get("first_kill", False)),
        generated=bool(data.get("generated", False)),
        confinement=str(data.get("confinement", "")),
        counting="detected" if data.get("count") == "detected" else "killed",
        node_confinement=tuple((str(k), str(v)) for k, v in (data.get("node_confinement") or {}).items()),
        ceilings=str(data.get("ceilings", "")),
    )
    details = {m["name"]: _detail(m) for m in data["mutations"] if "file" in m}
    verdict = data.get("verdict") or {}
    info = RunInfo(
        tool_version=(data.get("tool") or {}).get("version", ""),
        commit=(data.get("project") or {}).get("commit", ""),
        root=(data.get("project") or {}).get("root", ""),
        settings=data.get("settings") or {},
        wall_s=data.get("wall_s"),
        fail_under=float((data.get("settings") or {}).get("fail_under", 0.0) or 0.0) if verdict else 0.0,
    )
    return report, details, info


def _span(detail: Detail) -> tuple[int, int, int, int]:
    return detail.first_line, detail.first_column, detail.last_line, detail.last_column


def _detail(entry: Mapping[str, Any]) -> Detail:
    span = entry.get("span") or (1, 1, 1, 1)  # reports written before the span was kept
    detail = Detail(entry["bug_class"], entry["file"], entry.get("diff", ""), entry.get("replacement", ""), *span)
    explained = {"divergence": entry.get("first_divergence", ""), "explanation": entry.get("explanation", "")}
    return dataclasses.replace(detail, **explained)


def read_json(path: Path) -> tuple[RunReport, dict[str, Detail]]:
    report, details, _ = read_report(path)
    return report, details


def _check_complete(paths: Sequence[Path], reports: Sequence[RunReport]) -> None:
    """Every shard 1..N exactly once, all of the same N, none interrupted: else the merge would overstate."""
    shards = [r.shard for r in reports]
    interrupted = [str(p) for p, r in zip(paths, reports, strict=True) if r.interrupted]
    if interrupted:
        raise MergeError(f"interrupted shard report(s): {', '.join(interrupted)} (--allow-partial to merge anyway)")
    if not any(shards):
        return  # unsharded reports of disjoint runs (e.g. -m selections): nothing to count
    counts = {s.partition("/")[2] for s in shards}
    if "" in counts or len(counts) != 1:
        raise MergeError(f"reports of different shardings: {', '.join(s or 'unsharded' for s in shards)}")
    total = int(counts.pop())
    missing = sorted(set(range(1, total + 1)) - {int(s.partition("/")[0]) for s in shards})
    if missing:
        names = ", ".join(f"{k}/{total}" for k in missing)
        raise MergeError(f"missing shard(s) {names} of {total} (--allow-partial to merge anyway)")


def merge(paths: Sequence[Path], allow_partial: bool = False) -> tuple[RunReport, dict[str, Detail]]:
    """Join shard reports into one: same schema and gates, each mutation in exactly one shard, no shard missing."""
    if not paths:
        raise MergeError("nothing to merge")
    reports, details = [], {}
    for path in paths:
        report, found = read_json(path)
        reports.append(report)
        details.update(found)
    if not allow_partial:
        _check_complete(paths, reports)
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
        first_kill=any(r.first_kill for r in reports),
        confinement=next((r.confinement for r in reports if r.confinement.startswith("off")), first.confinement),
        counting=first.counting,
        node_confinement=tuple(dict(n for r in reports for n in r.node_confinement).items()),
        ceilings=next((r.ceilings for r in reports if r.ceilings.startswith("polled")), first.ceilings),
    )
    return merged, details
