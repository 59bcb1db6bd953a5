"""Terminal rendering of verify runs: the only module that imports rich.

Progress bars go to stderr; the matrix (rows = mutations, columns = gates), verdicts, killers,
score and vacuous-gate warning go to stdout. The engine hands over records and never prints. The
progress display never starts rich's refresh thread: the executor forks, and a fork taken while
another thread holds a lock can deadlock the child.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.syntax import Syntax
from rich.table import Table

from verify.mutation import Mutation
from verify.report.files import Detail
from verify.report.verdict import Outcome, RunReport, Status

__all__ = [
    "PhaseProgress",
    "render_error",
    "render_failures",
    "render_mutation",
    "render_mutations",
    "render_report",
]

_STATUS_STYLE = {
    Status.KILLED: "green",
    Status.CAUGHT: "green",
    Status.CRASHED: "red",
    Status.TIMEOUT: "red",
    Status.SURVIVED: "bold red",
    Status.ERROR: "bold magenta",
    Status.STALE: "magenta",
    Status.EQUIVALENT: "dim",
    Status.UNCOVERED: "dim",
    Status.SKIPPED: "dim",
}
# A assertion, R refusal (the gate's checks), I a declared invariant, E another exception, T timeout, ? not run.
_CELL = {
    Outcome.ASSERTION: "[white on red] A [/]",
    Outcome.REFUSAL: "[white on red] R [/]",
    Outcome.INVARIANT: "[white on blue] I [/]",
    Outcome.EXCEPTION: "[white on dark_orange] E [/]",
    Outcome.TIMEOUT: "[white on dark_orange] T [/]",
    Outcome.NOT_RUN: "[magenta] ? [/]",
    Outcome.PASSED: "[green] · [/]",
}


class PhaseProgress:
    """A `verify.run.phases.Progress` drawn on stderr: one bar per phase, refreshed on each step."""

    def __init__(self, console: Console | None = None) -> None:
        self._bars = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("[dim]{task.fields[label]}"),
            console=console or Console(stderr=True),
            auto_refresh=False,
        )
        self._task: TaskID | None = None

    def __enter__(self) -> PhaseProgress:
        self._bars.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self._bars.stop()

    def phase(self, name: str, total: int) -> None:
        self._task = self._bars.add_task(name, total=total, label="")
        self._bars.refresh()

    def advance(self, label: str) -> None:
        if self._task is not None:
            self._bars.update(self._task, advance=1, label=label)
            self._bars.refresh()


def render_report(report: RunReport, console: Console | None = None) -> None:
    console = console or Console()
    gate_ids = report.baseline.gate_ids
    table = Table(title="mutation × gate", show_lines=False)
    table.add_column("mutation", no_wrap=True)
    table.add_column("status")
    for index in range(1, len(gate_ids) + 1):
        table.add_column(f"g{index}", justify="center")
    for result in report.mutations:
        by_gate = {o.gate_id: o.outcome for o in result.outcomes}
        cells = [_CELL[by_gate[g]] if g in by_gate else "" for g in gate_ids]
        style = _STATUS_STYLE[result.status]
        table.add_row(escape(result.name), f"[{style}]{result.status}[/]", *cells)
    console.print(table)
    for index, gate_id in enumerate(gate_ids, 1):
        console.print(f"  g{index} = {escape(gate_id)}", style="dim")
    console.print(
        "  A assertion, R refusal, I invariant, E other exception, T timeout, ? not run, · green, blank: not reached",
        style="dim",
    )
    for result in report.mutations:
        style = _STATUS_STYLE[result.status]
        killers = f" by {', '.join(result.killed_by)}" if result.killed_by else ""
        reason = f" ({result.reason})" if result.reason else ""
        cached = " [dim]cached[/]" if result.cached else ""
        console.print(f"[{style}]{result.status:>8}[/] {escape(result.name)}{escape(killers + reason)}{cached}")
    counts = ", ".join(f"{report.count(s)} {s}" for s in Status if report.count(s))
    score = "n/a" if report.score is None else f"{report.score:.3f}"
    detected = "n/a" if report.detected is None else f"{report.detected:.3f}"
    console.print(f"\nscore {score}  detected {detected}  ({counts})", style="bold")
    for gate_id, what in report.flaky_gates:
        console.print(f"[yellow]flaky:[/] {escape(gate_id)}: {escape(what)} (its kills are not counted)")
    for name in report.surprises:
        console.print(f"[cyan]news:[/] {escape(name)} was declared to survive and a gate now catches it")
    if report.vacuous_gates:
        console.print("[yellow]warning:[/] vacuous gates (no mutant turned them red):")
        for gate_id in report.vacuous_gates:
            console.print(f"  {escape(gate_id)}", style="yellow")


def render_error(message: str, console: Console | None = None) -> None:
    (console or Console(stderr=True)).print(f"[bold red]error:[/] {escape(message)}")


def render_failures(reasons: tuple[str, ...], console: Console | None = None) -> None:
    console = console or Console()
    for reason in reasons:
        console.print(f"[red]fail:[/] {escape(reason)}")


def render_mutations(mutations: Mapping[str, Mutation], console: Console | None = None) -> None:
    table = Table(title=f"{len(mutations)} registered mutations")
    for column in ("name", "file", "bug class", "pinned killers"):
        table.add_column(column)
    for name, mutation in mutations.items():
        table.add_row(
            escape(name),
            escape(mutation.file),
            escape(mutation.bug_class),
            escape(", ".join(mutation.expect_killed_by)),
        )
    (console or Console()).print(table)


def render_mutation(mutation: Mutation, detail: Detail, stale_reason: str, console: Console | None = None) -> None:
    console = console or Console()
    console.print(f"[bold]{escape(mutation.name)}[/]  {escape(mutation.file)}")
    console.print(f"bug class: {escape(mutation.bug_class)}")
    if mutation.expect_killed_by:
        console.print(f"pinned killers: {escape(', '.join(mutation.expect_killed_by))}")
    if stale_reason:
        console.print(f"[magenta]stale:[/] {escape(stale_reason)}")
    else:
        console.print(Syntax(detail.diff, "diff", theme="ansi_dark", background_color="default"))
