"""The HTML report of real runs of this repository, in a real headless Chromium: one page with one look (dflash's
header on the viewer's left edge, in its type), each survivor's explanation in dflash's own sections, the
matrix scrolling inside its box at 1,280 px with a legend in the viewer's colours, and the note a --first-kill
run needs. Renders the README's picture (docs/img/html-report.png).

The pages are rendered from reports of real `dflash verify --first-kill --no-cache --json` runs committed
under docs/runs/ (each names its commit), so nothing here runs a mutant: rendering is the part under test.
The picture is rewritten only when DFLASH_WRITE_PICTURES=1; otherwise the committed one must have the size the
page renders at, and the page must hold what the README's caption says it shows in that frame.
"""

from __future__ import annotations

import os
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from verify.report.html import FIRST_KILL_NOTE, write_html
from verify.report.json_report import read_report

try:
    from playwright.sync_api import Browser, Page, sync_playwright
except ImportError as missing:  # a failure with the way out, never a skip
    pytest.fail(f"{missing}: `make install` installs playwright with the dev extra", pytrace=False)

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "docs" / "runs"
SURVIVORS_RUN = RUNS / "html-report.json"  # two gate files deleted from a clone: the store bugs' gates gone
FULL_RUN = RUNS / "verify-first-kill.json"  # the repository as it is: every gate file
PICTURE = ROOT / "docs" / "img" / "html-report.png"
FRAME = {"width": 1280, "height": 900}  # the README picture's frame, and the width the matrix must fit


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = shutil.which("chromium")
    if executable is None:
        if os.geteuid() != 0:
            pytest.skip("no `chromium` on PATH and not root: `sudo make browser` installs it (CI runs as root)")
        pytest.fail("no `chromium` on PATH: run `make browser` (apt-get install chromium)")
    with sync_playwright() as playwright:
        args = ["--no-sandbox", "--disable-gpu", "--disable-partial-raster", "--num-raster-threads=1"]
        launched = playwright.chromium.launch(executable_path=executable, args=[*args, "--force-color-profile=srgb"])
        yield launched
        launched.close()


def _open(browser: Browser, report: Path, out: Path) -> Page:
    loaded, details, info = read_report(report)
    page_file = out / f"{report.stem}.html"
    write_html(loaded, page_file, details, info, root=ROOT)
    # Reduced motion: the viewer animates its column's width on a resize (Tailwind's motion-safe), measured mid-way.
    context = browser.new_context(offline=True, viewport=FRAME, reduced_motion="reduce")
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(page_file.as_uri())
    page.locator("mte-metrics-table").wait_for()
    assert errors == [], errors
    return page


@pytest.fixture(scope="module")
def survivors_page(browser: Browser, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Page]:
    page = _open(browser, SURVIVORS_RUN, tmp_path_factory.mktemp("survivors"))
    yield page
    page.context.close()


@pytest.fixture(scope="module")
def full_page(browser: Browser, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Page]:
    page = _open(browser, FULL_RUN, tmp_path_factory.mktemp("full"))
    yield page
    page.context.close()


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk comes first
    return width, height


def test_the_readme_picture_shows_the_verdict_and_a_survivors_explanation(survivors_page: Page) -> None:
    page = survivors_page
    page.evaluate("window.scrollTo(0, 0)")
    report, details, _ = read_report(SURVIVORS_RUN)
    survivor = next(r.name for r in report.mutations if str(r.status) == "survived")
    # What the caption promises, inside the frame: the banner and the first survivor's first divergence.
    banner = page.locator("header.dflash .banner")
    assert banner.inner_text().startswith("FAIL")
    why = page.locator(f'#dflash-survivors .survivor:has(a[href="#m-{survivor}"]) p:has-text("Why it survived")')
    assert details[survivor].divergence in why.inner_text()
    box = why.bounding_box()
    assert box is not None and box["y"] + box["height"] <= FRAME["height"]
    page.mouse.move(0, 0)
    picture = page.screenshot(animations="disabled")
    if os.environ.get("DFLASH_WRITE_PICTURES") == "1":
        PICTURE.write_bytes(picture)
    assert PICTURE.is_file(), "DFLASH_WRITE_PICTURES=1 pytest tests/report/test_html_front.py writes it"
    assert _png_size(PICTURE.read_bytes()) == _png_size(picture) == (FRAME["width"], FRAME["height"])


def test_each_survivors_explanation_is_in_dflashs_own_sections(survivors_page: Page) -> None:
    report, details, _ = read_report(SURVIVORS_RUN)
    survivors = [r.name for r in report.mutations if str(r.status) == "survived"]
    assert survivors
    for name in survivors:
        top = survivors_page.locator(f'#dflash-survivors .survivor:has(a[href="#m-{name}"])')
        assert details[name].divergence in top.inner_text()
        own = survivors_page.locator(f'[id="m-{name}"] ~ pre.explanation').first
        # A mutation's section is laid out when near the screen (content-visibility): scrolled to, then a frame.
        own.scroll_into_view_if_needed()
        survivors_page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
        assert details[name].explanation.splitlines()[0] in own.inner_text()


