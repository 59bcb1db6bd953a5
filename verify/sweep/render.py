"""The sweep on the terminal: a live progress display on stderr and the grouped report on stdout.

The only sweep module that imports rich; it renders records it is given and computes nothing itself.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.syntax import Syntax
from rich.table import Table

from verify.report.progress import eta_s, format_s, is_interactive
from verify.report.terminal import STATUS_STYLE
from verify.report.verdict import Status
from verify.sweep.report import ModuleSummary
from verify.sweep.result import LABELS, NO_TESTS, NOT_CHECKED, SweepOutcome, SweepProgress, SweepResult


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


def _summary(result: SweepResult) -> str:
    # The same statuses, words and colours as `dflash verify`'s summary.
    parts = [
        f"[{STATUS_STYLE.get(label, 'yellow')}]{result.count(label)} {label}[/]"
        for label in LABELS
        if result.count(label)
    ]
    return (
        f"[bold]dflash sweep[/] {result.outcome}: {', '.join(parts) or 'no mutants'}; "
        f"score {result.score:.3f} over {result.num_scored} mutants in {result.wall_s:.1f}s "
        f"({result.mutants_per_s:.2f} mutants/s, {result.num_jobs} jobs)"
    )


def render_result(result: SweepResult, modules: tuple[ModuleSummary, ...], console: Console | None = None) -> None:
    console = console or Console()
    table = Table(title="Operator mutants by runner module", title_justify="left")
    table.add_column("module", no_wrap=True)
    for column in ("survived", "no tests", "killed", "equivalent", "uncovered", "error", "unchecked", "decorated"):
        table.add_column(column, justify="right")
    for module in modules:
        table.add_row(
            escape(module.module),
            *(
                str(module.count(s))
                for s in (
                    Status.SURVIVED,
                    NO_TESTS,
                    Status.KILLED,
                    Status.EQUIVALENT,
                    Status.UNCOVERED,
                    Status.ERROR,
                    NOT_CHECKED,
                )
            ),
            str(len(module.decorated)),
        )
    console.print(table)
    for module in modules:
        gaps = [f for f in module.functions if f.count(Status.SURVIVED)]
        no_tests = [f for f in module.functions if f.count(NO_TESTS)]
        if not gaps and not no_tests:
            continue
        console.rule(f"[bold]{escape(module.module)}")
        for function in gaps:
            style = "bold red" if not function.registered else "red"
            console.print(f"[{style}]{escape(function.headline)}[/]")
            for mutant in function.mutants:
                if mutant.label == Status.SURVIVED:
                    console.print(f"  [dim]{escape(mutant.key)}[/] line {mutant.line}")
                    console.print(Syntax(mutant.diff.rstrip("\n") or "(no diff)", "diff", theme="ansi_dark"))
        for function in no_tests:
            count = function.count(NO_TESTS)
            console.print(f"[yellow]{escape(function.function)}: {count} mutants no gate reaches (no tests)[/]")
        if module.decorated:
            names = ", ".join(f"{d.function} (@{d.decorators[0]})" for d in module.decorated)
            console.print(f"[dim]decorated, never mutated by mutmut: {escape(names)}[/]")
    if result.undecorated:
        names = ", ".join(f"{d.function} (@{d.decorators[0]})" for d in result.undecorated)
        console.print(
            f"{len(result.undecorated)} decorated function{'s' if len(result.undecorated) > 1 else ''} reached: "
            f"{result.count_in(result.undecorated)} mutants in {escape(names)} (mutmut skips decorated functions; "
            "the sweep's copy spells their decorators as assignments, `f = deco(f)`)",
            highlight=False,
        )
    num_decorated = len(result.decorated)
    if num_decorated:
        console.print(
            f"[yellow]{num_decorated} decorated function{'s' if num_decorated > 1 else ''} got no operator mutants "
            "(a @staticmethod/@classmethod among other decorators, or a name defined twice, e.g. a property "
            "setter)[/]"
        )
    if result.message and result.outcome != SweepOutcome.COMPLETE:
        console.print(result.message, style="yellow", markup=False, highlight=False)
    console.print(_summary(result))


def render_error(message: str, console: Console | None = None) -> None:
    (console or Console(stderr=True)).print(f"[bold red]error:[/] {escape(message)}", highlight=False)


def render_note(message: str, console: Console | None = None) -> None:
    (console or Console(stderr=True)).print(message, markup=False, highlight=False)
