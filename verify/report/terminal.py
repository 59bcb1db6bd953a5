"""The verify run on a terminal: the matrix (drawn by `matrix_view.py`), survivors with their diffs, a
command's own tables, the summary and the one-line verdict.

A rendering module (rich), beside the progress bars (`progress.py`). It renders records it is handed and
computes nothing about verdicts: counts, score and the verdict line come from `summary.py`, so the terminal
says what the JSON, HTML and JUnit files say. Output fits the width `fit.py` names (a terminal's, or COLUMNS's
when piped): diffs, identifiers and tables wrap between words, never cut; piped without COLUMNS (a file, a CI
log), lines keep their content's width. The catalog's own views are `catalog_view.py`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table as RichTable
from rich.text import Text

from verify.report.fit import fit_width, print_diff, print_wrapped, widened
from verify.report.json_report import Detail, Table
from verify.report.matrix import STATUS_STYLE, SYMBOL, SYMBOL_STYLE, build_matrix
from verify.report.matrix_view import render_matrix
from verify.report.summary import Verdict, format_score, status_label, status_reason, verdict_line
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
    "fit_width",
    "print_diff",
    "print_wrapped",
    "widened",
]

_MAX_FAILURES = 5
_UNBOUNDED = 100_000  # a width no content reaches: measure a table's natural width


def _console(console: Console | None) -> Console:
    return console or Console()


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


def render_table(table: Table, console: Console | None = None) -> None:
    """A command's own table (its first column never wraps; counts are right-aligned), then its notes. Where the
    table cannot fit the width without cutting a word (its headings included), a line per row instead: the
    first cell, then each other column's heading and value, wrapped between words."""
    console = _console(console)
    drawn = RichTable(title=escape(table.title), title_justify="left")
    for i, column in enumerate(table.columns):
        numeric = bool(table.rows) and all(row[i].isdigit() for row in table.rows)
        drawn.add_column(escape(column), justify="right" if numeric else "left", no_wrap=i == 0)
    for row in table.rows:
        drawn.add_row(*(escape(value) for value in row))
    width = fit_width(console)
    natural = Measurement.get(console, console.options.update_width(_UNBOUNDED), drawn)
    if width is not None and natural.minimum > width:
        console.print(Text(table.title, style="italic"))
        for row in table.rows:
            pairs = [f"{column} {value}" for column, value in zip(table.columns[1:], row[1:], strict=True)]
            line = f"{row[0]}:"
            for number, pair in enumerate(pairs):  # a heading and its value stay on one line
                pair += "," if number < len(pairs) - 1 else ""
                if len(line) + 1 + len(pair) > width and line.strip():
                    console.print(line, markup=False, highlight=False, soft_wrap=True)
                    line = "  "
                line += (" " if line.strip() else "") + pair
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    else:
        with widened(console, None if width else natural.maximum):
            console.print(drawn, crop=False)
    for note in table.notes:
        console.print(note, style="yellow", markup=False, highlight=False)


def render_gate_list(title: str, gate_ids: Sequence[str], console: Console | None = None) -> None:
    console = _console(console)
    console.print(f"{len(gate_ids)} {escape(title)}:")
    for gate_id in gate_ids:
        console.print(f"  {escape(gate_id)}", soft_wrap=True)


def render_confinement(confinement: str, console: Console | None = None) -> None:
    """A line on the run's confinement when it is less than full: "off: why" (children run unconfined),
    "landlock ABI n, partial: what it lacks", or the namespaces a child lacks ("namespaces ...; pid refused: why")."""
    if confinement.startswith("namespaces"):
        what = ("a child can see what each missing layer hides: other processes and their environment (pid), "
                "the machine's /dev/shm, emptied after each child (mount), the network (net)")  # fmt: skip
    elif confinement.startswith("off"):
        what = ("children can write wherever you can; the project and your home's start-up files are checked for "
                "changes after the run")  # fmt: skip
    else:
        what = "children cannot write outside their own folders, but can do what this ABI does not govern"
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
