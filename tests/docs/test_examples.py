"""Every runnable example of the docs site passes; a norun marker says why and sits on a runnable block."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.examples import DOCS, RUNNABLE, Example, fences, pages, run, runnable, scratch_copy

EXAMPLES = runnable()


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The folder each page's reader is in: a scratch copy of the repository per page, moved by `cd`."""
    return {}


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.id for e in EXAMPLES])
def test_example_runs(example: Example, sessions: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> None:
    if example.page not in sessions:
        base = tmp_path_factory.mktemp("docs-" + example.page.replace("/", "-").removesuffix(".md"))
        sessions[example.page] = scratch_copy(base / "dflash-verify")
    state = tmp_path_factory.mktemp("state") / "cwd"
    ran = run(example, sessions[example.page], state)
    sessions[example.page] = ran.cwd
    assert ran.returncode == 0, f"docs/{example.id} ({example.lang}) exited {ran.returncode}:\n{ran.output[-4000:]}"


def test_the_site_has_runnable_examples_of_both_kinds() -> None:
    assert {e.lang for e in EXAMPLES} == set(RUNNABLE)
    assert len(EXAMPLES) >= 15


def test_every_norun_marker_gives_a_reason_and_sits_on_a_runnable_block() -> None:
    for page in pages():
        text = page.read_text("utf-8").splitlines()
        marked = {e.line - 1 for e in fences(page) if e.norun is not None}
        for number, line in enumerate(text, start=1):
            if line.strip().startswith("<!-- norun"):
                assert number in marked, f"docs/{page.relative_to(DOCS)}:{number}: a norun marker not on a fence"
        for example in fences(page):
            if example.norun is not None:
                assert example.norun.strip(), f"docs/{example.id}: norun without a reason"
                assert example.lang in RUNNABLE, f"docs/{example.id}: norun on a ```{example.lang} block"


@pytest.mark.parametrize(
    ("lang", "code", "fails"),
    [
        ("bash", "true\nfalse\necho never", True),
        ("bash", "false | true", True),  # pipefail
        ("python", "raise SystemExit(3)", True),
        ("python", "assert 1 + 1 == 2", False),
        ("bash", "mkdir -p sub && cd sub", False),
    ],
    ids=["bash-stops-at-a-failing-line", "bash-pipefail", "python-exit", "python-ok", "bash-cd"],
)
def test_a_failing_example_fails(tmp_path: Path, lang: str, code: str, fails: bool) -> None:
    ran = run(Example("x.md", 1, lang, code, None), tmp_path, tmp_path / "state")
    assert (ran.returncode != 0) is fails, ran.output
    assert "never" not in ran.output
    if code.endswith("cd sub"):
        assert ran.cwd == tmp_path / "sub"  # the next example of the page starts there
