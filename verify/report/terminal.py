"""The verify run on a terminal: the mutation x gate matrix, the summary and the one-line verdict.

The only rich module of the run besides the progress bars (`progress.py`). It renders records it is handed
and computes nothing about verdicts: counts, score and the verdict line come from `summary.py`, so the
terminal says what the JSON, HTML and JUnit files say. Output fits a terminal's width (piped, COLUMNS's if
set): the matrix groups gates by file (or shows every gate with `by="gate"`) in one block at 80 columns as at
200, numbered where names do not fit; diffs and identifiers wrap between tokens, never cut. Piped without
COLUMNS (a file, a CI log), lines keep their content's width, every column kept. The catalog's own views are
`catalog_view.py`'s.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from rich.console import Console
from rich.markup import escape
from rich.syntax import Syntax
from rich.table import Table as RichTable
from rich.text import Text

from verify.report.files import Detail, Table
from verify.report.matrix import LEGEND, SYMBOL, SYMBOL_STYLE, Matrix, build_matrix
from verify.report.summary import DECLARED, Verdict, format_score, status_label, status_reason, verdict_line
from verify.report.verdict import MutationResult, RunReport

__all__ = [
    "render_confinement",
    "render_node_confinement",
    "render_error",
    "render_gate_list",
    "render_matrix",
    "render_report",
    "render_result_detail",
    "render_survivors",
    "render_table",
    "render_verdict",
    "fit_width",
    "print_diff",
    "print_wrapped",
    "widened",
]

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
_STATUS_WIDTH = 9
_MAX_FAILURES = 5
_MIN_NAME_W = 20  # narrower, a numbered grid would put most names on lines of their own: rows read better
_MIN_CELLS_W = 24  # the least room beside a row's name for its cells; less, they go on the lines below it


def _console(console: Console | None) -> Console:
    return console or Console()


def fit_width(console: Console) -> int | None:
    """The width output must fit: a terminal's, or COLUMNS's when piped with COLUMNS set; None when piped
    without it (a file, a CI log), where lines keep their content's width and nothing is ever cut."""
    if console.is_terminal or os.environ.get("COLUMNS", "").strip().isdigit():
        return console.width
    return None


def render_matrix(report: RunReport, by: str = "file", console: Console | None = None) -> None:
    """Rows = mutations, columns = gate groups (files) or gates, always one block. Named columns where they fit
    the width (piped without COLUMNS: always); narrower, numbered columns (the numbers stacked, two columns a
    cell) with a key below, a name too long for its column on a line of its own above its cells; where even
    that does not fit (a matrix per gate), a row per mutation with its cells as `number:symbol`, wrapped
    between cells. Nothing is cut. A group that no mutation reached is named below the matrix, not drawn: a
    column blank in every row says nothing."""
    console = _console(console)
    matrix = build_matrix(report, by)
    if not matrix.rows:
        console.print("no mutation ran")
        return
    name_w = max(len(row.name) for row in matrix.rows)
    # the widest status sets the column ("survived (declared)", "equivalent"), so every cell stays under its gate
    status_w = max(_STATUS_WIDTH, *(len(row.status) for row in matrix.rows))
    labels = [group.label for group in matrix.groups]
    reached = [i for i in range(len(labels)) if any(row.cells[i] for row in matrix.rows)]
    unreached = [labels[i] for i in range(len(labels)) if i not in reached]
    wanted = sum(len(labels[i]) + 1 for i in reached)
    width = fit_width(console)
    numbered_name_w = (width or 0) - status_w - 2 - 2 * len(reached)
    with widened(console, None if width else name_w + status_w + 2 + wanted):
        if width is None or name_w + status_w + 2 + wanted <= width:
            _draw_grid(console, matrix, (name_w, status_w), reached, labels)
        elif numbered_name_w >= min(name_w, _MIN_NAME_W):
            _draw_grid(console, matrix, (min(name_w, numbered_name_w), status_w), reached, None)
        else:
            _draw_rows(console, matrix, (name_w, status_w), reached, width)
    kind = "gates" if by == "gate" else "gate files"
    numbered = width is not None and name_w + status_w + 2 + wanted > width
    if numbered and reached:
        keys = "  ".join(f"{i + 1}={labels[i]}({len(matrix.groups[i].gate_ids)})" for i in reached)
        console.print(Text(f"{kind}: {keys}", style="dim"))
    if unreached:
        console.print(Text(f"{kind} no mutation reached (not drawn): {', '.join(unreached)}", style="dim"))
    console.print(Text(LEGEND, style="dim"))


