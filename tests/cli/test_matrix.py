"""The terminal matrix through the real renderer (rich, recorded) at 80, 120 and 200 columns.

A report shaped like the shipped catalog's (40 mutations with catalog-length names, 65 gates in 12 files)
must show every mutation row and every gate group at every width, with no line wider than the console,
and end with the one-line verdict.
"""

from __future__ import annotations

import dataclasses
import io
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from rich.console import Console

from verify.report.html import render_html
from verify.report.junit import write_junit
from verify.report.matrix import SYMBOL, build_matrix
from verify.report.summary import DECLARED, judge, verdict_line
from verify.report.terminal import render_matrix, render_report, render_survivors
from verify.report.verdict import Baseline, GateOutcome, MutationResult, Outcome, RunReport, Status

FILES = ("drafts", "numerics", "paths", "store", "acceptance", "sampling", "dflash2", "trace", "rules",
         "checkpoint", "batching", "scheduler")  # fmt: skip
GATES = tuple(
    f"tests/gates/test_gate_{FILES[i % len(FILES)]}.py::test_{FILES[i % len(FILES)]}_case_{i}" for i in range(65)
)
# The shipped catalog's names run to 36 characters; a few longer ones make the narrow layout split blocks.
NAMES = tuple(f"context-{'x' * (i % 9)}-shifted-by-one-{i}" for i in range(38)) + (
    "selector-q-replaced-by-draft-softmax",
    "a-much-longer-mutation-name-than-any-in-the-shipped-catalog",
)
RED = [o for o in Outcome if o is not Outcome.PASSED]


@pytest.fixture(autouse=True)
def _no_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Piped output fits COLUMNS when it is set: the tests set it themselves, never inherit the shell's."""
    monkeypatch.delenv("COLUMNS", raising=False)


def _report() -> RunReport:
    mutations = []
    for i, name in enumerate(NAMES):
        gate_ids = GATES[i % 7 :: 5]
        outcomes = tuple(
            GateOutcome(g, RED[(i + j) % len(RED)] if j == 0 else Outcome.PASSED, 0.1) for j, g in enumerate(gate_ids)
        )
        status = Status.SURVIVED if i % 13 == 0 else Status.KILLED
        if status is Status.SURVIVED:
            outcomes = tuple(GateOutcome(g, Outcome.PASSED, 0.1) for g in gate_ids)
        killed_by = tuple(o.gate_id for o in outcomes if o.outcome is not Outcome.PASSED)
        mutations.append(MutationResult(name, status, killed_by, gate_ids, 1.0, outcomes=outcomes))
    baseline = Baseline("green", tuple(GateOutcome(g, Outcome.PASSED, 0.1) for g in GATES))
    return RunReport(baseline, tuple(mutations), required=NAMES)


def _render(width: int, by: str = "file", report: RunReport | None = None, terminal: bool = True) -> str:
    """The matrix as a terminal of `width` columns shows it, or (terminal=False) as a pipe receives it."""
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None, force_terminal=terminal)
    render_matrix(report or _report(), by, console)
    return console.export_text()


def _blocks(text: str) -> list[list[str]]:
    """The matrix's blocks: each a header line and its rows."""
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("mutation "):
            blocks.append([])
        elif blocks and line.split(" ")[0] in NAMES:
            blocks[-1].append(line)
    return blocks


@pytest.mark.parametrize("by", ["file", "gate"])
def test_piped_the_matrix_is_one_block_as_wide_as_its_content(by: str) -> None:
    text = _render(80, by, terminal=False)
    [block] = _blocks(text)
    assert len(block) == len(NAMES)
    header = next(line for line in text.splitlines() if line.startswith("mutation "))
    for group in build_matrix(_report(), by).groups:
        assert re.search(rf"\s{re.escape(group.label)}(\s|$)", header), group.label  # named, not numbered


@pytest.mark.parametrize(("width", "terminal"), [(80, True), (120, True), (80, False)])
def test_no_block_is_blank_and_groups_no_mutation_reached_are_named(width: int, terminal: bool) -> None:
    # Gates in 12 more files that no mutation reaches: blank columns that once filled a block of their own.
    extra = tuple(f"tests/gates/test_gate_idle{k}.py::test_idle" for k in range(12))
    report = _report()
    baseline = Baseline("green", report.baseline.gates + tuple(GateOutcome(g, Outcome.PASSED, 0.1) for g in extra))
    text = _render(width, report=dataclasses.replace(report, baseline=baseline), terminal=terminal)
    for block in _blocks(text):
        assert any(line[len(line.split(" ")[0]) :].split()[1:] for line in block), "a blank block"
    note = "gate files no mutation reached (not drawn): " + ", ".join(f"idle{k}" for k in range(12))
    assert note in " ".join(text.split())