@pytest.mark.parametrize("width", [900, 1280, 1920])
def test_one_header_style_on_one_column(survivors_page: Page, width: int) -> None:
    survivors_page.set_viewport_size({"width": width, "height": FRAME["height"]})
    measured = survivors_page.evaluate(
        """() => { const found = []; const walk = root => { for (const el of root.querySelectorAll('*')) {
             if (el.shadowRoot) walk(el.shadowRoot);
             if (el.tagName === 'H1') found.push(el); } };
           walk(document);
           return found.map(h => { const box = h.getBoundingClientRect(), style = getComputedStyle(h);
             return [box.left, box.right, style.fontSize, style.fontWeight, style.fontFamily.split(',')[0]]; }); }"""
    )
    survivors_page.set_viewport_size(FRAME)
    assert len(measured) == 2, measured  # dflash's page title, the viewer's "All files"
    assert measured[0] == measured[1], measured  # the same left and right edges, size, weight and font


def _matrix_sizes(page: Page) -> dict[str, float]:
    return page.evaluate(
        """() => { const box = document.getElementById('dflash-matrix-table');
           const last = box.querySelectorAll('th.group'); const right = last[last.length - 1].getBoundingClientRect();
           return {page: document.documentElement.scrollWidth, box: box.clientWidth,
                   table: box.querySelector('table').scrollWidth, lastRight: right.right}; }"""
    )


def test_every_matrix_column_is_reachable_at_1280_px(full_page: Page) -> None:
    """At 1,280 px all 15 gate files fit beside the names (a label breaks after an underscore); narrower, the
    matrix scrolls in its own box and its last column is reached by scrolling that box, never cut."""
    sizes = _matrix_sizes(full_page)
    assert sizes["page"] <= FRAME["width"], sizes  # nothing is cut at the window's edge
    assert sizes["table"] <= sizes["box"] and sizes["lastRight"] <= FRAME["width"], sizes  # no scrolling needed
    full_page.set_viewport_size({"width": 900, "height": FRAME["height"]})
    try:
        sizes = _matrix_sizes(full_page)
        assert sizes["table"] > sizes["box"], sizes  # narrower: the box scrolls
        last = full_page.locator("#dflash-matrix-table th.group").last
        full_page.evaluate("document.getElementById('dflash-matrix-table').scrollLeft = 1e6")
        last.scroll_into_view_if_needed()
        box = last.bounding_box()
        assert box is not None and box["x"] + box["width"] <= 900
    finally:
        full_page.set_viewport_size(FRAME)


def test_the_jump_links_are_in_the_first_screen_of_a_failing_report(survivors_page: Page) -> None:
    survivors_page.evaluate("window.scrollTo(0, 0)")
    nav = survivors_page.locator("#dflash-nav").bounding_box()
    survivors = survivors_page.locator("#dflash-survivors").bounding_box()
    assert nav is not None and survivors is not None
    assert nav["y"] + nav["height"] <= 300 < survivors["y"] + survivors["height"], (nav, survivors)


def test_the_matrix_speaks_the_viewers_colours(full_page: Page) -> None:
    # The viewer's own tokens (Tailwind's, on its host element) against dflash's chips and status words.
    pairs = full_page.evaluate(
        """() => { const app = document.querySelector('mutation-test-report-app');
           const resolve = (name, property) => { const probe = document.createElement('div');
             probe.style[property] = getComputedStyle(app).getPropertyValue(name); document.body.append(probe);
             const value = getComputedStyle(probe)[property]; probe.remove(); return value; };
           const style = (selector, property) => getComputedStyle(document.querySelector(selector))[property];
           return [[style('.legend .c-A', 'backgroundColor'), resolve('--color-green-600', 'backgroundColor')],
                   [style('.legend .c-R', 'backgroundColor'), resolve('--color-green-600', 'backgroundColor')],
                   [style('.legend .c-T', 'backgroundColor'), resolve('--color-amber-400', 'backgroundColor')],
                   [style('td.cell.c-A', 'backgroundColor'), resolve('--color-green-600', 'backgroundColor')],
                   [style('td.s-killed', 'color'), resolve('--color-green-800', 'color')]]; }"""
    )
    for ours, viewers in pairs:
        assert ours == viewers and ours not in ("", "rgba(0, 0, 0, 0)")


def test_a_first_kill_run_says_what_its_blanks_and_the_tests_tab_mean(full_page: Page) -> None:
    note = full_page.locator("#dflash-first-kill")
    assert note.is_visible() and note.inner_text() == FIRST_KILL_NOTE
    assert "Not Covering" in FIRST_KILL_NOTE and "--first-kill" in FIRST_KILL_NOTE
