"""A sweep's report: survivors grouped by runner module and function, each function mapped to the registered
mutations whose anchor lies in it, and the JSON ("dflash-verify/1", with a `sweep` section), JUnit and HTML
files written from that.

Reads the runner source only to place catalog anchors; knows nothing of mutmut or of the terminal.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from verify.mutation import Mutation
from verify.report.verdict import Status
from verify.run.apply import count_matches
from verify.sweep import source as sweep_source
from verify.sweep.equivalents import entry_toml
from verify.sweep.result import (
    LABELS,
    LEGACY,
    NO_TESTS,
    NOT_CHECKED,
    DecoratedFunction,
    SweepMutant,
    SweepOutcome,
    SweepResult,
)

SCHEMA = "dflash-verify/1"


def default_state_path(root: Path) -> Path:
    """Where a sweep keeps its last JSON for `promote`: the user's cache, so the project is never written."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    digest = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:12]
    return cache / "dflash" / f"sweep-{digest}.json"


@dataclass(frozen=True, slots=True)
class FunctionSummary:
    module: str
    function: str
    mutants: tuple[SweepMutant, ...]
    registered: tuple[str, ...]  # names of registered mutations whose anchor starts in this function

    def count(self, label: str) -> int:
        return sum(1 for mutant in self.mutants if mutant.label == label)

    @property
    def headline(self) -> str:
        survived = self.count(Status.SURVIVED)
        plural = "" if survived == 1 else "s"
        catalog = f"registered: {', '.join(self.registered)}" if self.registered else "no registered mutation"
        return f"{self.function} has {survived} surviving operator mutant{plural} and {catalog}"


@dataclass(frozen=True, slots=True)
class ModuleSummary:
    module: str
    functions: tuple[FunctionSummary, ...]
    decorated: tuple[DecoratedFunction, ...]

    def count(self, label: str) -> int:
        return sum(function.count(label) for function in self.functions)


def registered_functions(root: Path, catalog: Mapping[str, Mutation]) -> dict[tuple[str, str], tuple[str, ...]]:
    """(module, function) -> names of the registered mutations whose anchor starts inside that function."""
    found: dict[tuple[str, str], list[str]] = {}
    for name, mutation in sorted(catalog.items()):
        path = root / mutation.file
        text = path.read_text("utf-8") if path.is_file() else ""
        if count_matches(text, mutation.anchor) != 1:
            continue  # stale: `dflash verify` reports it; it touches no function here
        line = text.count("\n", 0, text.index(mutation.anchor)) + 1
        span = sweep_source.function_at(sweep_source.functions(text), line)
        if span is not None:
            found.setdefault((mutation.file, span.function), []).append(name)
    return {key: tuple(names) for key, names in found.items()}


def summarise(result: SweepResult, catalog: Mapping[str, Mutation]) -> tuple[ModuleSummary, ...]:
    """Group by module, then function, most survivors first; functions with only killed mutants stay in."""
    registered = registered_functions(Path(result.root), catalog)
    by_function: dict[tuple[str, str], list[SweepMutant]] = {}
    for mutant in result.mutants:
        by_function.setdefault((mutant.module, mutant.function), []).append(mutant)
    summaries = []
    for module in result.modules:
        functions = [
            FunctionSummary(module, function, tuple(mutants), registered.get((module, function), ()))
            for (owner, function), mutants in by_function.items()
            if owner == module
        ]
        functions.sort(key=lambda f: (-f.count(Status.SURVIVED), -f.count(NO_TESTS), f.function))
        decorated = tuple(d for d in result.decorated if d.module == module)
        summaries.append(ModuleSummary(module, tuple(functions), decorated))
    summaries.sort(key=lambda m: (-m.count(Status.SURVIVED), m.module))
    return tuple(summaries)


def _skeleton(result: SweepResult) -> dict[str, Any]:
    """A `dflash verify` report with no catalog run: every key its readers expect, empty."""
    return {
        "schema": SCHEMA,
        "shard": "",
        "interrupted": result.outcome == SweepOutcome.INTERRUPTED,
        "baseline": {"status": "green", "gates": []},
        "mutations": [],
        "gates": [],
        "score": result.score,
        "required": [],
        "pins": [],
    }


