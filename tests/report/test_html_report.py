"""The HTML page, the Stryker JSON that feeds it and the review annotations drawn from the same JSON.

The page's own rendering is checked in a real browser by test_html_browser.py; here: the vendored viewer is the
one recorded, the page loads nothing from elsewhere and inlines exactly the Stryker report `--stryker` writes,
no value can break out of its script, and every survivor is annotated on its anchor's line.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest

from verify.report.annotations import github_annotations, to_codequality
from verify.report.html import render_html
from verify.report.json_report import Detail, RunInfo
from verify.report.stryker import to_stryker
from verify.report.verdict import Baseline, GateOutcome, MutationResult, Outcome, RunReport, Status
from verify.report.viewer import VENDOR, ViewerError, load_viewer, read_version

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = '</script><script>alert("x")</script><!-- & </SCRIPT >'


class _Page(HTMLParser):
    """Every tag with its attributes, and the text of each <script> element."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._script: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._script = dict(attrs)
            self.scripts.append((self._script, ""))

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._script = None


def _parse(page: str) -> _Page:
    parser = _Page()
    parser.feed(page)
    parser.close()
    return parser


def _inlined_report(page: str) -> dict:
    (data,) = [text for attrs, text in _parse(page).scripts if attrs.get("type") == "application/json"]
    return json.loads(data)


