"""The mutation x gate matrix as plain data: gates grouped by file (or one group per gate), one symbol a cell.

Shared by the terminal and the HTML report so both draw the same cells. A cell shows the strongest outcome
among the group's gates for that mutation: a gate's own check (A assertion, R refusal) over a named
invariant (I) over a crash past a ceiling (M memory, P processes, D disk, O output) over any other exception (E) over
a timeout (T) over a gate that did not run (-) over a pass
(.); blank when none of the group's gates ran against it (none reaches the mutated lines). Outcomes are
read by their names, so this module knows the verdict model only through its records.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

from verify.report.crashes import crash_kind
from verify.report.summary import DECLARED, status_label
from verify.report.verdict import GateOutcome, MutationResult, RunReport

__all__ = [
    "KIND_SYMBOL", "LEGEND", "STATUS_STYLE", "SYMBOL", "SYMBOL_STYLE", "GateGroup", "Matrix", "MatrixRow",
    "build_matrix", "cell",
]  # fmt: skip

# outcome name -> symbol, strongest first ("error"/"skipped" are older reports' names for not-run kinds)
SYMBOL = {
    "assertion": "A",
    "refusal": "R",
    "invariant": "I",
    "exception": "E",
    "error": "E",
    "timeout": "T",
    "not-run": "-",
    "skipped": "-",
    "passed": ".",
}
SYMBOL_STYLE = {
    "A": "bold white on red",
    "R": "bold white on red",
    "I": "bold white on dark_red",
    "E": "bold black on dark_orange",
    "M": "bold black on dark_orange",
    "P": "bold black on dark_orange",
    "D": "bold black on dark_orange",
    "O": "bold black on dark_orange",
    "T": "bold black on yellow",
    "-": "dim",
    ".": "green",
}
LEGEND = (
    "A assertion  R refusal  I invariant  E exception  M memory  P processes  D disk  O output  T timeout  "
    "- not run  . passed  (blank: not reached)"
)
# A row's status word's style on a terminal (DECLARED is summary's word for a declared survivor).
STATUS_STYLE = {
    "killed": "green",
    "caught": "green",
    "crashed": "dark_orange",
    "timeout": "dark_orange",
    "survived": "bold red",
    DECLARED: "dim",
    "error": "bold magenta",
    "stale": "magenta",
    "equivalent": "dim",
    "uncovered": "dim",
    "skipped": "dim",
}

# A crash past a ceiling (verify.report.verdict.crash_kind) shows its kind instead of E.
KIND_SYMBOL = {"memory": "M", "processes": "P", "disk": "D", "output": "O"}


@dataclass(frozen=True, slots=True)
class GateGroup:
    label: str  # the file's short name ("drafts" for tests/gates/test_gate_drafts.py), or the gate's name
    gate_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class MatrixRow:
    name: str
    status: str
    cells: tuple[str, ...]  # one symbol per group, "" when none of its gates ran


@dataclass(frozen=True, slots=True)
class Matrix:
    groups: tuple[GateGroup, ...]
    rows: tuple[MatrixRow, ...]


def _file_label(path: str) -> str:
    stem = PurePosixPath(path).stem
    for prefix in ("test_gate_", "test_gates_", "test_"):
        if stem.startswith(prefix) and len(stem) > len(prefix):
            return stem[len(prefix) :]
    return stem


def _groups(gate_ids: tuple[str, ...], by: str) -> tuple[GateGroup, ...]:
    if by == "gate":
        return tuple(GateGroup(g.rpartition("::")[2] or g, (g,)) for g in gate_ids)
    files: dict[str, list[str]] = {}
    for gate_id in gate_ids:
        files.setdefault(gate_id.partition("::")[0], []).append(gate_id)
    labels = [_file_label(f) for f in files]
    return tuple(
        GateGroup(label if labels.count(label) == 1 else path, tuple(ids))
        for label, (path, ids) in zip(labels, files.items(), strict=True)
    )


def _symbol(outcome: GateOutcome) -> str:
    kind = crash_kind(outcome)
    return KIND_SYMBOL[str(kind)] if kind is not None else SYMBOL.get(str(outcome.outcome), "?")


def cell(result: MutationResult, gate_ids: tuple[str, ...]) -> str:
    wanted = set(gate_ids)
    symbols = {_symbol(o) for o in result.outcomes if o.gate_id in wanted}
    for symbol in ("A", "R", "I", "M", "P", "D", "O", "E", "T", "-", ".", "?"):
        if symbol in symbols:
            return symbol
    return ""


def build_matrix(report: RunReport, by: str = "file") -> Matrix:
    if by not in ("file", "gate"):
        raise ValueError(f"by must be 'file' or 'gate', not {by!r}")
    groups = _groups(report.baseline.gate_ids, by)
    rows = tuple(
        MatrixRow(r.name, status_label(report, r), tuple(cell(r, g.gate_ids) for g in groups)) for r in report.mutations
    )
    return Matrix(groups, rows)
