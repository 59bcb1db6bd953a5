"""The README is the front door, not the manual: short, its title and what it is, then the two commands, a
picture of a real run whose caption names that run, and every link it gives into the docs lands on a page
that exists."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text("utf-8")
MAX_LINES = 150


def test_the_readme_is_at_most_150_lines() -> None:
    assert len(README.splitlines()) <= MAX_LINES


def test_it_opens_with_its_title_then_the_two_commands() -> None:
    lines = README.splitlines()
    assert lines[0] == "# dflash-verify"
    fence = lines.index("```bash")  # the first code block is the two commands, within the first screen
    commands = [line.split("#")[0].strip() for line in lines[fence + 1 : fence + 3]]
    assert fence < 15 and commands == ["make verify", "make test"] and lines[fence + 3] == "```"


def test_its_picture_is_of_the_real_run_its_caption_names() -> None:
    run = json.loads((ROOT / "docs" / "runs" / "html-report.json").read_text("utf-8"))
    assert "](docs/img/html-report.png)" in README
    caption = README[README.index("](docs/img/html-report.png)") :].split("\n\n")[1]
    commit = run["project"]["commit"].removesuffix("+dirty")[:7]
    assert commit in caption and "docs/runs/html-report.json" in caption
    verdict = run["verdict"]
    assert f"{verdict['result']} {verdict['killed']}/{verdict['judged']}" in caption


def test_its_links_into_the_docs_land_on_pages() -> None:
    targets = re.findall(r"\]\(((?:docs/|LICENSE)[^)#\s]*)", README)
    pages = [t for t in targets if not t.startswith("docs/img/")]  # the report's picture is made by its browser test
    assert len(pages) >= 8, pages
    missing = [t for t in pages if not (ROOT / t).is_file()]
    assert not missing, missing


def test_the_front_door_links_the_adoption_guide_and_the_gate_kit() -> None:
    """The two pages every outside team needed: from the README's first screen and the quickstart's next steps."""
    first_screen = "\n".join(README.splitlines()[:30])
    assert "](docs/how-to/adopt.md)" in first_screen and "](docs/reference/gatekit.md)" in first_screen
    quickstart = (ROOT / "docs" / "quickstart.md").read_text("utf-8")
    next_steps = quickstart[quickstart.index("## Next") :]
    assert "](how-to/adopt.md)" in next_steps and "](reference/gatekit.md)" in next_steps


def test_it_says_for_whom_and_where_it_runs_before_its_commands() -> None:
    opening = " ".join(README[: README.index("```bash")].split())
    assert "speculative-decoding engine" in opening and "Linux only" in opening and "Python 3.10" in opening
    engine = README.split("```bash")[2].split("```")[0]
    assert [line.split("#")[0].split()[:2] for line in engine.strip().splitlines()] == [
        ["pip", "install"], ["dflash", "init"], ["dflash", "verify"]
    ]  # fmt: skip