def test_the_vendored_viewer_is_the_recorded_one() -> None:
    fields = read_version()
    bundle = VENDOR / fields["file"]
    assert fields["package"] == "mutation-testing-elements"
    assert hashlib.sha256(bundle.read_bytes()).hexdigest() == fields["sha256"]
    assert "mutation-test-report-app" in bundle.read_text()
    assert "Apache License" in (VENDOR / "LICENSE").read_text()
    pinned = re.search(r"^REPORT_ELEMENTS\s*:=\s*(\S+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert pinned and pinned.group(1) == fields["version"]  # `make vendor-report` fetches what VERSION records


def test_a_damaged_or_missing_viewer_is_a_named_error(tmp_path: Path) -> None:
    damaged = tmp_path / "damaged"
    shutil.copytree(VENDOR, damaged)
    (damaged / read_version()["file"]).write_text("/* not the bundle */")
    with pytest.raises(ViewerError, match="sha256 .* VERSION records"):
        load_viewer(damaged)
    with pytest.raises(ViewerError, match="make vendor-report"):
        load_viewer(tmp_path / "empty")


def test_the_page_loads_nothing_from_elsewhere_and_inlines_the_stryker_report(toy_run) -> None:
    page = (toy_run.reports / "report.html").read_text()
    parsed = _parse(page)
    for tag, attrs in parsed.tags:
        assert tag not in ("link", "img", "iframe", "object", "embed"), tag
        assert "src" not in attrs, (tag, attrs)
        assert (attrs.get("href") or "#").startswith("#"), (tag, attrs)
    assert [tag for tag, _ in parsed.tags].count("mutation-test-report-app") == 1
    assert [attrs.get("type") for attrs, _ in parsed.scripts] == ["application/json", None, None]
    assert load_viewer().script in page
    # The same summary feeds the viewer and --stryker.
    assert _inlined_report(page) == json.loads((toy_run.reports / "stryker.json").read_text())


def _hostile_report() -> tuple[RunReport, dict[str, Detail]]:
    gates = (GateOutcome("tests/test_x.py::test_a", Outcome.PASSED, 0.1),)
    red = GateOutcome("tests/test_x.py::test_a", Outcome.ASSERTION, 0.1, "AssertionError", HOSTILE)
    results = (
        MutationResult("killed-one", Status.KILLED, ("tests/test_x.py::test_a",), ("tests/test_x.py::test_a",),
                       outcomes=(red,)),
        MutationResult("survivor", Status.SURVIVED, (), ("tests/test_x.py::test_a",), reason=HOSTILE),
    )  # fmt: skip
    details = {
        "killed-one": Detail(HOSTILE, "pkg/m.py", f"-a\n+{HOSTILE}", HOSTILE, 2, 5, 2, 6),
        "survivor": Detail("bug & <b>", "pkg/m.py", "-a\n+b", "b", 2, 5, 2, 6),
    }
    return RunReport(Baseline("green", gates), results, required=()), details


def test_no_value_can_break_out_of_the_page(tmp_path: Path) -> None:
    report, details = _hostile_report()
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(f"# {HOSTILE}\nx = a\n")
    info = RunInfo(root=str(tmp_path), title=HOSTILE)
    page = render_html(report, details, info)
    assert len(re.findall(r"</script", page, re.IGNORECASE)) == 3  # the three scripts' own ends, no more
    assert "<!--" not in page.replace(load_viewer().script, "")  # nor a comment opener outside the bundle
    assert "<script>alert" not in page
    assert _inlined_report(page) == to_stryker(report, details, tmp_path, info)
    assert "<h1>&lt;/script&gt;&lt;script&gt;alert(&quot;x&quot;)" in page


def test_the_stryker_report_carries_the_gates_and_the_kinds_of_red(toy_run) -> None:
    data = json.loads((toy_run.reports / "stryker.json").read_text())
    gate_file = "tests/gates/test_arith.py"
    source = (toy_run.root / gate_file).read_text().splitlines()
    tests = {t["id"]: t for t in data["testFiles"][gate_file]["tests"]}
    assert set(tests) == set(toy_run.report.baseline.gate_ids)
    for gate_id, test in tests.items():  # each gate at its def, named as in the file
        name = gate_id.partition("::")[2]
        assert test["name"] == name and source[test["location"]["start"]["line"] - 1].startswith(f"def {name}(")
    mutants = {m["id"]: m for f in data["files"].values() for m in f["mutants"]}
    by_name = {r.name: r for r in toy_run.report.mutations}
    for name, mutant in mutants.items():
        assert mutant["killedBy"] == list(by_name[name].killed_by) and mutant["coveredBy"] == list(by_name[name].ran)
    killed = mutants["add-off-by-one"]["statusReason"].splitlines()
    assert killed[0] == "dflash: killed" and any(": assertion: AssertionError" in line for line in killed[1:])
    crashed = mutants["add-type-error"]["statusReason"]
    assert "tests/gates/test_arith.py::test_add: exception: TypeError" in crashed
    assert "timeout" in mutants["sub-hangs"]["statusReason"].splitlines()[1]
    survived = mutants["describe-label"]["statusReason"]
    # Then its explanation, made with no observer (the toy has none): the gates that reach it are the workloads.
    assert survived.splitlines()[1] == "1 gate(s) reaching the mutated lines ran and stayed green"
    assert survived.splitlines()[2].startswith("describe-label: first divergence: "), survived


def _anchor_line(root: Path, file: str, anchor: str) -> int:
    source = (root / file).read_text()
    return source.count("\n", 0, source.index(anchor)) + 1


def test_annotations_put_each_survivor_on_its_anchor_line(toy_run) -> None:
    data = json.loads((toy_run.reports / "stryker.json").read_text())
    lines = github_annotations(data)
    by_id = {re.search(r"title=mutation [a-z]+%3A ([\w-]+)", line).group(1): line for line in lines}
    assert set(by_id) == {"describe-label", "orphan-unreached", "add-type-error", "mul-crashes", "sub-hangs",
                          "stale-absent", "stale-twice"}  # fmt: skip
    line = _anchor_line(toy_run.root, "toy/text.py", '"value"')
    assert by_id["describe-label"].startswith(f"::warning file=toy/text.py,line={line},endLine={line},")
    line = _anchor_line(toy_run.root, "toy/arith.py", "return a % 7")
    assert by_id["orphan-unreached"].startswith(f"::warning file=toy/arith.py,line={line},endLine={line},")
    assert by_id["stale-twice"].startswith("::error file=toy/text.py,title=mutation stale%3A stale-twice::")
    message = by_id["describe-label"].split("::", 2)[2]
    assert "\n" not in message and "%0Adflash: survived%0A" in message and 'replaced with: "valu"' in message

    issues = {i["description"].split(": ")[1]: i for i in to_codequality(data, "engine/")}
    line = _anchor_line(toy_run.root, "toy/text.py", '"value"')
    assert issues["describe-label"]["location"] == {"path": "engine/toy/text.py", "lines": {"begin": line}}
    assert issues["describe-label"]["check_name"] == "dflash-Survived"
    assert issues["stale-twice"]["location"] == {"path": "engine/toy/text.py", "lines": {"begin": 1}}
    assert len({i["fingerprint"] for i in to_codequality(data)}) == len(lines)
    assert all(i["severity"] in ("info", "minor", "major", "critical", "blocker") for i in to_codequality(data))


def test_show_writes_the_same_page_and_annotations_from_the_saved_report(toy_run, cli, tmp_path: Path) -> None:
    again = tmp_path / "again.html"
    root = toy_run.shown_project(tmp_path / "toy")
    shown = cli("show", "--project", str(root), "--no-survivors", "--html", str(again), "--annotations", "github")
    assert shown.exit_code == 1, shown.output
    stryker = json.loads((toy_run.reports / "stryker.json").read_text())
    # The saved report keeps each mutant's replacement and span: read back, it places every mutant again.
    inlined = _inlined_report(again.read_text())
    assert (inlined["files"], inlined["testFiles"]) == (stryker["files"], stryker["testFiles"])
    printed = [line for line in shown.output.splitlines() if line.startswith("::")]
    assert printed == github_annotations(stryker)
    bad = cli("show", "--project", str(root), "--annotations", "gitlab")
    assert bad.exit_code == 2 and "must be one of: github" in bad.output


def _committed_page(name: str) -> str:
    from verify.report.json_report import read_report

    report, details, info = read_report(ROOT / "docs" / "runs" / name)
    return render_html(report, details, info, root=ROOT)


def test_the_legend_has_a_chip_for_every_kind_of_cell() -> None:
    from verify.report.matrix import LEGEND, SYMBOL_STYLE

    page = _committed_page("verify-first-kill.json")
    legend = page[page.index('<ul class="legend">') :].split("</ul>")[0]
    chips = re.findall(r'<span class="chip c-([A-Za-z]+)">(.)</span>', legend)
    symbols = [item.split()[0] for item in LEGEND.split("  ") if item.split()[0] in SYMBOL_STYLE]
    assert [symbol for _, symbol in chips] == symbols and {"M", "P", "D"} <= set(symbols)
    assert '<span class="chip"> </span>blank: not reached' in legend  # the one item without a symbol


def test_the_jump_links_come_under_the_banner_before_the_survivors() -> None:
    page = _committed_page("html-report.json")  # a failing run with two survivors and their explanations
    banner, nav, survivors = (page.index(m) for m in ('class="banner', 'id="dflash-nav"', 'id="dflash-survivors"'))
    assert banner < nav < survivors
    links = re.findall(r'href="#([a-z-]+)"', page[nav : page.index("</nav>", nav)])
    assert links == ["dflash-survivors", "dflash-viewer-note", "dflash-matrix", "dflash-mutations"]
    assert all(f'id="{target}"' in page for target in links)


def test_the_viewers_words_and_score_are_named_in_dflashs() -> None:
    from verify.report.stryker import STRYKER_STATUS

    page = _committed_page("html-report.json")
    note = page[page.index('id="dflash-viewer-note"') : page.index("<mutation-test-report-app")]
    for theirs in {*STRYKER_STATUS.values(), "NoCoverage"}:
        assert f"{theirs} = " in note, theirs
    assert "Survived = survived" in note and "RuntimeError = crashed" in note and "CompileError = stale" in note
    assert "the verdict rests on dflash&#x27;s score, 0.964" in note  # the banner's: FAIL 53/55, score 0.964
    assert "FAIL 53/55 killed, score 0.964" in page
