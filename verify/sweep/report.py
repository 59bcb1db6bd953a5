"""A sweep's report: survivors grouped by runner module and function, each function mapped to the registered
mutations whose anchor lies in it, as the sweep's own tables, and the files: JSON ("dflash-verify/1", with a
`sweep` section that `promote` reads back), JUnit, HTML and Stryker, each written by `verify.report` from the
sweep in its verdict model (`verdicts.to_run_report`).

Reads the runner source only to place catalog anchors; knows nothing of mutmut or of the terminal.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from verify.mutation import Mutation
from verify.mutation.apply import count_matches
from verify.report import json_report as report_files
from verify.report.html import write_html
from verify.report.json_report import RunInfo, Table
from verify.report.junit import write_junit
from verify.report.stryker import write_stryker
from verify.report.verdict import Status
from verify.sweep import source as sweep_source
from verify.sweep.result import (
    LEGACY,
    NO_TESTS,
    NOT_CHECKED,
    DecoratedFunction,
    SweepMutant,
    SweepOutcome,
    SweepResult,
)
from verify.sweep.verdicts import to_run_report

SCHEMA = report_files.SCHEMA


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


_COUNTED = (Status.SURVIVED, NO_TESTS, Status.KILLED, Status.EQUIVALENT, Status.UNCOVERED, Status.ERROR, NOT_CHECKED)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def tables(result: SweepResult, catalog: Mapping[str, Mutation]) -> tuple[Table, ...]:
    """What only a sweep knows, for the renderers to draw beside the verdicts: counts by module, and each function
    with survivors beside the registered mutations that already touch it."""
    modules = summarise(result, catalog)
    notes = []
    if result.undecorated:
        names = ", ".join(f"{d.function} (@{d.decorators[0]})" for d in result.undecorated)
        notes.append(
            f"{_plural(len(result.undecorated), 'decorated function')} reached: {result.count_in(result.undecorated)} "
            f"mutants in {names} (mutmut skips decorated functions; the sweep's copy spells their decorators as "
            "assignments, `f = deco(f)`)"
        )
    if result.decorated:
        names = ", ".join(f"{d.module}: {d.function} (@{', @'.join(d.decorators)})" for d in result.decorated)
        notes.append(
            f"{_plural(len(result.decorated), 'decorated function')} got no operator mutants (a @staticmethod/"
            f"@classmethod among other decorators, or a name defined twice, e.g. a property setter): {names}"
        )
    if result.stale_equivalents:
        listed = "; ".join(result.stale_equivalents[:3]) + (" ..." if len(result.stale_equivalents) > 3 else "")
        notes.append(
            f"{_plural(len(result.stale_equivalents), 'equivalents entry')} match no line of their module any more "
            f"(the code moved on; they excuse nothing, so remove or update them): {listed}"
        )
    by_module = Table(
        "Operator mutants by module",
        ("module", *(str(label) for label in _COUNTED), "decorated"),
        tuple((m.module, *(str(m.count(label)) for label in _COUNTED), str(len(m.decorated))) for m in modules),
        tuple(notes),
    )
    gaps = [f for m in modules for f in m.functions if f.count(Status.SURVIVED) or f.count(NO_TESTS)]
    by_function = Table(
        "Functions with survivors",
        ("module", "function", "survived", NO_TESTS, "registered mutations"),
        tuple(
            (
                f.module,
                f.function,
                *(str(f.count(label)) for label in (Status.SURVIVED, NO_TESTS)),
                ", ".join(f.registered) or "none",
            )
            for f in gaps
        ),
    )
    return (by_module, by_function) if gaps else (by_module,)


def to_json(
    result: SweepResult,
    catalog: Mapping[str, Mutation],
    verify_report: Mapping[str, Any] | None = None,
    info: RunInfo | None = None,
    explanations: Mapping[str, tuple[str, str]] | None = None,
) -> dict[str, Any]:
    """`dflash verify`'s JSON of the sweep in its verdict model (or, when given, `verify_report`: a catalog run's
    verdicts) plus `catalog` (each registered mutation and the function it touches) and `sweep` (the sweep's own
    record, which `result_from_json` reads back)."""
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
    if verify_report is not None:
        data = dict(verify_report)
    else:
        report, details = to_run_report(result)
        data = report_files.to_json(report, explained(details, explanations), info)
    data["catalog"] = [asdict(m) | {"function": where.get(name, "")} for name, m in sorted(catalog.items())]
    data["sweep"] = sweep
    return data


def explained(
    details: Mapping[str, report_files.Detail], explanations: Mapping[str, tuple[str, str]] | None
) -> dict[str, report_files.Detail]:
    """The details with each explained mutant's first divergence and explanation."""
    out = dict(details)
    for key, (divergence, text) in (explanations or {}).items():
        if key in out:
            out[key] = replace(out[key], divergence=divergence, explanation=text)
    return out


def _saved_fields(mutant: Mapping[str, Any]) -> dict[str, Any]:
    """A saved mutant's fields that JSON does not give back as they were: its gates (a list there), and its status
    (and mutmut's word), including one saved before the statuses were unified."""
    gates = tuple(mutant.get("gates", ()))
    if mutant["status"] in LEGACY:
        status, word = LEGACY[mutant["status"]]
        return {"status": status, "mutmut": word or mutant.get("mutmut", ""), "gates": gates}
    return {"status": Status(mutant["status"]), "gates": gates}


def result_from_json(data: Mapping[str, Any]) -> SweepResult:
    """The inverse of `to_json` for the sweep section (promote reads a saved sweep back)."""
    if data.get("schema") != SCHEMA or "sweep" not in data:
        raise ValueError(f"not a sweep report (schema {SCHEMA!r} with a 'sweep' section)")
    sweep = data["sweep"]
    fields = set(SweepMutant.__dataclass_fields__)
    mutants = tuple(
        SweepMutant(**({k: v for k, v in m.items() if k in fields} | _saved_fields(m))) for m in sweep["mutants"]
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
        stale_equivalents=tuple(sweep.get("stale_equivalents", ())),
        harness_errors=tuple(sweep.get("harness_errors", ())),
        confinement=str(sweep.get("confinement", "")),
    )


def write_json(
    path: Path,
    result: SweepResult,
    catalog: Mapping[str, Mutation],
    verify_report: Mapping[str, Any] | None = None,
    info: RunInfo | None = None,
    explanations: Mapping[str, tuple[str, str]] | None = None,
) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = to_json(result, catalog, verify_report, info, explanations)
    path.write_text(json.dumps(data, indent=2) + "\n", "utf-8")


def write_reports(
    result: SweepResult,
    catalog: Mapping[str, Mutation],
    info: RunInfo,
    paths: Sequence[Path | None],
    verify_report: Mapping[str, Any] | None = None,
    explanations: Mapping[str, tuple[str, str]] | None = None,
) -> list[str]:
    """Write each requested format ((json, junit, html, stryker), None to skip) with `verify.report`'s writers,
    the HTML with the sweep's tables; return the paths written. `explanations`: mutant -> (first divergence,
    whole explanation), from the survivors' triage."""
    report, details = to_run_report(result)
    details = explained(details, explanations)
    json_path, junit, html, stryker = paths
    written = []
    for path, write in (
        (json_path, lambda p: write_json(p, result, catalog, verify_report, info, explanations)),
        (junit, lambda p: write_junit(report, p, details, info)),
        (html, lambda p: write_html(report, p, details, info, tables(result, catalog))),
        (stryker, lambda p: write_stryker(report, p, details, Path(result.root), info)),
    ):
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            write(path)
            written.append(str(path))
    return written
