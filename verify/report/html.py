"""The offline HTML report: a verdict banner, the matrix grouped by gate file, then each mutation in full.

One self-contained page (inline CSS, no scripts, no external links) to attach to a CI run. The banner's
verdict, counts and score come from `summary.judge` and the cells from `matrix.build_matrix`, the same code
the terminal uses. Gate columns are grouped by file so the table fits a page; a cell links to the
mutation's section, where each gate it ran has a row with its outcome, time and message (the cell's
target). Every value from the run is escaped. This module only formats records.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path

from verify.report.files import Detail, RunInfo, Table
from verify.report.matrix import LEGEND, build_matrix
from verify.report.summary import DECLARED, format_score, judge, status_label, status_reason, verdict_line
from verify.report.verdict import MutationResult, RunReport

__all__ = ["render_html", "write_html"]

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; max-width: 80em; }
.banner { padding: .6em 1em; font-size: 1.2em; font-weight: bold; border-radius: 4px; }
.pass { background: #e8f5e9; color: #1b5e20; border: 2px solid #2e7d32; }
.fail { background: #ffebee; color: #b71c1c; border: 2px solid #c62828; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ddd; padding: 2px 6px; text-align: center; }
th.group { font-weight: normal; font-size: 12px; }
td.name, td.msg, td.gate { text-align: left; font-family: monospace; } td.name { white-space: nowrap; }
td.c-A, td.c-R { background: #c62828; } td.c-I { background: #8e0000; } td.c-E { background: #ef6c00; }
td.c-T { background: #f9a825; } td.c-dash { background: #eee; } td.c-dot { background: #a5d6a7; }
td.cell a { color: #fff; text-decoration: none; display: block; } td.c-dot a, td.c-dash a { color: #333; }
.s-killed, .s-caught { color: #1b5e20; } .s-survived { color: #b00; font-weight: bold; } .s-declared { color: #777; }
.s-crashed, .s-timeout { color: #e65100; font-weight: bold; } .s-error { color: #6a1b9a; font-weight: bold; }
.s-stale { color: #6a1b9a; } .s-equivalent, .s-uncovered, .s-skipped { color: #777; }
pre { background: #f7f7f7; padding: .5em; overflow-x: auto; }
.warn { color: #b00; } .legend { color: #555; font-size: 12px; }
"""

_CSS_SYMBOL = {"-": "dash", ".": "dot"}


def _e(value: object) -> str:
    return html.escape(str(value))


def _anchor(name: str, gate_index: int | None = None) -> str:
    return f"m-{name}" if gate_index is None else f"m-{name}-g{gate_index}"


def _matrix(report: RunReport) -> str:
    matrix = build_matrix(report, "file")
    index = {gate_id: i for i, gate_id in enumerate(report.baseline.gate_ids)}
    by_name = {r.name: r for r in report.mutations}
    vacuous = set(report.vacuous_gates)
    headers = "".join(
        f'<th class="group" title="{_e(", ".join(g.gate_ids))}">{_e(g.label)}<br>{len(g.gate_ids)} gates'
        + (f'<br><span class="warn">{n} vacuous</span>' if (n := len(vacuous & set(g.gate_ids))) else "")
        + "</th>"
        for g in matrix.groups
    )
    rows = []
    for row in matrix.rows:
        result = by_name[row.name]
        outcomes = {o.gate_id: o for o in result.outcomes}
        cells = []
        for group, symbol in zip(matrix.groups, row.cells, strict=True):
            if not symbol:
                cells.append("<td></td>")
                continue
            ran = [g for g in group.gate_ids if g in outcomes]
            red = [g for g in ran if str(outcomes[g].outcome) != "passed"] or ran
            title = "; ".join(f"{g.rpartition('::')[2]}: {outcomes[g].outcome}" for g in ran)
            target = _anchor(row.name, index.get(red[0], 0))
            css = _CSS_SYMBOL.get(symbol, symbol)
            cells.append(f'<td class="cell c-{css}" title="{_e(title)}"><a href="#{target}">{_e(symbol)}</a></td>')
        rows.append(
            f'<tr><td class="name"><a href="#{_anchor(row.name)}">{_e(row.name)}</a></td>'
            f'<td class="s-{_css(row.status)}">{_e(row.status)}</td>{"".join(cells)}</tr>'
        )
    return f"<table><tr><th>mutation</th><th>status</th>{headers}</tr>\n" + "\n".join(rows) + "</table>"


def _css(label: str) -> str:
    return "declared" if label == DECLARED else label