def to_json(
    result: SweepResult, catalog: Mapping[str, Mutation], verify_report: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The `dflash verify` JSON (`verify_report`'s catalog verdicts when given) plus `catalog` and `sweep`."""
    modules = summarise(result, catalog)
    registered = registered_functions(Path(result.root), catalog)
    where = {name: f"{file}:{function}" for (file, function), names in registered.items() for name in names}
    functions = [
        {
            "module": f.module,
            "function": f.function,
            "counts": dict(Counter(m.label for m in f.mutants)),
            "registered": list(f.registered),
            "headline": f.headline,
        }
        for m in modules
        for f in m.functions
    ]
    sweep = asdict(result) | {
        "score": result.score,
        "counts": dict(sorted(Counter(mutant.label for mutant in result.mutants).items())),
        "num_decorated": len(result.decorated),
        "num_undecorated": len(result.undecorated),
        "num_undecorated_mutants": result.count_in(result.undecorated),
        "mutants_per_s": result.mutants_per_s,
        "functions": functions,
    }
    data = dict(verify_report) if verify_report is not None else _skeleton(result)
    data["catalog"] = [asdict(m) | {"function": where.get(name, "")} for name, m in sorted(catalog.items())]
    data["sweep"] = sweep
    return data


def _status_fields(mutant: Mapping[str, Any]) -> dict[str, Any]:
    """The status (and mutmut's word) of a saved mutant, including one saved before the statuses were unified."""
    if mutant["status"] in LEGACY:
        status, word = LEGACY[mutant["status"]]
        return {"status": status, "mutmut": word or mutant.get("mutmut", "")}
    return {"status": Status(mutant["status"])}


def result_from_json(data: Mapping[str, Any]) -> SweepResult:
    """The inverse of `to_json` for the sweep section (promote reads a saved sweep back)."""
    if data.get("schema") != SCHEMA or "sweep" not in data:
        raise ValueError(f"not a sweep report (schema {SCHEMA!r} with a 'sweep' section)")
    sweep = data["sweep"]
    fields = set(SweepMutant.__dataclass_fields__)
    mutants = tuple(
        SweepMutant(**({k: v for k, v in m.items() if k in fields} | _status_fields(m))) for m in sweep["mutants"]
    )
    decorated, undecorated = (
        tuple(DecoratedFunction(d["module"], d["function"], tuple(d["decorators"])) for d in sweep.get(key, ()))
        for key in ("decorated", "undecorated")
    )
    return SweepResult(
        root=sweep["root"],
        modules=tuple(sweep["modules"]),
        mutants=mutants,
        decorated=decorated,
        undecorated=undecorated,
        outcome=SweepOutcome(sweep["outcome"]),
        wall_s=float(sweep["wall_s"]),
        num_jobs=int(sweep["num_jobs"]),
        budget_s=sweep.get("budget_s"),
        message=sweep.get("message", ""),
    )


def write_json(
    path: Path,
    result: SweepResult,
    catalog: Mapping[str, Mutation],
    verify_report: Mapping[str, Any] | None = None,
) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_json(result, catalog, verify_report), indent=2) + "\n", "utf-8")


_JUNIT_FAILURES = {
    str(Status.SURVIVED): "survived: every gate covering the function stayed green",
    NO_TESTS: "no tests: no selected gate calls this function",
}
# As `dflash verify`'s JUnit: crashes and timeouts fail, stale and errors are errors, the excused are skipped.
_JUNIT_SKIPS = {str(Status.EQUIVALENT), str(Status.UNCOVERED), str(Status.SKIPPED), NOT_CHECKED}


def _is_junit_failure(mutant: SweepMutant) -> bool:
    return mutant.label in _JUNIT_FAILURES or mutant.status in (Status.CRASHED, Status.TIMEOUT)


