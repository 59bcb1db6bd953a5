"""The catalog on a terminal: `dflash mutations list` (every registered mutation in a table), `dflash
mutations show NAME` (one mutation and its diff, highlighted) and `dflash mutations propose` (the proposals).

A rendering module, like `terminal.py`: it draws the records it is handed. The table fits a terminal's width
(piped, COLUMNS's if set) without cutting anything; piped without COLUMNS (a file, a CI log), it is one plain
line per mutation, as wide as its content.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table as RichTable

from verify.mutation import Mutation
from verify.report.fit import fit_width, print_diff, widened
from verify.report.json_report import Detail

__all__ = ["render_mutation", "render_mutations", "render_proposals"]

_UNBOUNDED = 100_000  # a width no content reaches: measure a table's natural width

_BUG_CLASS_MIN = 20  # the narrowest bug-class column worth its own pinned-killers or file column beside it


def _catalog_layout(mutations: Mapping[str, Mutation], width: int) -> tuple[str, ...]:
    """The catalog's columns at a terminal's width: all four while the bug class keeps room; narrower, the
    pins go under the bug class, then the file under the name, so every piece stays on screen, never cut."""
    name_w = max((len(n) for n in mutations), default=4)
    file_w = max((len(m.file) for m in mutations.values()), default=4)
    pins_w = max((len(", ".join(_pins(m))) for m in mutations.values()), default=0)
    if name_w + file_w + pins_w + _BUG_CLASS_MIN + 13 <= width:  # 13: four columns' borders and padding
        return ("name", "file", "bug class", "pinned killers")
    if name_w + file_w + _BUG_CLASS_MIN + 10 <= width:
        return ("name", "file", "bug class")
    return ("name", "bug class")


def _pins(mutation: Mutation) -> list[str]:
    return [p.rpartition("/")[2] for p in mutation.expect_killed_by]


def _catalog(mutations: Mapping[str, Mutation], columns: tuple[str, ...], width: int | None) -> RichTable:
    """The catalog table with `columns` at `width` columns; None: every column at its content's width, unwrapped."""
    table = RichTable(title=f"{len(mutations)} registered mutations", title_justify="left", show_lines=False)
    name_w = max((len(n) for n in mutations), default=4)
    fixed = {"name": min(name_w, width // 2) if width else None}
    if width:
        file_w = max((len(m.file) for m in mutations.values()), default=4)
        pins_w = max((len(", ".join(_pins(m))) for m in mutations.values()), default=0)
        fixed |= {"file": file_w, "pinned killers": pins_w}
        taken = sum(fixed[c] or 0 for c in columns if c != "bug class")
        fixed["bug class"] = max(1, width - taken - (3 * len(columns) + 1))
    for column in columns:
        table.add_column(column, width=fixed.get(column), overflow="fold", no_wrap=width is None)
    for name, mutation in mutations.items():
        pins = escape(", ".join(_pins(mutation)))
        cells = {"name": escape(name), "file": escape(mutation.file), "pinned killers": pins}
        cells["bug class"] = escape(mutation.bug_class)
        if "pinned killers" not in columns and pins:
            cells["bug class"] += f"\n[dim]pinned: {pins}[/]"
        if "file" not in columns:
            cells["name"] += f"\n[dim]{escape(mutation.file)}[/]"
        table.add_row(*(cells[column] for column in columns))
    return table


def render_mutations(mutations: Mapping[str, Mutation], console: Console | None = None) -> None:
    """The catalog. Within a width to fit (a terminal's, or COLUMNS's when piped) a table: names whole
    (folded only past half the width), the bug class wrapped, and where four columns do not fit the pins go
    under the bug class, then the file under the name, so nothing is cut. Piped without COLUMNS (a file, a CI
    log), one line per mutation for grep: name and file aligned, then the bug class and its pinned killers whole."""
    console = console or Console()
    width = fit_width(console)
    if width is not None:
        console.print(_catalog(mutations, _catalog_layout(mutations, width), width))
        return
    rows = [("name", "file", "bug class (pinned killers)")]
    for name, m in mutations.items():
        pins = ", ".join(_pins(m))
        rows.append((name, m.file, m.bug_class + (f" (pinned: {pins})" if pins else "")))
    widths = [max(len(row[k]) for row in rows) for k in range(2)]
    lines = ["  ".join([row[0].ljust(widths[0]), row[1].ljust(widths[1]), row[2]]) for row in rows]
    with widened(console, max(len(line) for line in lines)):
        console.print(f"{len(mutations)} registered mutations", markup=False, highlight=False)
        for number, line in enumerate(lines):
            console.print(line, style="bold" if number == 0 else None, markup=False, highlight=False, crop=False)


def render_mutation(mutation: Mutation, detail: Detail, stale_reason: str, console: Console | None = None) -> None:
    console = console or Console()
    console.print(f"[bold]{escape(mutation.name)}[/]  {escape(mutation.file)}")
    console.print(f"bug class: {escape(mutation.bug_class)}")
    if mutation.expect_killed_by:
        console.print(f"pinned killers: {escape(', '.join(mutation.expect_killed_by))}")
    if stale_reason:
        console.print(f"[magenta]stale:[/] {escape(stale_reason)}")
    else:
        print_diff(console, detail.diff)


def render_proposals(
    rows: Sequence[tuple[str, str, str, str]], summary: Sequence[str], console: Console | None = None
) -> None:
    """The proposals as a table (name, class, file:line, the changed line as the mutant reads it), then the
    summary lines. Piped without COLUMNS, as wide as its content, so every changed line is whole."""
    console = console or Console()
    fitted = fit_width(console) is not None
    table = RichTable(title=f"{len(rows)} proposed mutations", title_justify="left", show_lines=False)
    for column in ("name", "class", "file:line", "changed line"):
        table.add_column(column, overflow="fold", no_wrap=not fitted)
    for row in rows:
        table.add_row(*(escape(cell) for cell in row))
    if rows and fitted:
        console.print(table)
    elif rows:
        with widened(console, Measurement.get(console, console.options.update_width(_UNBOUNDED), table).maximum):
            console.print(table, crop=False)
    for line in summary:
        console.print(escape(line), soft_wrap=True)