def _section(report: RunReport, result: MutationResult, detail: Detail | None, index: Mapping[str, int]) -> str:
    name, label = result.name, status_label(report, result)
    why = status_reason(report, result)
    killers = ", ".join(result.killed_by) or ("not recorded" if result.status.is_detected else "none")
    cached = " (cached)" if result.cached else ""
    gates = "".join(
        f'<tr id="{_anchor(name, index.get(o.gate_id, 0))}"><td class="gate">{_e(o.gate_id)}</td>'
        f"<td>{_e(o.outcome)}</td><td>{o.duration_s:.2f}s</td>"
        f'<td class="msg">{_e(o.exc_type)}{": " if o.message else ""}{_e(o.message)}</td></tr>'
        for o in result.outcomes
    )
    head = "<tr><th>gate</th><th>outcome</th><th>time</th><th>message</th></tr>"
    table = f"<table>{head}{gates}</table>" if gates else ""
    return (
        f'<h3 id="{_anchor(name)}">{_e(name)} &mdash; <span class="s-{_css(label)}">{_e(label)}</span>'
        f"{cached}</h3><p>{_e(detail.file if detail else '')}: {_e(detail.bug_class if detail else '')}</p>"
        f"<p>Killed by: {_e(killers)}. {_e(why)}</p>{table}"
        f"<pre>{_e(detail.diff if detail else '')}</pre>"
        + (f"<pre>{_e(detail.hint)}</pre>" if detail and detail.hint else "")
    )


def _table(table: Table) -> str:
    head = "".join(f"<th>{_e(column)}</th>" for column in table.columns)
    rows = "".join("<tr>" + "".join(f"<td>{_e(value)}</td>" for value in row) + "</tr>" for row in table.rows)
    notes = "".join(f"<p>{_e(note)}</p>" for note in table.notes)
    return f"<h2>{_e(table.title)}</h2><table><tr>{head}</tr>{rows}</table>{notes}"


def render_html(
    report: RunReport,
    details: Mapping[str, Detail] | None = None,
    info: RunInfo | None = None,
    tables: Sequence[Table] = (),
) -> str:
    """The page; `tables` (a command's own counts, e.g. by source function) go between the verdict and the matrix."""
    details, info = details or {}, info or RunInfo()
    verdict = judge(report, info.fail_under)
    index = {gate_id: i for i, gate_id in enumerate(report.baseline.gate_ids)}
    banner = f'<p class="banner {"pass" if verdict.passed else "fail"}">{_e(verdict_line(verdict, info.wall_s))}</p>'
    counts = "".join(f'<li><span class="s-{_css(s)}">{_e(s)}</span>: {n}</li>' for s, n in verdict.counts)
    reasons = (*verdict.failures, *(f"harness error: {e}" for e in report.harness_errors))
    failures = "".join(f"<li>{_e(reason)}</li>" for reason in reasons)
    vacuous = report.vacuous_gates
    warning = (
        f'<p class="warn">{len(vacuous)} vacuous gates (no mutant turned them red):</p>'
        f"<ul>{''.join(f'<li>{_e(g)}</li>' for g in vacuous)}</ul>"
        if vacuous
        else ""
    )
    meta = (
        f"dflash-verify {_e(info.tool_version or '?')}, commit {_e(info.commit or 'unknown')}, "
        f"{len(report.baseline.gate_ids)} gates, score {format_score(verdict.score)}, "
        f"detected {format_score(report.detected)}, harness self-check {_e(report.self_check or 'n/a')}"
    )
    flaky = "".join(f"<li>{_e(g)}: {_e(what)} (its kills are not counted)</li>" for g, what in report.flaky_gates)
    if flaky:
        warning += f'<p class="warn">Flaky gates:</p><ul>{flaky}</ul>'
    news = "".join(f"<li>{_e(n)}: declared to survive, a gate now catches it</li>" for n in report.surprises)
    if news:
        warning += f"<p>News:</p><ul>{news}</ul>"
    sections = "".join(_section(report, r, details.get(r.name), index) for r in report.mutations)
    matrix = ""
    if any(r.outcomes for r in report.mutations):  # none in an operator sweep: its tool records no per-gate outcome
        matrix = f'<h2>Mutation &times; gate file</h2><p class="legend">{_e(LEGEND)}</p>{_matrix(report)}'
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{_e(info.title)}</title>'
        f"<style>{_STYLE}</style></head><body><h1>{_e(info.title)}</h1>{banner}<p>{meta}</p>"
        f"<ul>{counts}</ul>{f'<p>Why it fails:</p><ul>{failures}</ul>' if failures else ''}"
        + "".join(_table(table) for table in tables)
        + f"{matrix}{warning}<h2>Mutations</h2>{sections}</body></html>\n"
    )


def write_html(
    report: RunReport,
    path: Path,
    details: Mapping[str, Detail] | None = None,
    info: RunInfo | None = None,
    tables: Sequence[Table] = (),
) -> None:
    Path(path).write_text(render_html(report, details, info, tables), encoding="utf-8")
