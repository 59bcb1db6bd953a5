"""A sweep in `dflash verify`'s verdict model: each mutmut mutant a `MutationResult` named by its key, with a
`Detail` (its module, diff, replacement, the anchor's span and a bug class), so verify's renderers write the
sweep's JUnit, HTML, Stryker and JSON files and `summary.judge` gives its verdict, as for a catalog run.

Knows nothing of mutmut's files or of rendering; reads a swept module only to place each mutant's anchor.
"""

from __future__ import annotations

from pathlib import Path

from verify.report.json_report import Detail
from verify.report.verdict import Baseline, BaselineStatus, GateOutcome, MutationResult, Outcome, RunReport, Status
from verify.sweep import source as sweep_source
from verify.sweep.equivalents import entry_toml
from verify.sweep.result import NO_TESTS, NOT_CHECKED, SweepMutant, SweepOutcome, SweepResult

# Why a mutant has its status, where mutmut's bucket says more than the status does.
_REASONS = {
    NO_TESTS: "no tests: no selected gate calls this function",
    NOT_CHECKED: "not checked: the budget or an interrupt stopped the sweep first",
}


def reason(mutant: SweepMutant) -> str:
    """The equivalents file's or mutmut's reason, else what mutmut's word adds to the status ("segfault")."""
    if mutant.reason:
        return mutant.reason
    if mutant.mutmut in _REASONS:
        return _REASONS[mutant.mutmut]
    return mutant.mutmut if mutant.mutmut not in ("", str(mutant.status)) else ""


def to_result(mutant: SweepMutant) -> MutationResult:
    """mutmut records which gates ran (those calling the function) but no per-gate outcome, so a killed mutant
    names no killer and there is no matrix to draw; a no-tests survivor ran none (Stryker's NoCoverage)."""
    return MutationResult(
        mutant.key, mutant.status, ran=mutant.gates, reason=reason(mutant), crash_kind=mutant.crash_kind
    )


def _span(source: str, mutant: SweepMutant) -> tuple[int, int, int, int]:
    """The anchor's 1-based (first line, first column, last line, last column) in `source`, where the
    replacement goes; the whole function for a mutant read without its lines (a killed one)."""
    if not mutant.anchor or source.count(mutant.anchor) != 1:
        try:
            spans = sweep_source.functions(source)
        except SyntaxError:
            spans = ()
        function = next((span for span in spans if span.function == mutant.function), None)
        if function is None:
            return max(1, mutant.line), 1, max(1, mutant.line), 1
        return function.def_line, 1, function.end, len(source.splitlines()[function.end - 1]) + 1
    start = source.index(mutant.anchor)
    end = start + len(mutant.anchor)
    # A column counts from the character after the line's preceding newline (rfind gives -1 on the first line).
    return (
        source.count("\n", 0, start) + 1, start - source.rfind("\n", 0, start),
        source.count("\n", 0, end) + 1, end - source.rfind("\n", 0, end),
    )  # fmt: skip


def to_detail(mutant: SweepMutant, source: str) -> Detail:
    hint = ""
    if mutant.status is Status.SURVIVED and mutant.original:
        hint = "If it is equivalent, add to the equivalents file:\n" + entry_toml(mutant)
    first_line, first_column, last_line, last_column = _span(source, mutant)
    return Detail(
        f"operator mutant in {mutant.function}", mutant.module, mutant.diff, mutant.replacement,
        first_line, first_column, last_line, last_column, hint,
    )  # fmt: skip


def to_run_report(result: SweepResult) -> tuple[RunReport, dict[str, Detail]]:
    """The sweep as a run report of generated mutants: mutmut stops each mutant's gates at the first red one (a
    first-kill run), checked its harness with a forced failure before any verdict, and a sweep it could not run
    is a harness error."""
    sources: dict[str, str] = {}
    for module in {mutant.module for mutant in result.mutants}:
        path = Path(result.root) / module
        sources[module] = path.read_text("utf-8") if path.is_file() else ""
    gate_ids = sorted({gate_id for mutant in result.mutants for gate_id in mutant.gates})
    failed = result.outcome is SweepOutcome.FAILED
    report = RunReport(
        baseline=Baseline(
            BaselineStatus.RED if failed else BaselineStatus.GREEN,
            tuple(GateOutcome(g, Outcome.PASSED, 0.0) for g in gate_ids),
        ),
        mutations=tuple(to_result(mutant) for mutant in result.mutants),
        required=(),
        interrupted=result.outcome is SweepOutcome.INTERRUPTED,
        self_check="passed" if any(m.mutmut != NOT_CHECKED for m in result.mutants) else "",
        harness_errors=((result.message.partition("\n")[0],) if failed else ()) + result.harness_errors,
        first_kill=True,
        generated=True,
        confinement=result.confinement,
    )
    return report, {mutant.key: to_detail(mutant, sources[mutant.module]) for mutant in result.mutants}
