"""Progress of a verify run's phases on stderr: a redrawn bar on a terminal, plain periodic lines elsewhere.

A rendering module (rich is allowed here): it implements `verify.run.phases.run.Progress` (`phase`, `advance`)
and knows nothing of what a phase does. On a terminal each phase gets a bar with done/total, elapsed time
and an estimate of the time left; in a CI log (stderr not a terminal, or `CI` set) the same facts come as
one plain line per phase start and at most one line every `interval_s` while it runs, so a log never
fills with redraws. The bar never starts rich's refresh thread: the executor forks, and a fork taken while
another thread holds a lock can deadlock the child; it is redrawn on each step instead.
"""

from __future__ import annotations

import os
import sys
import time
from types import TracebackType
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

__all__ = ["PhaseProgress", "eta_s", "format_s", "is_interactive"]


def is_interactive(stream: TextIO | None = None) -> bool:
    """A person watching a terminal (redraws help), not a CI log or a pipe (redraws are noise)."""
    stream = stream or sys.stderr
    return stream.isatty() and not os.environ.get("CI") and os.environ.get("TERM") != "dumb"


def eta_s(done: int, total: int, elapsed_s: float) -> float | None:
    """Time left at the mean pace so far; None before the first step (no pace yet)."""
    if done <= 0 or total <= done:
        return None if done <= 0 else 0.0
    return elapsed_s / done * (total - done)


def format_s(seconds: float) -> str:
    seconds = max(0, round(seconds))
    minutes, secs = divmod(seconds, 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class PhaseProgress:
    """One bar (or one stream of plain lines) per phase: baseline, self-check, mutations."""

    def __init__(self, stream: TextIO | None = None, interactive: bool | None = None, interval_s: float = 10.0) -> None:
        self._stream = stream or sys.stderr
        self._interactive = is_interactive(self._stream) if interactive is None else interactive
        self._interval_s = interval_s
        self._bars: Progress | None = None
        self._task: TaskID | None = None
        self._name, self._total, self._done = "", 0, 0
        self._started = self._last_line = 0.0
        if self._interactive:
            self._bars = Progress(
                TextColumn("{task.description:<10}"),
                BarColumn(bar_width=24),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("left"),
                TimeRemainingColumn(),
                TextColumn("[dim]{task.fields[label]}"),
                console=Console(file=self._stream),
                auto_refresh=False,
            )

    def __enter__(self) -> PhaseProgress:
        if self._bars is not None:
            self._bars.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        if self._bars is not None:
            self._bars.stop()

    def phase(self, name: str, total: int) -> None:
        self._name, self._total, self._done = name, total, 0
        self._started = self._last_line = time.monotonic()
        if self._bars is not None:
            self._task = self._bars.add_task(name, total=total, label="")
            self._bars.refresh()
        else:
            self._line(f"{name}: {total} to run")

    def advance(self, label: str) -> None:
        self._done += 1
        if self._bars is not None and self._task is not None:
            self._bars.update(self._task, advance=1, label=label)
            self._bars.refresh()
            return
        now = time.monotonic()
        if self._done < self._total and now - self._last_line < self._interval_s:
            return
        self._last_line = now
        elapsed = now - self._started
        left = eta_s(self._done, self._total, elapsed)
        eta = f", about {format_s(left)} left" if left else ""
        self._line(f"{self._name}: {self._done}/{self._total} in {format_s(elapsed)}{eta} (last: {label})")

    def _line(self, text: str) -> None:
        self._stream.write(text + "\n")
        self._stream.flush()
