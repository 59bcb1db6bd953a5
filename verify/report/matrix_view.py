"""The mutation x gate matrix on a terminal, always one block: named columns where they fit the width, else
numbered columns (their digits stacked) with a key, else a row per mutation with its cells as `number:symbol`.
A rendering module (rich) over `matrix.py`'s plain data; the rest of a run's output is `terminal.py`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.text import Text

from verify.report.fit import fit_width, widened
from verify.report.matrix import LEGEND, STATUS_STYLE, SYMBOL_STYLE, Matrix, build_matrix
from verify.report.verdict import RunReport

__all__ = ["render_matrix"]

_STATUS_WIDTH = 9
_MIN_NAME_W = 20  # narrower, a numbered grid would put most names on lines of their own: rows read better
_MIN_CELLS_W = 24  # the least room beside a row's name for its cells; less, they go on the lines below it


def render_matrix(report: RunReport, by: str = "file", console: Console | None = None) -> None:
    """Rows = mutations, columns = gate groups (files) or gates, always one block. Named columns where they fit
    the width (piped without COLUMNS: always); narrower, numbered columns (the numbers stacked, two columns a
    cell) with a key below, a name too long for its column on a line of its own above its cells; where even
    that does not fit (a matrix per gate), a row per mutation with its cells as `number:symbol`, wrapped
    between cells. Nothing is cut. A group that no mutation reached is named below the matrix, not drawn: a
    column blank in every row says nothing."""
    console = console or Console()
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
