"""Output fitted to a width without losing meaning: the width to fit (a terminal's, or COLUMNS's when piped),
none piped without COLUMNS (a file, a CI log, where lines keep their content's width), and prose, identifiers
and diffs wrapped between words, never cut. A rendering module (rich); it knows nothing of reports.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.syntax import Syntax
from rich.text import Text

__all__ = ["fit_width", "print_diff", "print_wrapped", "widened"]


def fit_width(console: Console) -> int | None:
    """The width output must fit: a terminal's, or COLUMNS's when piped with COLUMNS set; None when piped
    without it (a file, a CI log), where lines keep their content's width and nothing is ever cut."""
    if console.is_terminal or os.environ.get("COLUMNS", "").strip().isdigit():
        return console.width
    return None


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
