"""The runnable examples of the docs site: every ```bash and ```python fence under docs/, found with
markdown-it-py (the parser rich already brings), minus those marked `<!-- norun: REASON -->` on the line just
above. ```text, ```toml and ```yaml fences are samples, never run.

A page's examples run in order, as one reader would type them, in a scratch copy of the repository: each
starts in the folder the previous one ended in (a `cd` carries over), with this interpreter's venv first on
PATH. Knows nothing of pytest; tests/docs/test_examples.py collects these.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
RUNNABLE = ("bash", "python")
NORUN = re.compile(r"^<!-- norun: (?P<reason>.*?) -->$")
# What the scratch copy leaves out: environments, caches and build outputs, none of which a reader has.
_NOT_COPIED = shutil.ignore_patterns(
    ".git", ".venv", ".cache", "site", "dist", "build", "mutants", ".dflash-cache", "reports", "__pycache__",
    "*.egg-info", ".pytest_cache", ".ruff_cache", ".mypy_cache",
)  # fmt: skip
BLOCK_TIMEOUT_S = 900  # a hang guard only: a loaded machine may be slow, never a verdict on speed


@dataclass(frozen=True, slots=True)
class Example:
    page: str  # relative to docs/
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    norun: str | None  # the reason, when the line above the fence is a norun marker

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def fences(page: Path) -> list[Example]:
    """Every fenced block of a page with its language and the norun reason above it, if any."""
    text = page.read_text("utf-8")
    lines = text.splitlines()
    found = []
    for token in MarkdownIt().parse(text):
        if token.type != "fence" or token.map is None:
            continue
        start = token.map[0]
        above = NORUN.match(lines[start - 1].strip()) if start > 0 else None
        lang = token.info.strip().split()[0] if token.info.strip() else ""
        reason = above.group("reason") if above else None
        found.append(Example(page.relative_to(DOCS).as_posix(), start + 1, lang, token.content, reason))
    return found


def pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.relative_to(DOCS).parts)


def runnable() -> list[Example]:
    return [e for page in pages() for e in fences(page) if e.lang in RUNNABLE and e.norun is None]


def scratch_copy(destination: Path) -> Path:
    """A copy of the repository as a reader's checkout would be, without environments or caches."""
    shutil.copytree(ROOT, destination, ignore=_NOT_COPIED, symlinks=True)
    return destination


@dataclass(frozen=True, slots=True)
class Ran:
    returncode: int
    output: str
    cwd: Path  # where the example ended (the next one of the page starts there)


def run(example: Example, cwd: Path, state: Path) -> Ran:
    """Run one example in `cwd`; `state` receives the folder it ended in."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    if example.lang == "bash":
        # -e and pipefail: any failing command fails the example, as a reader would notice it.
        script = f"trap 'pwd > {shlex.quote(str(state))}' EXIT\nset -eo pipefail\n{example.code}"
        command = ["bash", "--noprofile", "--norc", "-c", script]
    else:
        state.write_text(str(cwd))
        command = [sys.executable, "-c", example.code]
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S, stdin=subprocess.DEVNULL
    )
    ended = Path(state.read_text().strip()) if state.is_file() and state.read_text().strip() else cwd
    return Ran(done.returncode, done.stdout + done.stderr, ended)
