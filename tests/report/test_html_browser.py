"""The HTML report in a real headless Chromium with the network off: the viewer renders, its counts are the
report's, a survivor's diff shows on its line, and dflash's matrix below it works. Writes the picture of the
viewer's file view the HTML report's page shows (docs/img/html-report-viewer.png); the README's picture of a
real run is test_html_front.py's.

Drives Debian's `chromium` through Playwright's protocol client (its own browser download cannot work
offline); `make browser` installs it. A missing browser fails this test as root (CI); not root, where
`make browser` cannot install it, the test skips and says so.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path

import pytest

from verify.report.stryker import stryker_status

try:
    from playwright.sync_api import Browser, Page, sync_playwright
except ImportError as missing:  # a failure with the way out, never a skip
    pytest.fail(f"{missing}: `make install` installs playwright with the dev extra", pytrace=False)

ROOT = Path(__file__).resolve().parents[2]
PICTURE = ROOT / "docs" / "img" / "html-report-viewer.png"
# The viewer's metrics table, by its column titles, against Stryker statuses (the schema's metrics).
COLUMNS = {
    "Killed": ("Killed",),
    "Survived": ("Survived",),
    "Timeout": ("Timeout",),
    "No coverage": ("NoCoverage",),
    "Ignored": ("Ignored",),
    "Runtime errors": ("RuntimeError",),
    "Compile errors": ("CompileError",),
    "Detected": ("Killed", "Timeout"),
    "Undetected": ("Survived", "NoCoverage"),
}


@pytest.fixture(scope="module")
def browser():
    executable = shutil.which("chromium")
    if executable is None and os.geteuid() != 0:  # a laptop: `make browser` installs nothing without root
        pytest.skip("no `chromium` on PATH and not root: `sudo make browser` installs it (CI runs as root)")
    if executable is None:
        pytest.fail(
            "no `chromium` on PATH: the HTML report's browser test needs a real Chromium. "
            "Run `make browser` (as root: apt-get install chromium)."
        )
    with sync_playwright() as playwright:
        # --no-sandbox: Chromium refuses its sandbox as root, which CI and this machine run as. The others make
        # the picture the same from run to run (one raster thread, no GPU, a fixed colour profile).
        args = ["--no-sandbox", "--disable-gpu", "--disable-partial-raster", "--num-raster-threads=1"]
        launched = playwright.chromium.launch(executable_path=executable, args=[*args, "--force-color-profile=srgb"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser, toy_run):
    context = browser.new_context(offline=True, viewport={"width": 1200, "height": 960})
    opened = context.new_page()
    requests: list[str] = []
    errors: list[str] = []
    opened.on("request", lambda request: requests.append(request.url))
    opened.on("pageerror", lambda error: errors.append(str(error)))
    opened.goto((toy_run.reports / "report.html").as_uri())
    opened.locator("mte-metrics-table").wait_for()
    yield opened
    context.close()
    assert errors == [], errors
    assert [url for url in requests if not url.startswith(("file:", "data:"))] == []  # nothing from elsewhere


# An element's text through its shadow roots (innerText stops at a shadow host).
_DEEP_TEXT = """element => { const parts = []; const walk = node => {
  if (node.nodeType === Node.TEXT_NODE) { parts.push(node.textContent); return; }
  if (node.shadowRoot) walk(node.shadowRoot);
  for (const child of node.childNodes) walk(child); };
  walk(element); return parts.join(" ").replace(/\\s+/g, " "); }"""


def _metrics(page: Page) -> dict[str, int]:
    """The "All files" row of the viewer's metrics table, by column title."""
    table = page.locator("mte-metrics-table")
    titles = [title.inner_text().strip() for title in table.locator("thead th").all()]
    cells = [cell.inner_text().strip() for cell in table.locator("tbody tr").first.locator("td, th").all()]
    counted = [title for title in titles if title in COLUMNS or title == "Total"]
    assert cells[0] == "All files" and len(counted) == len(COLUMNS) + 1, (titles, cells)
    return dict(zip(counted, map(int, cells[-len(counted) :]), strict=True))


def test_the_viewer_renders_offline_with_the_reports_counts(page: Page, toy_run) -> None:
    statuses = Counter(stryker_status(toy_run.report, r) for r in toy_run.report.mutations)
    expected = {title: sum(statuses[s] for s in kinds) for title, kinds in COLUMNS.items()}
    assert _metrics(page) == {**expected, "Total": len(toy_run.report.mutations)}
    stryker = json.loads((toy_run.reports / "stryker.json").read_text())
    assert statuses == Counter(m["status"] for f in stryker["files"].values() for m in f["mutants"])


def test_a_survivors_diff_shows_on_its_line_with_its_gates(page: Page, toy_run) -> None:
    page.locator("mte-metrics-table a", has_text="text.py").click()
    page.locator('[data-mutant-id="describe-label"]').first.click()
    old, new = page.locator("tr.diff-old"), page.locator("tr.diff-new")
    assert 'label = "value"' in old.inner_text() and 'label = "valu"' in new.inner_text()
    source = (toy_run.root / "toy" / "text.py").read_text().splitlines()
    line = next(i for i, text in enumerate(source, 1) if '"value"' in text)
    # Line numbers are CSS counters: the old line's place among the source lines is its number.
    assert old.evaluate("row => [...row.parentNode.querySelectorAll('tr.line')].indexOf(row) + 1") == line
    drawer = page.locator("mte-drawer-mutant")
    drawer.get_by_text("dflash: survived").wait_for()
    text = drawer.evaluate(_DEEP_TEXT)
    assert "describe-label" in text and "Survived" in text and f"({line}:" in text.replace(" ", "")
    assert "test_describe_runs (tests/gates/test_arith.py:" in text  # the gate that covered it, at its def
    # The viewer at the top of the picture, at a whole pixel (a fractional scroll shifts anti-aliased edges).
    page.locator("mutation-test-report-app").evaluate(
        "app => window.scrollTo(0, Math.round(app.getBoundingClientRect().top + window.scrollY))"
    )
    page.mouse.move(0, 0)  # off the mutant: its hover state would show in the picture
    page.wait_for_timeout(300)  # lets the hover end settle; the picture only, no check depends on it
    PICTURE.parent.mkdir(parents=True, exist_ok=True)
    # Transitions finished (the drawer slides in), so the same page gives the same picture, byte for byte.
    picture = page.screenshot(animations="disabled")
    if not PICTURE.is_file() or PICTURE.read_bytes() != picture:
        PICTURE.write_bytes(picture)
    assert len(picture) < 300_000


def test_the_gates_view_lists_every_gate(page: Page, toy_run) -> None:
    page.locator("mutation-test-report-app a", has_text="Tests").first.click()
    page.locator("mte-metrics-table a", has_text="test_arith.py").click()
    for gate_id in toy_run.report.baseline.gate_ids:  # shadow DOM: Playwright's text locators pierce it
        page.get_by_text(gate_id.partition("::")[2], exact=True).first.wait_for()


def test_the_matrix_below_links_within_the_page(page: Page) -> None:
    url = page.url
    cell = page.locator("#dflash-matrix td.cell a").first
    target = cell.get_attribute("href")
    cell.click()
    assert page.url == url  # the viewer routes on the fragment: dflash's links scroll instead
    assert page.locator(target).is_visible()
