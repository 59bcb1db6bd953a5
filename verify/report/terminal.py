"""The verify run on a terminal: the mutation x gate matrix, the summary and the one-line verdict.

The only rich module of the run besides the progress bars (`progress.py`). It renders records it is handed
and computes nothing about verdicts: counts, score and the verdict line come from `summary.py`, so the
terminal says what the JSON, HTML and JUnit files say. Output fits a terminal's width: the matrix groups
gates by file (or shows every gate with `by="gate"`) and splits its columns into blocks when they do not fit,
so every row and every group is on screen at 80 columns as at 200. Piped (a file, a CI log), the matrix is as
wide as its content, every column kept. The catalog's own views are `catalog_view.py`'s.
"""

from __future__ import annotations

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
    "render_ceilings",
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


def _console(console: Console | None) -> Console:
    return console or Console()


def render_matrix(report: RunReport, by: str = "file", console: Console | None = None) -> None:
    """Rows = mutations, columns = gate groups (files) or gates, in blocks that fit a terminal's width; piped
    (not a terminal), in one block as wide as its content, every column kept. A group that no mutation
    reached is named below the matrix, not drawn: a column blank in every row says nothing, and a block of
    them would print every row again with nothing in it."""
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
    room = max(3, console.width - name_w - status_w - 2) if console.is_terminal else max(3, wanted)
    use_labels = wanted <= room
    widths = {i: len(labels[i]) + 1 if use_labels else len(str(i + 1)) + 1 for i in reached}
    with widened(console, None if console.is_terminal else name_w + status_w + 2 + wanted):
        blocks = _blocks([(i, widths[i]) for i in reached], room)
        _draw_blocks(console, matrix, (name_w, status_w), labels if use_labels else None, widths, blocks)
    kind = "gates" if by == "gate" else "gate files"
    if not use_labels and reached:
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


def _draw_blocks(
    console: Console,
    matrix: Matrix,
    column_w: tuple[int, int],  # the name's and the status's widths
    labels: Sequence[str] | None,  # None: the columns are numbered
    widths: Mapping[int, int],
    blocks: Sequence[Sequence[int]],
) -> None:
    name_w, status_w = column_w
    for number, block in enumerate(blocks):
        if number:
            console.print()
        # each label is right-aligned in its width, as each row's symbol is: its last character above the symbol
        header = Text(f"{'mutation':<{name_w}} {'status':<{status_w}}", style="bold")
        for i in block:
            header.append(f"{labels[i] if labels else i + 1:>{widths[i]}}", style="bold")
        console.print(header, no_wrap=True, crop=False)
        for row in matrix.rows:
            line = Text(f"{row.name:<{name_w}} ")
            line.append(f"{row.status:<{status_w}}", style=STATUS_STYLE.get(row.status, ""))
            for i in block:
                symbol = row.cells[i]
                line.append(" " * (widths[i] - 1))
                line.append(symbol or " ", style=SYMBOL_STYLE.get(symbol, ""))
            console.print(line, no_wrap=True, crop=False)


def _blocks(widths: Sequence[tuple[int, int]], room: int) -> list[list[int]]:
    """(group index, column width) pairs split into blocks of at most `room` columns; never an empty block."""
    blocks: list[list[int]] = [[]]
    used = 0
    for i, width in widths:
        if blocks[-1] and used + width > room:
            blocks.append([])
            used = 0
        blocks[-1].append(i)
        used += width
    return blocks


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
            console.print(f"[yellow]{label}:[/] {escape(result.name)}: {escape(divergence)}", soft_wrap=True)
    for reason in verdict.failures[:_MAX_FAILURES]:
        console.print(f"[red]fail:[/] {escape(reason)}")
    if len(verdict.failures) > _MAX_FAILURES:
        console.print(f"[red]fail:[/] +{len(verdict.failures) - _MAX_FAILURES} more (`dflash verify show`)")


def render_verdict(
    verdict: Verdict, wall_s: float | None = None, reports: Sequence[str] = (), console: Console | None = None
) -> None:
    style = "bold green" if verdict.passed else "bold red"
    _console(console).print(Text(verdict_line(verdict, wall_s, reports), style=style), soft_wrap=True)


def render_survivors(report: RunReport, details: Mapping[str, Detail], console: Console | None = None) -> None:
    """Each mutation no gate caught (survived, crashed, timeout, error), with its bug class and diff."""
    console = _console(console)
    for result in report.mutations:
        if str(result.status) not in ("survived", "crashed", "timeout", "error"):
            continue
        detail = details.get(result.name)
        label = status_label(report, result)
        style = STATUS_STYLE.get(label, "")
        console.print(f"\n[{style}]{label}[/] [bold]{escape(result.name)}[/]  {escape(status_reason(report, result))}")
        if detail is not None:
            console.print(f"bug class: {escape(detail.bug_class)}")
            if detail.explanation:
                console.print(f"explained: {escape(detail.explanation)}", soft_wrap=True)
            if detail.diff:
                console.print(Syntax(detail.diff, "diff", theme="ansi_dark", background_color="default"))


def render_result_detail(result: MutationResult, detail: Detail | None, console: Console | None = None) -> None:
    """One mutation: status, bug class, each gate it ran with its outcome, time and message, then its diff."""
    console = _console(console)
    style = STATUS_STYLE.get(str(result.status), "")
    cached = " (cached)" if result.cached else ""
    console.print(f"[bold]{escape(result.name)}[/]  [{style}]{result.status}[/]{cached}  {result.duration_s:.2f}s")
    if detail is not None:
        console.print(f"{escape(detail.file)}: {escape(detail.bug_class)}")
        if detail.explanation:
            console.print(f"explained: {escape(detail.explanation)}", soft_wrap=True)
    if result.reason:
        console.print(f"reason: {escape(result.reason)}")
    for outcome in result.outcomes:
        symbol = SYMBOL.get(str(outcome.outcome), "?")
        console.print(
            Text(f"{symbol} ", style=SYMBOL_STYLE.get(symbol, ""))
            + Text(f"{outcome.outcome!s:<9} {outcome.duration_s:6.2f}s  {outcome.gate_id}"),
            soft_wrap=True,
        )
        why = f"{outcome.exc_type}: {outcome.message}" if outcome.message else outcome.exc_type
        if why:
            console.print(Text(f"    {why}", style="dim"), soft_wrap=True)
    if not result.outcomes and result.ran:
        console.print(f"ran {len(result.ran)} gates; no per-gate outcome recorded")
    if detail is not None and detail.diff:
        console.print(Syntax(detail.diff, "diff", theme="ansi_dark", background_color="default"))


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


def render_ceilings(ceilings: str, console: Console | None = None) -> None:
    """A line on the run's ceilings when no cgroup enforces them: "polled: why"."""
    text = f"ceilings {ceilings}: no kernel limit, the parent checks children every 50 ms (docs/how-to/confinement.md)"
    (console or Console(stderr=True)).print(text, style="yellow", markup=False, highlight=False)


def render_node_confinement(nodes: Sequence[tuple[str, str]], console: Console | None = None) -> None:
    """A Ray run's confinement, node by node: where the children ran, not this machine."""
    full = all(not c.startswith("off") and "partial" not in c for _, c in nodes)
    (console or Console(stderr=True)).print(
        "confinement per node: " + "; ".join(f"{node} {confinement}" for node, confinement in nodes),
        style=None if full else "yellow", markup=False, highlight=False,
    )  # fmt: skip


def render_error(message: str, console: Console | None = None) -> None:
    (console or Console(stderr=True)).print(f"[bold red]error:[/] {escape(message)}")
