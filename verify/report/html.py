"""The offline HTML report: the mutation x gate matrix as a heatmap, then each mutation's diff.

One self-contained page (inline CSS, no scripts, no external links) so it can be attached to a CI
run and opened anywhere. Every value from the run is escaped. This module only formats records.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from pathlib import Path

from verify.report.files import Detail
from verify.report.verdict import MutationResult, Outcome, RunReport, Status

__all__ = ["render_html", "write_html"]

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ddd; padding: 2px 6px; text-align: center; }
th.gate { writing-mode: vertical-rl; transform: rotate(180deg); font-weight: normal; font-size: 12px; }
th.vacuous { color: #b00; font-weight: bold; }
td.name { text-align: left; font-family: monospace; }
td.assertion { background: #c62828; color: #fff; }
td.exception { background: #ef6c00; color: #fff; }
td.passed { background: #a5d6a7; }
td.notrun { background: #f2f2f2; color: #aaa; }
td.status-killed { color: #1b5e20; } td.status-survived, td.status-timeout, td.status-crashed { color: #b00; }
td.status-stale { color: #6a1b9a; } td.status-skipped { color: #777; }
pre { background: #f7f7f7; padding: 0.5em; overflow-x: auto; }
.warn { color: #b00; }
"""

# Cell text: A = red on an AssertionError (a check caught it), E = red on another exception or error.
_CELL = {
    Outcome.ASSERTION: ("assertion", "A"),
    Outcome.REFUSAL: ("assertion", "R"),
    Outcome.INVARIANT: ("exception", "I"),
    Outcome.EXCEPTION: ("exception", "E"),
    Outcome.TIMEOUT: ("exception", "T"),
    Outcome.NOT_RUN: ("notrun", "?"),
    Outcome.PASSED: ("passed", "·"),
}


def _row(result: MutationResult, gate_ids: tuple[str, ...]) -> str:
    by_gate = {o.gate_id: o for o in result.outcomes}
    cells = []
    for gate_id in gate_ids:
        outcome = by_gate.get(gate_id)
        css, text = _CELL[outcome.outcome] if outcome else ("notrun", "")
        title = f"{gate_id}: {outcome.outcome} {outcome.exc_type}" if outcome else f"{gate_id}: not run"
        cells.append(f'<td class="{css}" title="{html.escape(title)}">{text}</td>')
    status = html.escape(str(result.status))
    return (
        f'<tr><td class="name"><a href="#m-{html.escape(result.name)}">{html.escape(result.name)}</a></td>'
        f'<td class="status-{status}">{status}</td>{"".join(cells)}</tr>'
    )


def render_html(report: RunReport, details: Mapping[str, Detail] | None = None) -> str:
    details = details or {}
    gate_ids = report.baseline.gate_ids
    vacuous = set(report.vacuous_gates)
    headers = "".join(
        f'<th class="gate{" vacuous" if g in vacuous else ""}" title="{html.escape(g)}">'
        f"{html.escape(g.rpartition('::')[2] or g)}</th>"
        for g in gate_ids
    )
    rows = "\n".join(_row(r, gate_ids) for r in report.mutations)
    counts = ", ".join(f"{report.count(s)} {s}" for s in Status if report.count(s))
    warning = ""
    if vacuous:
        items = "".join(f"<li>{html.escape(g)}</li>" for g in sorted(vacuous))
        warning = f'<p class="warn">Vacuous gates (no mutant turned them red):</p><ul>{items}</ul>'
    sections = []
    for result in report.mutations:
        detail = details.get(result.name)
        killers = ", ".join(result.killed_by) or "none"
        name = html.escape(result.name)
        sections.append(
            f'<h3 id="m-{name}">{name} &mdash; {html.escape(str(result.status))}</h3>'
            f"<p>{html.escape(detail.bug_class if detail else '')}</p>"
            f"<p>Killed by: {html.escape(killers)}. {html.escape(result.reason)}</p>"
            f"<pre>{html.escape(detail.diff if detail else '')}</pre>"
        )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>dflash verify</title>'
        f"<style>{_STYLE}</style></head><body>"
        f"<h1>dflash verify</h1><p>Score {report.score:.3f} ({counts}). "
        "Cells: A red on an assertion, E red on another exception, · green, blank not run.</p>"
        f"{warning}<table><tr><th>mutation</th><th>status</th>{headers}</tr>\n{rows}</table>"
        f"<h2>Mutations</h2>{''.join(sections)}</body></html>\n"
    )


def write_html(report: RunReport, path: Path, details: Mapping[str, Detail] | None = None) -> None:
    Path(path).write_text(render_html(report, details), encoding="utf-8")
