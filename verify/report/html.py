"""The offline HTML report: one self-contained page with Stryker's viewer, then dflash's mutation x gate matrix.

The top is dflash's verdict (the banner, counts, why it fails, vacuous and flaky gates) from `summary.judge`,
the terminal's own words, then each survivor with its explanation (`dflash verify explain`: the first
diverging observable and the whole text) and, for a --first-kill run, what that does to the matrix and the
viewer's Tests tab. One look for the page: dflash's sections and the viewer share a left edge, a font and the
viewer's status colours. Below it, Stryker's `<mutation-test-report-app>` (the vendored
mutation-testing-elements bundle, `viewer.py`) renders the Stryker JSON that `stryker.to_stryker` builds, the
very summary `--stryker` writes: each file's source with its mutants inline and their diffs, filters by
status, the gates as tests with what each killed and covered, and every statusReason. Below that, what the
viewer has no view for: the matrix of mutations against gate files from `matrix.build_matrix` (a cell links to
the gate's row under its mutation: outcome, time, message; it scrolls in its own box when wider than the
window) and a command's own tables.

The bundle and the report are inlined (no file, font or network fetch): the JSON sits in a
`type="application/json"` script with `<`, `>` and `&` escaped, so no value can close the script, and every
value in the HTML around it is escaped. The viewer's router owns the URL fragment, so links within dflash's
sections scroll instead of changing it. This module only formats records.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from verify.report.html_assets import BOOT, STYLE
from verify.report.json_report import Detail, ReportInputs, RunInfo, Table
from verify.report.matrix import LEGEND, SYMBOL_STYLE, build_matrix
from verify.report.stryker import STRYKER_STATUS, to_stryker
from verify.report.summary import DECLARED, format_score, judge, status_label, status_reason, verdict_line
from verify.report.verdict import MutationResult, RunReport, Status
from verify.report.viewer import load_viewer

__all__ = ["FIRST_KILL_NOTE", "render_html", "script_json", "viewer_note", "write_html", "write_report"]


_CSS_SYMBOL = {"-": "dash", ".": "dot"}
_FIRST_REASONS = 5  # why a run fails: this many reasons shown, the rest folded


def _e(value: object) -> str:
    return html.escape(str(value))


def script_json(data: Any) -> str:
    """JSON that is safe as the text of a `<script>` element: `<`, `>` and `&` only occur inside JSON strings,
    where their \\u escapes mean the same, so no `</script>` or `<!--` can appear in the page's markup."""
    text = json.dumps(data, ensure_ascii=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _anchor(name: str, gate_index: int | None = None) -> str:
    return f"m-{name}" if gate_index is None else f"m-{name}-g{gate_index}"


def _css(label: str) -> str:
    return "declared" if label == DECLARED else label


def _matrix(report: RunReport) -> str:
    matrix = build_matrix(report, "file")
    index = {gate_id: i for i, gate_id in enumerate(report.baseline.gate_ids)}
    by_name = {r.name: r for r in report.mutations}
    vacuous = set(report.vacuous_gates)
    headers = "".join(
        # a label may break after an underscore (exact_engine, store_reads): every column fits 1,280 px
        f'<th class="group" title="{_e(", ".join(g.gate_ids))}">{_e(g.label).replace("_", "_<wbr>")}'
        f"<br>{len(g.gate_ids)} gates"
        + (f'<br><span class="warn">{n} vacuous</span>' if (n := len(vacuous & set(g.gate_ids))) else "")
        + "</th>"
        for g in matrix.groups
    )
    rows = []
    for row in matrix.rows:
        outcomes = {o.gate_id: o for o in by_name[row.name].outcomes}
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
    table = f"<table><tr><th>mutation</th><th>status</th>{headers}</tr>\n" + "\n".join(rows) + "</table>"
    return f'<div class="scroll" id="dflash-matrix-table">{table}</div>'


def _legend() -> str:
    """The matrix's legend (the terminal's words, `matrix.LEGEND`), each symbol on a chip of its cell's colour."""
    items = []
    for item in LEGEND.split("  "):
        symbol, _, word = item.strip().partition(" ")
        if symbol in SYMBOL_STYLE:  # every kind of cell, crashes past a ceiling (M, P, D) included
            chip = f'<span class="chip c-{_CSS_SYMBOL.get(symbol, symbol)}">{_e(symbol)}</span>'
            items.append(f"<li>{chip}{_e(word)}</li>")
        elif item.strip():
            items.append(f'<li><span class="chip"> </span>{_e(item.strip().strip("()"))}</li>')
    return f'<ul class="legend">{"".join(items)}</ul>'


# Why the viewer's Tests tab says "Not Covering" for most gates after a --first-kill run.
FIRST_KILL_NOTE = (
    "This run stopped each mutation at its first kill (--first-kill): the gates after the killing one never ran "
    "against it, so a blank cell means not run as well as not reached, and the viewer's Tests tab counts every "
    "gate that ran against no mutant as Not Covering. Run without --first-kill for the full matrix."
)


def _section(report: RunReport, result: MutationResult, detail: Detail | None, index: Mapping[str, int]) -> str:
    name, label = result.name, status_label(report, result)
    killers = ", ".join(result.killed_by) or ("not recorded" if result.status.is_detected else "none")
    cached = " (cached)" if result.cached else ""
    gates = "".join(
        f'<tr id="{_anchor(name, index.get(o.gate_id, 0))}"><td class="gate">{_e(o.gate_id)}</td>'
        f"<td>{_e(o.outcome)}</td><td>{o.duration_s:.2f}s</td>"
        f'<td class="msg">{_e(o.exc_type)}{": " if o.message else ""}{_e(o.message)}</td></tr>'
        for o in result.outcomes
    )
    head = "<tr><th>gate</th><th>outcome</th><th>time</th><th>message</th></tr>"
    return (
        '<article class="mutation">'
        f'<h3 id="{_anchor(name)}">{_e(name)} &mdash; <span class="s-{_css(label)}">{_e(label)}</span>{cached}</h3>'
        f"<p>{_e(detail.file if detail else '')}: {_e(detail.bug_class if detail else '')}</p>"
        f"<p>Killed by: {_e(killers)}. {_e(status_reason(report, result))}</p>"
        + _explained(detail)
        + (f"<table>{head}{gates}</table>" if gates else "")
        + f"<pre>{_e(detail.diff if detail else '')}</pre>"
        + (f"<pre>{_e(detail.hint)}</pre>" if detail and detail.hint else "")
        + "</article>"
    )


def _explained(detail: Detail | None) -> str:
    """A survivor's explanation (`dflash verify explain`): its first diverging observable, then the whole text."""
    if detail is None or not (detail.divergence or detail.explanation):
        return ""
    first = f"<p><b>Why it survived:</b> {_e(detail.divergence)}</p>" if detail.divergence else ""
    return first + (f'<pre class="explanation">{_e(detail.explanation)}</pre>' if detail.explanation else "")


def _survivors(report: RunReport, details: Mapping[str, Detail]) -> str:
    """Every survivor that is a test gap, at the top: where it is, its bug class and its explanation."""
    gaps = [r for r in report.mutations if r.status == Status.SURVIVED and not report.is_declared_survivor(r)]
    if not gaps:
        return ""
    items = []
    for result in gaps:
        detail = details.get(result.name)
        where = f"{_e(detail.file)}: {_e(detail.bug_class)}" if detail else ""
        items.append(
            f'<div class="survivor"><h3><a href="#{_anchor(result.name)}">{_e(result.name)}</a> &mdash; '
            f'<span class="s-survived">survived</span></h3><p>{where}</p>'
            + (_explained(detail) or "<p>Not explained (run `dflash verify explain NAME`).</p>")
            + "</div>"
        )
    return f'<section id="dflash-survivors"><h2>What survived, and why</h2>{"".join(items)}</section>'


def _table(table: Table) -> str:
    head = "".join(f"<th>{_e(column)}</th>" for column in table.columns)
    rows = "".join("<tr>" + "".join(f"<td>{_e(value)}</td>" for value in row) + "</tr>" for row in table.rows)
    notes = "".join(f"<p>{_e(note)}</p>" for note in table.notes)
    return f"<h2>{_e(table.title)}</h2><table><tr>{head}</tr>{rows}</table>{notes}"


def _header(report: RunReport, info: RunInfo, viewer_version: str, details: Mapping[str, Detail]) -> str:
    verdict = judge(report, info.fail_under)
    banner = f'<p class="banner {"pass" if verdict.passed else "fail"}">{_e(verdict_line(verdict, info.wall_s))}</p>'
    counts = "".join(f'<li><span class="s-{_css(s)}">{_e(s)}</span>: {n}</li>' for s, n in verdict.counts)
    reasons = (*verdict.failures, *(f"harness error: {e}" for e in report.harness_errors))
    failures = "".join(f"<li>{_e(reason)}</li>" for reason in reasons[:_FIRST_REASONS])
    if more := reasons[_FIRST_REASONS:]:  # a run that lost many pins: the first few, the rest one click away
        items = "".join(f"<li>{_e(reason)}</li>" for reason in more)
        failures += f"<li><details><summary>{len(more)} more</summary><ul>{items}</ul></details></li>"
    warning = ""
    if vacuous := report.vacuous_gates:
        items = "".join(f"<li>{_e(g)}</li>" for g in vacuous)
        warning += f'<p class="warn">{len(vacuous)} vacuous gates (no mutant turned them red):</p><ul>{items}</ul>'
    if flaky := "".join(f"<li>{_e(g)}: {_e(what)} (its kills are not counted)</li>" for g, what in report.flaky_gates):
        warning += f'<p class="warn">Flaky gates:</p><ul>{flaky}</ul>'
    if news := "".join(f"<li>{_e(n)}: declared to survive, a gate now catches it</li>" for n in report.surprises):
        warning += f"<p>News:</p><ul>{news}</ul>"
    meta = (
        f"dflash-verify {_e(info.tool_version or '?')}, commit {_e(info.commit or 'unknown')}, "
        f"{len(report.baseline.gate_ids)} gates, score {format_score(verdict.score)}, "
        f"detected {format_score(report.detected)}, harness self-check {_e(report.self_check or 'n/a')}; "
        + (f"confinement {_e(report.confinement)}; " if report.confinement else "")
        + (f"ceilings {_e(report.ceilings)}; " if report.ceilings else "")
        + f"viewer: mutation-testing-elements {_e(viewer_version)}"
    )
    note = f'<p class="note" id="dflash-first-kill">{_e(FIRST_KILL_NOTE)}</p>' if report.first_kill else ""
    survivors = _survivors(report, details)
    # The jump links come first, under the banner: in a failing report the survivors fill a screen or more.
    nav = '<nav id="dflash-nav">' + ('<a href="#dflash-survivors">What survived</a>' if survivors else "")
    nav += '<a href="#dflash-viewer-note">Source and gates</a><a href="#dflash-matrix">Mutation &times; gate</a>'
    nav += '<a href="#dflash-mutations">Every mutation</a></nav>'
    return (
        f'<header class="dflash"><h1>{_e(info.title)}</h1>{banner}{nav}<p class="meta">{meta}</p><ul>{counts}</ul>'
        f"{f'<p>Why it fails:</p><ul>{failures}</ul>' if failures else ''}{warning}"
        f"{survivors}{note}</header>"
    )


def viewer_note(report: RunReport, fail_under: float = 0.0) -> str:
    """What the embedded viewer's words and score are in dflash's: its statuses are Stryker's schema's, each
    named with the dflash statuses it stands for (from `stryker.STRYKER_STATUS`, the mapping the page uses), and
    its score is its own formula, so dflash's is named beside it."""
    words: dict[str, list[str]] = {}
    for ours, theirs in STRYKER_STATUS.items():
        words.setdefault(theirs, []).append(ours)
    words["NoCoverage"] = ["survived, no gate reaching its lines"]
    words["Ignored"].append("a declared survivor")
    mapping = "; ".join(f"{theirs} = {' or '.join(ours)}" for theirs, ours in words.items())
    verdict = judge(report, fail_under)
    return (
        "Below, Stryker's viewer (mutation-testing-elements) shows this run in its schema's words: "
        f"{mapping}. Its mutation score is its own formula (a Timeout counts as detected; RuntimeError and "
        "CompileError are left out), in percent, so it can differ from dflash's: the verdict rests on dflash's "
        f"score, {format_score(verdict.score)} (the banner's; detected {format_score(report.detected)})."
    )


def render_html(
    report: RunReport,
    details: Mapping[str, Detail] | None = None,
    info: RunInfo | None = None,
    tables: Sequence[Table] = (),
    root: Path | None = None,
) -> str:
    """The page; `root` (default: the run's project root) is where the viewer's sources are read; `tables` (a
    command's own counts, e.g. by source function) go above the matrix."""
    details, info = details or {}, info or RunInfo()
    viewer = load_viewer()
    stryker = to_stryker(report, details, Path(info.root) if root is None else root, info)
    index = {gate_id: i for i, gate_id in enumerate(report.baseline.gate_ids)}
    matrix = ""
    if any(r.outcomes for r in report.mutations):  # none in an operator sweep: its tool records no per-gate outcome
        note = f'<p class="note">{_e(FIRST_KILL_NOTE)}</p>' if report.first_kill else ""
        matrix = f"<h2>Mutation &times; gate file</h2>{_legend()}{note}{_matrix(report)}"
    sections = "".join(_section(report, r, details.get(r.name), index) for r in report.mutations)
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{_e(info.title)}</title>'
        f"<style>{STYLE}</style></head><body>{_header(report, info, viewer.version, details)}"
        f'<main><section class="dflash" id="dflash-viewer-note"><p class="note">'
        f"{_e(viewer_note(report, info.fail_under))}</p></section>"
        f'<mutation-test-report-app id="dflash-viewer" title-postfix="{_e(info.title)}">'
        f"</mutation-test-report-app>"
        f'<section class="dflash" id="dflash-matrix">{"".join(_table(t) for t in tables)}{matrix}</section>'
        f'<section class="dflash" id="dflash-mutations"><h2>Mutations</h2>{sections}</section></main>\n'
        f'<script type="application/json" id="dflash-stryker">{script_json(stryker)}</script>\n'
        f"<script>{viewer.script}</script>\n<script>{BOOT}</script>\n</body></html>\n"
    )


def write_html(
    report: RunReport,
    path: Path,
    details: Mapping[str, Detail] | None = None,
    info: RunInfo | None = None,
    tables: Sequence[Table] = (),
    root: Path | None = None,
) -> None:
    Path(path).write_text(render_html(report, details, info, tables, root), encoding="utf-8")


def write_report(inputs: ReportInputs, path: Path) -> None:
    """The `--html` format's writer."""
    write_html(inputs.report, path, inputs.details, inputs.info, root=inputs.root)
