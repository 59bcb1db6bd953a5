"""Every sample, legend and count in the docs comes from one source, so none can go stale on its own: the
matrix legend from `verify.report.matrix.LEGEND`, the README's and the quickstart's matrices from the committed
run (`docs/runs/verify-first-kill.json`) drawn again by the renderer, the figures from the benchmarks page, and
every figure of an older catalog labelled with that catalog's size and the commit it came from."""

from __future__ import annotations

import dataclasses
import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from verify.cli import app
from verify.report.json_report import read_report
from verify.report.matrix import LEGEND
from verify.report.terminal import render_matrix

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text("utf-8")
RUN = "docs/runs/verify-first-kill.json"
PAGES = {"README.md": README} | {
    p.relative_to(ROOT).as_posix(): p.read_text("utf-8") for p in sorted(DOCS.rglob("*.md"))
}


def _text_blocks(text: str) -> list[str]:
    return re.findall(r"^```text\n(.*?)^```", text, re.MULTILINE | re.DOTALL)


def test_every_legend_in_a_sample_is_the_renderers() -> None:
    legends = []
    for page, text in PAGES.items():
        for block in _text_blocks(text):
            flat = " ".join(block.split())  # a legend wraps at the sample's width
            if "A assertion" in flat:
                start = flat.index("A assertion")
                end = flat.find("(blank: not reached)", start) + len("(blank: not reached)")
                legends.append((page, flat[start:end] if end > start + 20 else flat[start:]))
    assert {"README.md", "docs/quickstart.md", "docs/how-to/adopt.md"} <= {page for page, _ in legends}
    assert [(page, legend) for page, legend in legends if legend != " ".join(LEGEND.split())] == []


@pytest.mark.parametrize("page", ["docs/reference/cli.md", "docs/reference/html-report.md"])
def test_every_legend_in_prose_names_every_symbol(page: str) -> None:
    text = " ".join(PAGES[page].split())
    for symbol, word in re.findall(r"(\S) ([a-z]+(?: [a-z]+)?)(?:  |$)", LEGEND.partition("  (blank")[0]):
        assert re.search(rf"`{re.escape(symbol)}` (other )?{word}", text), (page, symbol, word)


def test_the_readme_sample_is_show_of_the_committed_run_at_120_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    shown = CliRunner().invoke(app, ["verify", "show", RUN], env={"COLUMNS": "120"})
    assert shown.exit_code == 0, shown.output
    rendered = [line.rstrip() for line in shown.output.splitlines()]
    [sample] = [b for b in _text_blocks(README) if b.lstrip().startswith(("mutation ", "1 1"))]
    lines = [line for line in sample.splitlines() if not line.startswith("...  (")]
    at = 0
    for line in lines:  # the sample's lines, in order, are the rendering's (it leaves rows out, never changes one)
        assert line in rendered[at:], line
        at = rendered.index(line, at) + 1
    assert f"shown by `dflash verify show {RUN}` at 120 columns" in " ".join(README.split())
    left_out = int(re.search(r"^\.\.\.  \((\d+) more rows, all killed\)$", sample, re.MULTILINE).group(1))
    report, _, _ = read_report(ROOT / RUN)
    assert left_out == len(report.mutations) - sum(line.startswith(tuple(m.name + " " for m in report.mutations))
                                                   for line in lines)  # fmt: skip


def test_the_quickstart_matrix_is_the_committed_runs_row_at_80_columns() -> None:
    report, _, _ = read_report(ROOT / RUN)
    one = dataclasses.replace(report, mutations=tuple(m for m in report.mutations if m.name == "stop-token-dropped"))
    console = Console(width=80, record=True, file=io.StringIO(), color_system=None, force_terminal=True)
    render_matrix(one, "file", console)
    drawn = "\n".join(line.rstrip() for line in console.export_text().splitlines())
    [sample] = [b for b in _text_blocks(PAGES["docs/quickstart.md"]) if "stop-token-dropped killed" in b]
    assert sample.startswith(drawn + "\n\n1 mutations: 1 killed")


def test_the_benchmarks_page_opens_with_the_run_the_readme_quotes() -> None:
    quoted = re.search(r"at ([0-9a-f]{7}) `dflash verify --first-kill`", README.split("## Benchmarks")[1]).group(1)
    page = PAGES["docs/benchmarks.md"]
    first = re.search(r"^## (.*)$", page, re.MULTILINE).group(1)
    assert quoted in first, first


def test_the_cli_references_figures_are_the_benchmarks() -> None:
    cli = " ".join(PAGES["docs/reference/cli.md"].split())
    bench = PAGES["docs/benchmarks.md"]
    [(fast, slow, size, commit)] = re.findall(
        r"([\d.]+ s) instead of ([\d.]+ s) for the (\d+)-mutation catalog at ([0-9a-f]{7})", cli
    )
    section = bench[bench.index(f"### At {commit}") :]
    assert fast in section and slow in section and f"{size} mutations" in section


def test_a_gate_count_of_an_older_run_names_that_run() -> None:
    gates = json.loads((ROOT / RUN).read_text("utf-8"))["baseline"]["gates"]
    files = {Path(g["id"].partition("::")[0]).name for g in gates}
    today = f"{len(gates)} gates in {len(files)} files"
    for page, text in PAGES.items():
        for match in re.finditer(r"^(\d+) gates in (\d+) files$", text, re.MULTILINE):
            if match.group(0) != today:
                before = " ".join(text[max(0, match.start() - 1500) : match.start()].split())
                assert re.search(r"\b[0-9a-f]{7}\b", before) and "catalog of" in before, (page, match.group(0))


def test_a_figure_of_an_older_catalog_says_its_size() -> None:
    size = len(json.loads((ROOT / RUN).read_text("utf-8"))["mutations"])
    for bullet in re.split(r"\n- ", README):
        for killed, same in re.findall(r"PASS (\d+)/\d+|the same (\d+) verdicts", bullet):
            n = int(killed or same)
            if n != size:
                assert f"{n}-mutation catalog" in " ".join(bullet.split()), bullet[:80]
