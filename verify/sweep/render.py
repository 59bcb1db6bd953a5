"""The sweep on the terminal: a live progress display on stderr, and the report on stdout drawn by
`verify.report.terminal` (the sweep's tables, survivors with their diffs, the summary and the verdict line).

The only sweep module that imports rich; it renders records it is given and computes nothing itself.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from verify.report.json_report import Detail, Table
from verify.report.progress import eta_s, format_s, is_interactive
from verify.report.summary import Verdict
from verify.report.terminal import render_summary, render_survivors, render_table, render_verdict
from verify.report.verdict import RunReport
from verify.sweep.result import SweepOutcome, SweepProgress, SweepResult


@contextmanager
def progress_display(console: Console | None = None) -> Iterator[Callable[[SweepProgress], None]]:
    """Yield the callback a sweep reports progress to: a bar with the time left on a terminal (stderr), plain
    lines at most every 30 s in a CI log or a pipe."""
    if console is None and not is_interactive(sys.stderr):
        yield _plain_lines()
        return
    console = console or Console(stderr=True)
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("copying the project", total=None)

        def update(tick: SweepProgress) -> None:
            if tick.phase != "mutants":
                bar.update(task, description=tick.phase.lower())
                return
            counts = f"[green]{tick.killed} killed[/] [red]{tick.survived} survived[/] {tick.no_tests} no tests"
            bar.update(task, description=f"mutants: {counts}", total=tick.total, completed=tick.done)

        yield update


def _plain_lines(interval_s: float = 30.0) -> Callable[[SweepProgress], None]:
    started = time.monotonic()
    last_line, last_phase = [0.0], [""]

    def update(tick: SweepProgress) -> None:
        if tick.phase != "mutants":
            if tick.phase != last_phase[0]:
                last_phase[0] = tick.phase
                print(f"sweep: {tick.phase.lower()}", file=sys.stderr, flush=True)
            return
        now = time.monotonic()
        if now - last_line[0] < interval_s and tick.done < tick.total:
            return
        last_line[0] = now
        left = eta_s(tick.done, tick.total, now - started)
        eta = f", about {format_s(left)} left" if left else ""
        counts = f"{tick.killed} killed, {tick.survived} survived, {tick.no_tests} no tests"
        print(f"sweep: {tick.done}/{tick.total} mutants ({counts}){eta}", file=sys.stderr, flush=True)

    return update


def render_result(
    result: SweepResult,
    report: RunReport,
    details: Mapping[str, Detail],
    tables: Sequence[Table],
    verdict: Verdict,
    reports: Sequence[str] = (),
    console: Console | None = None,
) -> None:
    """The sweep's tables, each mutant no gate caught with its diff, then `dflash verify`'s summary, with its
    verdict line last."""
    console = console or Console()
    for table in tables:
        render_table(table, console)
    render_survivors(report, details, console)
    if result.message and result.outcome != SweepOutcome.COMPLETE:
        console.print(result.message, style="yellow", markup=False, highlight=False)
    for error in result.harness_errors:
        console.print(f"harness error: {error}", style="red", markup=False, highlight=False)
    confined = f", confinement {result.confinement}" if result.confinement else ""
    console.print(
        f"\ndflash sweep {result.outcome}: {len(result.mutants)} mutants of {len(result.modules)} modules in "
        f"{result.wall_s:.1f}s ({result.mutants_per_s:.2f} mutants/s, {result.num_jobs} jobs{confined})",
        style="dim",
        highlight=False,
    )
    render_summary(report, verdict, console)
    render_verdict(verdict, result.wall_s, reports, console)


def render_note(message: str, console: Console | None = None) -> None:
    (console or Console(stderr=True)).print(message, markup=False, highlight=False)
