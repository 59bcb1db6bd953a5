"""Rich rendering of a fixture audit (the only rich user besides verify/render.py and the sweep's renderer)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from verify.audit import AuditReport


def render_audit(report: AuditReport, console: Console | None = None) -> None:
    console = console or Console()
    table = Table(title=f"fixture audit: {report.fixture}")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_column("threshold")
    table.add_column("")
    for fig in report.figures:
        mark = "[green]ok[/green]" if fig.passed else "[red]FAIL[/red]"
        shown = fig.threshold.text if fig.applies else "(n/a at this block size)"
        table.add_row(fig.name, f"{fig.value:.3f}", shown, mark if fig.threshold.text != "(reported)" else "")
    console.print(table)
    verdict = "[green]PASSED[/green]" if report.passed else "[red]FAILED[/red]"
    console.print(f"audit {verdict}")