@pytest.mark.parametrize("by", ["file", "gate"])
@pytest.mark.parametrize("width", [80, 120, 200])
def test_every_row_and_group_is_shown_within_the_width(width: int, by: str) -> None:
    text = _render(width, by)
    lines = text.splitlines()
    matrix = build_matrix(_report(), by)
    for name in NAMES:  # a name too long for its column stands whole on a line of its own
        assert any(line == name or line.startswith(name + " ") for line in lines), f"row {name} missing at {width}"
    assert max(len(line) for line in lines) <= width
    headers = " ".join(line for line in lines if line.startswith("mutation "))
    legend = " ".join(lines)
    for number, group in enumerate(matrix.groups, 1):
        shown = re.search(rf"(^|\s){re.escape(group.label)}(\s|$)", headers) or f"{number}={group.label}(" in legend
        assert shown, f"group {group.label} missing at {width}"
    numbered = not re.search(rf"\s{re.escape(matrix.groups[0].label)}(\s|$)", headers)
    if by == "file" and width >= 200:
        assert not numbered  # wide enough to name the files in the header itself
    assert "A assertion" in text and "T timeout" in text  # the legend


def _row_symbols(text: str, name: str) -> str:
    """A row's symbols as drawn: after its status on its line, or on the lines under a name that stands alone
    (a grid's long name, a row's wrapped cells: they start with spaces), `3:A` read as `A`."""
    lines = text.splitlines()
    k = next(i for i, line in enumerate(lines) if line == name or line.startswith(name + " "))
    body = [lines[k][len(name) :]]
    while k + 1 < len(lines) and lines[k + 1].startswith(" ") and lines[k + 1].strip():
        k += 1
        body.append(lines[k])
    return "".join(token.rpartition(":")[2] for token in " ".join(body).split()[1:])


@pytest.mark.parametrize("by", ["file", "gate"])
@pytest.mark.parametrize("width", [80, 120, 200])
def test_each_row_shows_its_strongest_outcome_per_group(width: int, by: str) -> None:
    report = _report()
    matrix = build_matrix(report, by)
    text = _render(width, by)
    for row in matrix.rows:
        assert _row_symbols(text, row.name) == "".join(c for c in row.cells if c), row.name


@pytest.mark.parametrize("by", ["file", "gate"])
@pytest.mark.parametrize("width", [60, 80, 120])
def test_a_narrow_terminal_gets_one_block(width: int, by: str) -> None:
    text = _render(width, by)
    assert sum(line.startswith("mutation ") for line in text.splitlines()) == 1, text
    assert max(len(line) for line in text.splitlines() if not line.startswith(("gate", "A assertion"))) <= width


def test_the_real_catalog_at_80_columns_is_one_numbered_block_with_every_name_on_its_row() -> None:
    """The committed run (55 mutations, 15 gate files) at 80 columns: it split into 14 columns and a second
    block of 55 rows for the fifteenth; numbered columns with their digits stacked fit it in one."""
    from verify.report.json_report import read_report

    report, _, _ = read_report(Path(__file__).resolve().parents[2] / "docs" / "runs" / "verify-first-kill.json")
    text = _render(80, report=report)
    lines = text.splitlines()
    assert [line.split()[0] for line in lines if line.startswith("mutation ")] == ["mutation"]
    header = lines.index(next(line for line in lines if line.startswith("mutation ")))
    assert lines[header - 1].split() == ["1"] * 6  # the tens of 10 to 15, above their units
    assert lines[header].split()[2:] == [str(n % 10) for n in range(1, 16)]
    for row in build_matrix(report).rows:
        [line] = [line for line in lines if line.startswith(row.name + " ")]  # the name and its cells on one line
        assert _row_symbols(text, row.name) == "".join(c for c in row.cells if c)
    assert "gate files: 1=acceptance(8)" in " ".join(text.split())


def test_piped_with_columns_the_matrix_fits_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    text = _render(80, terminal=False)
    rows = [line for line in text.splitlines() if line.split(" ")[0] in NAMES or line.startswith("mutation ")]
    assert max(len(line) for line in rows) <= 80
    monkeypatch.delenv("COLUMNS")
    wide = _render(80, terminal=False)
    assert max(len(line) for line in wide.splitlines()) > 80  # without COLUMNS: the content's width