def write_junit(path: Path, result: SweepResult) -> None:
    """One test case per mutant, one suite per module: a survivor is a failure carrying its diff."""
    root = ET.Element("testsuites", name="dflash sweep")
    for module in result.modules:
        mutants = [m for m in result.mutants if m.module == module]
        suite = ET.SubElement(root, "testsuite", name=module, tests=str(len(mutants)))
        for mutant in mutants:
            case = ET.SubElement(suite, "testcase", classname=module, name=f"{mutant.function} {mutant.key}")
            label = mutant.label
            if _is_junit_failure(mutant):
                failure = ET.SubElement(case, "failure", type=label)
                failure.set("message", _JUNIT_FAILURES.get(label, label))
                failure.text = mutant.diff
            elif label in _JUNIT_SKIPS:
                ET.SubElement(case, "skipped", message=mutant.reason or label)
            elif mutant.status not in (Status.KILLED, Status.CAUGHT):
                message = mutant.reason or label
                ET.SubElement(case, "error", type=label, message=message).text = mutant.diff
        suite.set("failures", str(sum(1 for m in mutants if _is_junit_failure(m))))
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def _html_mutants(title: str, mutants: list[SweepMutant], offer_equivalent: bool = False) -> str:
    if not mutants:
        return ""
    items = "".join(
        f"<details><summary>{html.escape(m.module)}:{m.line} {html.escape(m.function)} "
        f"<code>{html.escape(m.key)}</code>{' — ' + html.escape(m.reason) if m.reason else ''}</summary>"
        f"<pre>{html.escape(m.diff)}</pre>"
        + (
            f"<p>If equivalent, add to the equivalents file:</p><pre>{html.escape(entry_toml(m))}</pre>"
            if offer_equivalent
            else ""
        )
        + "</details>"
        for m in mutants
    )
    return f"<h2>{html.escape(title)} ({len(mutants)})</h2>{items}"


def write_html(path: Path, result: SweepResult, catalog: Mapping[str, Mutation]) -> None:
    """A self-contained page: the summary, the per-function table, then survivors' diffs."""
    rows = "".join(
        f"<tr><td>{html.escape(f.module)}</td><td>{html.escape(f.function)}</td>"
        f"<td>{f.count(Status.SURVIVED)}</td><td>{f.count(NO_TESTS)}</td>"
        f"<td>{f.count(Status.KILLED)}</td><td>{html.escape(', '.join(f.registered) or '—')}</td></tr>"
        for m in summarise(result, catalog)
        for f in m.functions
    )
    skipped = "".join(
        f"<li>{html.escape(d.module)}: {html.escape(d.function)} ({html.escape(', '.join(d.decorators))})</li>"
        for d in result.decorated
    )
    by = {label: [m for m in result.mutants if m.label == label] for label in LABELS}
    body = (
        f"<h1>dflash sweep: {result.outcome}</h1><p>score {result.score:.3f}: "
        f"{result.count(Status.KILLED)} killed, {len(by[Status.SURVIVED])} survived, "
        f"{len(by[NO_TESTS])} with no tests, {len(by[Status.EQUIVALENT])} ignored as equivalent, "
        f"{len(by[Status.UNCOVERED])} uncovered on this machine, {len(by[Status.ERROR])} errors, "
        f"{len(by[NOT_CHECKED])} not checked; {len(result.decorated)} decorated functions "
        f"never mutated by mutmut; {len(result.undecorated)} decorated functions reached "
        f"({result.count_in(result.undecorated)} mutants) with their decorators spelt as assignments in the "
        f"sweep's copy.</p><pre>{html.escape(result.message)}</pre>"
        "<table><tr><th>module</th><th>function</th><th>survived</th><th>no tests</th><th>killed</th>"
        f"<th>registered mutations</th></tr>{rows}</table>"
        + _html_mutants("Survivors", by[Status.SURVIVED], offer_equivalent=True)
        + _html_mutants("No tests", by[NO_TESTS])
        + _html_mutants("Ignored as equivalent", by[Status.EQUIVALENT])
        + _html_mutants("Uncovered on this machine", by[Status.UNCOVERED])
        + _html_mutants("Errors (no verdict)", by[Status.ERROR])
        + (f"<h2>Decorated, never mutated ({len(result.decorated)})</h2><ul>{skipped}</ul>" if skipped else "")
    )
    style = "body{font-family:sans-serif}td,th{padding:2px 8px;text-align:left}pre{background:#f4f4f4}"
    page = f"<!doctype html><html><head><meta charset='utf-8'><title>dflash sweep</title><style>{style}</style>"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page + f"</head><body>{body}</body></html>\n", "utf-8")