@contextmanager
def widened(console: Console, width: int | None) -> Iterator[None]:
    """The console `width` columns wide for the block (None: as it is). print() renders at most the console's
    width, and a pipe has no screen to fit: this lets piped output keep its content's width."""
    saved = console.width
    if width is not None:
        console.width = max(width, saved)
    try:
        yield
    finally:
        console.width = saved


def _draw_grid(
    console: Console,
    matrix: Matrix,
    column_w: tuple[int, int],  # the name's and the status's widths
    reached: Sequence[int],
    labels: Sequence[str] | None,  # None: the columns are numbered, the digits stacked
) -> None:
    name_w, status_w = column_w
    widths = {i: len(labels[i]) + 1 if labels else 2 for i in reached}
    heads = [labels[i] if labels else str(i + 1) for i in reached]
    depth = 1 if labels else max(len(head) for head in heads)
    for level in range(depth):  # a number's digits stacked, its last digit above the cells
        digits = [head.rjust(depth)[level] if not labels else head for head in heads]
        first = level == depth - 1
        header = Text(f"{'mutation' if first else '':<{name_w}} {'status' if first else '':<{status_w}}", style="bold")
        for i, digit in zip(reached, digits, strict=True):
            # each label is right-aligned in its width, as each row's symbol is: its last character above the symbol
            header.append(f"{digit:>{widths[i]}}", style="bold")
        console.print(header, no_wrap=True, crop=False)
    for row in matrix.rows:
        name = row.name
        if len(name) > name_w:  # whole, on a line of its own: the cells follow under an empty name
            console.print(Text(name), no_wrap=True, crop=False)
            name = ""
        line = Text(f"{name:<{name_w}} ")
        line.append(f"{row.status:<{status_w}}", style=STATUS_STYLE.get(row.status, ""))
        for i in reached:
            symbol = row.cells[i]
            line.append(" " * (widths[i] - 1))
            line.append(symbol or " ", style=SYMBOL_STYLE.get(symbol, ""))
        line.rstrip()  # blank cells at the end of a row are no trailing spaces
        console.print(line, no_wrap=True, crop=False)


def _draw_rows(console: Console, matrix: Matrix, column_w: tuple[int, int], reached: Sequence[int], width: int) -> None:
    """A row per mutation, its cells `number:symbol` (blank cells left out), wrapped between cells."""
    name_w, status_w = column_w
    indent = name_w + status_w + 2 if width - name_w - status_w - 2 >= _MIN_CELLS_W else 4
    console.print(Text(f"{'mutation':<{name_w}} {'status':<{status_w}} cells (number:symbol)", style="bold"))
    for row in matrix.rows:
        line = Text(f"{row.name:<{name_w}} ")
        line.append(f"{row.status:<{status_w}}", style=STATUS_STYLE.get(row.status, ""))
        used = len(line)
        if used > width or indent == 4:
            console.print(line, no_wrap=True, crop=False)
            line, used = Text(" " * indent), indent
        for i in reached:
            if not (symbol := row.cells[i]):
                continue
            cell = f" {i + 1}:{symbol}"
            if used + len(cell) > width and used > indent:
                console.print(line, no_wrap=True, crop=False)
                line, used = Text(" " * indent), indent
            line.append(f" {i + 1}:")
            line.append(symbol, style=SYMBOL_STYLE.get(symbol, ""))
            used += len(cell)
        console.print(line, no_wrap=True, crop=False)