def test_every_outcome_has_its_own_symbol() -> None:
    assert {str(o) for o in Outcome} <= set(SYMBOL)
    assert len({SYMBOL[str(o)] for o in Outcome}) == len(Outcome)


PRECEDENCE = [Outcome.ASSERTION, Outcome.REFUSAL, Outcome.INVARIANT, Outcome.EXCEPTION, Outcome.TIMEOUT,
              Outcome.NOT_RUN, Outcome.PASSED]  # fmt: skip


def test_a_cell_prefers_the_gates_own_check_over_other_red() -> None:
    gates = ("tests/gates/test_gate_a.py::test_one", "tests/gates/test_gate_a.py::test_two")
    for strong, weak in zip(PRECEDENCE, PRECEDENCE[1:], strict=False):
        outcomes = (GateOutcome(gates[0], weak, 0.1), GateOutcome(gates[1], strong, 0.1))
        result = MutationResult("m", Status.KILLED, (gates[1],), gates, 0.2, outcomes=outcomes)
        report = RunReport(Baseline("green", tuple(GateOutcome(g, Outcome.PASSED, 0) for g in gates)), (result,), ())
        assert build_matrix(report).rows[0].cells == (SYMBOL[str(strong)],)


def test_the_verdict_is_the_last_line() -> None:
    console = Console(width=80, record=True, file=io.StringIO(), color_system=None)
    report = _report()
    verdict = judge(report)
    render_report(report, verdict, 12.5, ("report.json",), "file", console)
    last = console.export_text().rstrip("\n").splitlines()[-1]
    assert last == verdict_line(verdict, 12.5, ("report.json",))
    assert last.startswith("FAIL 36/40 killed, score 0.900 | survived: ")
    assert last.endswith("| 12s | reports: report.json")


def test_the_summary_of_a_catalog_sized_run_fits_one_screen_at_80_columns() -> None:
    report = _report()
    short = RunReport(report.baseline, tuple(r for r in report.mutations if len(r.name) <= 36), report.required)
    console = Console(width=80, record=True, file=io.StringIO(), color_system=None)
    render_report(short, judge(short), 139.0, ("report.json",), "file", console)
    lines = console.export_text().splitlines()
    assert len(lines) <= len(short.mutations) + 15, "\n".join(lines)


def test_the_verdict_line_names_harness_trouble_and_interruption() -> None:
    report = dataclasses.replace(_report(), harness_errors=("the project's files changed during the run",))
    line = verdict_line(judge(report), 3.0)
    assert "harness error: the project's files changed during the run" in line and line.startswith("FAIL ")
    line = verdict_line(judge(dataclasses.replace(_report(), interrupted_by="SIGTERM")))
    assert "interrupted by SIGTERM" in line


def test_every_renderer_tells_a_declared_survivor_from_a_test_gap(tmp_path) -> None:
    gates = tuple(GateOutcome(g, Outcome.PASSED, 0.1) for g in ("t.py::a", "t.py::b"))
    killed = MutationResult("k", Status.KILLED, ("t.py::a",), ("t.py::a",), 0.5, "",
                            (GateOutcome("t.py::a", Outcome.ASSERTION, 0.1, "AssertionError"),))  # fmt: skip
    report = RunReport(
        Baseline("green", gates),
        (MutationResult("declared", Status.SURVIVED, ran=("t.py::a",)),
         MutationResult("gap", Status.SURVIVED, ran=("t.py::a",)), killed),
        ("declared", "gap", "k"),
        expected_survivors=(("declared", "the fixture cannot see it"),),
    )  # fmt: skip
    verdict = judge(report)
    assert dict(verdict.named)["survived"] == ("gap",)  # the verdict line names the gap only
    assert dict(verdict.counts) == {"killed": 1, "survived": 1, DECLARED: 1}
    assert "declared" not in verdict_line(verdict)
    out = io.StringIO()
    console = Console(file=out, width=120, color_system=None)
    render_survivors(report, {}, console)
    render_matrix(report, console=console)
    text = out.getvalue()
    assert f"{DECLARED} declared  the fixture cannot see it" in text and "survived gap" in text
    html = render_html(report)
    assert f'<span class="s-declared">{DECLARED}</span>' in html and "the fixture cannot see it" in html
    write_junit(report, tmp_path / "j.xml")
    cases = {c.get("name"): c for c in ET.parse(tmp_path / "j.xml").getroot().iter("testcase")}
    assert cases["declared"].find("skipped") is not None and cases["gap"].find("failure") is not None


