"""The README is the front door, not the manual: short, the two commands first, and every link it gives into
the docs lands on a page that exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text("utf-8")
MAX_LINES = 150


def test_the_readme_is_at_most_150_lines() -> None:
    assert len(README.splitlines()) <= MAX_LINES


def test_its_first_lines_are_the_two_commands() -> None:
    first = [line.split("#")[0].strip() for line in README.splitlines()[:2]]
    assert first == ["make verify", "make test"]


def test_its_links_into_the_docs_land_on_pages() -> None:
    targets = re.findall(r"\]\(((?:docs/|LICENSE)[^)#\s]*)", README)
    pages = [t for t in targets if not t.startswith("docs/img/")]  # the report's picture is made by its browser test
    assert len(pages) >= 8, pages
    missing = [t for t in pages if not (ROOT / t).is_file()]
    assert not missing, missing