def render_report(
    report: RunReport,
    verdict: Verdict,
    wall_s: float | None = None,
    reports: Sequence[str] = (),
    by: str = "file",
    console: Console | None = None,
    details: Mapping[str, Detail] | None = None,
) -> None:
    """Matrix, summary and, as the very last line, the verdict."""
    console = _console(console)
    render_matrix(report, by, console)
    render_summary(report, verdict, console, details)
    render_verdict(verdict, wall_s, reports, console)


def render_summary(
    report: RunReport, verdict: Verdict, console: Console | None = None, details: Mapping[str, Detail] | None = None
) -> None:
    console = _console(console)
    also = f" (detected {format_score(report.detected)})" if report.detected is not None else ""
    console.print(f"\n{verdict.total} mutations: {verdict.counts_text}; score {format_score(verdict.score)}{also}")
    matrix = build_matrix(report, "file")
    vacuous = set(report.vacuous_gates)
    num_files = len(matrix.groups)
    line = f"{len(report.baseline.gate_ids)} gates in {num_files} file{'' if num_files == 1 else 's'}"
    if vacuous:
        line += f"; {len(vacuous)} vacuous (no mutant turned them red: `dflash verify show --vacuous`)"
    if report.baseline.gate_ids:  # a report that names no gate (an operator sweep's) has no line to show
        console.print(escape(line), style="dim" if not vacuous else "yellow")
    if report.self_check:
        console.print(f"harness self-check: {escape(report.self_check)}", style="dim")
    for gate_id, what in report.flaky_gates:
        console.print(f"[yellow]flaky:[/] {escape(gate_id)}: {escape(what)} (its kills are not counted)")
    for name in report.surprises:
        console.print(f"[cyan]news:[/] {escape(name)} was declared to survive and a gate now catches it")
    for result in report.mutations:
        divergence = (details or {}).get(result.name, Detail("", "")).divergence
        if divergence:
            label = status_label(report, result)
            print_wrapped(console, Text.assemble((f"{label}:", "yellow"), f" {result.name}: {divergence}"))
    for reason in verdict.failures[:_MAX_FAILURES]:
        console.print(f"[red]fail:[/] {escape(reason)}")
    if len(verdict.failures) > _MAX_FAILURES:
        console.print(f"[red]fail:[/] +{len(verdict.failures) - _MAX_FAILURES} more (`dflash verify show`)")


def render_verdict(
    verdict: Verdict, wall_s: float | None = None, reports: Sequence[str] = (), console: Console | None = None
) -> None:
    style = "bold green" if verdict.passed else "bold red"
    console = _console(console)
    # Piped (a CI log), the verdict is always one whole last line, COLUMNS or not: logs are read by its line.
    # On a terminal it wraps between words rather than at the terminal's edge.
    console.print(Text(verdict_line(verdict, wall_s, reports), style=style), soft_wrap=not console.is_terminal)


def render_survivors(report: RunReport, details: Mapping[str, Detail], console: Console | None = None) -> None:
    """Each mutation no gate caught (survived, crashed, timeout, error), with its bug class and diff."""
    console = _console(console)
    for result in report.mutations:
        if str(result.status) not in ("survived", "crashed", "timeout", "error"):
            continue
        detail = details.get(result.name)
        label = status_label(report, result)
        style = STATUS_STYLE.get(label, "")
        reason = status_reason(report, result)
        console.print(
            f"\n[{style}]{label}[/] [bold]{escape(result.name)}[/]" + (f"  {escape(reason)}" if reason else "")
        )
        if detail is not None:
            console.print(f"bug class: {escape(detail.bug_class)}")
            if detail.explanation:
                print_wrapped(console, Text(f"explained: {detail.explanation}"))
            if detail.diff:
                print_diff(console, detail.diff)