def test_a_commands_table_and_a_detail_hint_are_drawn_by_the_html_and_terminal_renderers() -> None:
    from verify.report.json_report import Detail, RunInfo, Table
    from verify.report.terminal import render_table

    table = Table("By function", ("module", "function", "survived"), (("m.py", "f<x>", "3"),), ("1 note & more",))
    report = _report()
    details = {NAMES[0]: Detail("bug", "m.py", "-a\n+b", hint="[[equivalent]]")}
    page = render_html(report, details, RunInfo(title="dflash sweep"), (table,))
    assert "<title>dflash sweep</title>" in page and "<h1>dflash sweep</h1>" in page
    assert "<h2>By function</h2>" in page and "<td>f&lt;x&gt;</td><td>3</td>" in page
    assert "<p>1 note &amp; more</p>" in page and "<pre>[[equivalent]]</pre>" in page
    console = Console(file=io.StringIO(), width=80, record=True)
    render_table(table, console)
    text = console.export_text()
    assert "By function" in text and "f<x>" in text and "1 note & more" in text
    with pytest.raises(ValueError, match="every row needs 3 cells"):
        Table("t", ("a", "b", "c"), (("1",),))


@pytest.mark.parametrize("width", [80, 120])
def test_the_catalog_on_a_terminal_fits_the_width_and_cuts_nothing(width: int) -> None:
    from pathlib import Path

    from verify.config.catalog import load_mutations
    from verify.config.settings import load_config
    from verify.report.catalog_view import render_mutations

    mutations = load_mutations(load_config(Path(__file__).resolve().parents[2]))
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None, force_terminal=True)
    render_mutations(mutations, console)
    lines = [line for line in console.export_text().splitlines()[1:] if line.strip()]  # below the title
    assert all(len(line) <= width and line.rstrip()[-1] in "┓┃┩│┘" for line in lines)  # the right border: no crop
    text = " ".join(lines)
    last_column = "".join("".join(line.split("│")[-2].split()) for line in lines if line.count("│") >= 3)
    for name, mutation in mutations.items():
        assert name in text and mutation.file in text, name  # whole, never folded at these widths
        assert "".join(mutation.bug_class.split()) in last_column, name  # every bug class whole, if wrapped


# An outside engine's run (a Medusa-style engine adopted from the docs): two gate files, a declared survivor.
OUTSIDE_DECODE = "tests/test_decode.py::test_greedy_speculative_matches_plain"
OUTSIDE_MODEL = "tests/test_model.py::test_incremental_forward_matches_full"


def _outside_matrix_text(*, terminal: bool) -> str:
    """A run with a status longer than the column's nine characters: a declared survivor ("survived (declared)")."""
    passed, red = Outcome.PASSED, Outcome.ASSERTION

    def result(name: str, status: Status, decode: Outcome, model: Outcome | None = None) -> MutationResult:
        outcomes = (GateOutcome(OUTSIDE_DECODE, decode, 0.1),) + (
            () if model is None else (GateOutcome(OUTSIDE_MODEL, model, 0.1),)
        )
        killed_by = tuple(o.gate_id for o in outcomes if o.outcome is red)
        return MutationResult(name, status, killed_by, tuple(o.gate_id for o in outcomes), 1.0, outcomes=outcomes)

    mutations = (
        result("cache-crop-off-by-one", Status.KILLED, red),
        result("heads-read-stale-hidden", Status.SURVIVED, passed),
        result("position-offset", Status.KILLED, red, red),
        result("bonus-off-by-one", Status.SURVIVED, passed),
    )
    baseline = Baseline("green", (GateOutcome(OUTSIDE_DECODE, passed, 0.1), GateOutcome(OUTSIDE_MODEL, passed, 0.1)))
    report = RunReport(
        baseline,
        mutations,
        required=("cache-crop-off-by-one", "position-offset", "bonus-off-by-one"),
        expected_survivors=(("heads-read-stale-hidden", "only the acceptance rate drops"),),
    )
    console = Console(width=80, record=True, file=io.StringIO(), color_system=None, force_terminal=terminal)
    render_matrix(report, "file", console)
    return console.export_text()


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "piped"])
def test_each_matrix_symbol_sits_under_its_gate_files_label(terminal: bool) -> None:
    """The status column was 9 wide whatever the statuses: "survived (declared)" pushed its row's cells ten
    columns right, under the wrong file, and every symbol sat one column left of its label's last character."""
    lines = _outside_matrix_text(terminal=terminal).splitlines()
    header = next(line for line in lines if line.startswith("mutation "))
    label_end = {m.group(): m.end() - 1 for m in re.finditer(r"\S+", header)}
    names = ("cache-crop-off-by-one", "heads-read-stale-hidden", "position-offset", "bonus-off-by-one")
    symbols = {
        line.split()[0]: [i for i, c in enumerate(line) if c in "A."] for line in lines if line.startswith(names)
    }
    assert symbols["cache-crop-off-by-one"] == [label_end["decode"]]
    assert symbols["heads-read-stale-hidden"] == [label_end["decode"]]  # declared: as wide as any other
    assert symbols["bonus-off-by-one"] == [label_end["decode"]]
    assert symbols["position-offset"] == [label_end["decode"], label_end["model"]]