def render_result_detail(result: MutationResult, detail: Detail | None, console: Console | None = None) -> None:
    """One mutation: status, bug class, each gate it ran with its outcome, time and message, then its diff."""
    console = _console(console)
    style = STATUS_STYLE.get(str(result.status), "")
    cached = " (cached)" if result.cached else ""
    console.print(f"[bold]{escape(result.name)}[/]  [{style}]{result.status}[/]{cached}  {result.duration_s:.2f}s")
    if detail is not None:
        console.print(f"{escape(detail.file)}: {escape(detail.bug_class)}")
        if detail.explanation:
            print_wrapped(console, Text(f"explained: {detail.explanation}"))
    if result.reason:
        console.print(f"reason: {escape(result.reason)}")
    for outcome in result.outcomes:
        symbol = SYMBOL.get(str(outcome.outcome), "?")
        print_wrapped(
            console,
            Text(f"{symbol} ", style=SYMBOL_STYLE.get(symbol, ""))
            + Text(f"{outcome.outcome!s:<9} {outcome.duration_s:6.2f}s  {outcome.gate_id}"),
        )
        why = f"{outcome.exc_type}: {outcome.message}" if outcome.message else outcome.exc_type
        if why:
            print_wrapped(console, Text(f"    {why}", style="dim"))
    if not result.outcomes and result.ran:
        console.print(f"ran {len(result.ran)} gates; no per-gate outcome recorded")
    if detail is not None and detail.diff:
        print_diff(console, detail.diff)


def print_wrapped(console: Console, text: Text) -> None:
    """A line of prose or identifiers: within the width to fit, wrapped between words (a word longer than the
    width alone is folded); piped without COLUMNS, whole on one line."""
    if fit_width(console) is None:
        console.print(text, soft_wrap=True)
    else:
        console.print(text, overflow="fold")


def print_diff(console: Console, diff: str) -> None:
    """A diff, every changed character kept: wrapped between words within the width to fit, or, piped without
    COLUMNS, each line whole as in the patch."""
    lines = diff.splitlines() or [""]
    width = fit_width(console)
    syntax = Syntax(diff, "diff", theme="ansi_dark", background_color="default", word_wrap=width is not None)
    with widened(console, None if width else max(len(line) for line in lines)):
        console.print(syntax, crop=False)


def render_table(table: Table, console: Console | None = None) -> None:
    """A command's own table (its first column never wraps; counts are right-aligned), then its notes."""
    console = _console(console)
    drawn = RichTable(title=escape(table.title), title_justify="left")
    for i, column in enumerate(table.columns):
        numeric = bool(table.rows) and all(row[i].isdigit() for row in table.rows)
        drawn.add_column(escape(column), justify="right" if numeric else "left", no_wrap=i == 0)
    for row in table.rows:
        drawn.add_row(*(escape(value) for value in row))
    console.print(drawn)
    for note in table.notes:
        console.print(note, style="yellow", markup=False, highlight=False)


def render_gate_list(title: str, gate_ids: Sequence[str], console: Console | None = None) -> None:
    console = _console(console)
    console.print(f"{len(gate_ids)} {escape(title)}:")
    for gate_id in gate_ids:
        console.print(f"  {escape(gate_id)}", soft_wrap=True)


def render_confinement(confinement: str, console: Console | None = None) -> None:
    """A line on the run's confinement when it is less than full: "off: why" (children run unconfined) or
    "landlock ABI n, partial: what it lacks"."""
    what = (
        "children can write wherever you can; the project and your home's start-up files are checked for changes "
        "after the run"
        if confinement.startswith("off")
        else "children cannot write outside their own folders, but can do what this ABI does not govern"
    )
    (console or Console(stderr=True)).print(
        f"confinement {confinement}: {what} (docs/how-to/confinement.md)",
        style="yellow", markup=False, highlight=False,
    )  # fmt: skip


def render_node_confinement(nodes: Sequence[tuple[str, str]], console: Console | None = None) -> None:
    """A Ray run's confinement, node by node: where the children ran, not this machine."""
    full = all(not c.startswith("off") and "partial" not in c for _, c in nodes)
    (console or Console(stderr=True)).print(
        "confinement per node: " + "; ".join(f"{node} {confinement}" for node, confinement in nodes),
        style=None if full else "yellow", markup=False, highlight=False,
    )  # fmt: skip


def render_error(message: str, console: Console | None = None) -> None:
    (console or Console(stderr=True)).print(f"[bold red]error:[/] {escape(message)}")