# A survivor whose change sits past the 80th column, on a line of long identifiers.
LONG_DIFF = (
    "--- a/runner/draft.py\n+++ b/runner/draft.py\n@@ -1,1 +1,1 @@\n"
    "-        logits = torch.tanh(logits / cfg.final_logit_softcapping) * cfg.final_logit_softcapping_scale_factor\n"
    "+        logits = torch.tanh(logits / cfg.final_logit_softcapping) * cfg.final_logit_softcapping_scale_factor_v2\n"
)


def _survivor_text(width: int, terminal: bool) -> str:
    from verify.report.json_report import Detail

    gate = "tests/gates/test_gate_numerics.py::test_block_logits_match_the_dense_reference_implementation_exactly"
    survivor = MutationResult("draft-logits-skip-softcap", Status.SURVIVED, ran=(gate,))
    report = RunReport(Baseline("green", (GateOutcome(gate, Outcome.PASSED, 0.1),)), (survivor,), ())
    detail = Detail("The draft's soft-cap is dropped.", "runner/draft.py", LONG_DIFF, explanation="first: " + gate)
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None, force_terminal=terminal)
    render_survivors(report, {survivor.name: detail}, console)
    return console.export_text()


def test_a_survivors_diff_and_identifiers_wrap_between_tokens_never_cut() -> None:
    text = _survivor_text(80, terminal=True)
    assert max(len(line) for line in text.splitlines()) <= 80
    shown = text.split()
    for token in LONG_DIFF.split():
        assert token in shown, token
    assert "cfg.final_logit_softcapping_scale_factor_v2" in shown  # the changed part, whole


def test_piped_a_survivors_diff_is_the_patch_line_for_line() -> None:
    text = _survivor_text(80, terminal=False)
    for line in LONG_DIFF.splitlines():
        assert line in text.splitlines(), line


def test_the_verdict_wraps_between_words_on_a_terminal_and_stays_one_line_piped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from verify.report.terminal import render_verdict

    report = _report()
    line = verdict_line(judge(report), 12.5, ("reports/a-long-report-name.json",))
    for terminal, columns in ((True, None), (False, "80")):
        if columns:
            monkeypatch.setenv("COLUMNS", columns)
        console = Console(width=80, record=True, file=io.StringIO(), color_system=None, force_terminal=terminal)
        render_verdict(judge(report), 12.5, ("reports/a-long-report-name.json",), console)
        lines = console.export_text().splitlines()
        if terminal:
            assert len(lines) > 1 and max(len(x) for x in lines) <= 80 and " ".join(lines).split() == line.split()
        else:
            assert lines == [line]  # a CI log reads the verdict by its last line, whole


SWEEP_COLUMNS = ("module", "survived", "no tests", "killed", "equivalent", "uncovered", "errors", "not checked")


@pytest.mark.parametrize(("width", "terminal"), [(80, True), (60, True), (200, True), (80, False)])
def test_a_commands_table_never_cuts_a_heading_or_a_value(width: int, terminal: bool) -> None:
    """The sweep's table by module at 80 columns cut its headings to `sur…`, `tes…`: too wide to fit, it is a
    line per row, each heading beside its value; piped without COLUMNS, the table at its own width."""
    from verify.report.json_report import Table
    from verify.report.terminal import render_table

    rows = (("toyrunner/accept.py", "1", "2", "10", "1", "0", "0", "0"), ("toyrunner/__init__.py", *"0" * 7))
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None, force_terminal=terminal)
    render_table(Table("Operator mutants by module", SWEEP_COLUMNS, rows), console)
    text = console.export_text()
    assert "…" not in text
    if terminal:
        assert max(len(line) for line in text.splitlines()) <= width
    flat = " ".join(text.split())
    for row in rows:
        assert row[0] in flat
        if terminal and width < 150:  # as lines: each value beside its heading
            for column, value in zip(SWEEP_COLUMNS[1:], row[1:], strict=True):
                assert f"{column} {value}" in flat, (column, value)
