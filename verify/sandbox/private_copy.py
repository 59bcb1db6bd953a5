"""Private copies of a project: which files a copy holds, and copying them. The one home of that code for
both the verify run (the gates' files) and the sweep (every file git sees).

Only ever reads the user's tree; writes only under the destination it is given.
"""

from __future__ import annotations

import importlib.util
import py_compile
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

__all__ = ["adopt_bytecode", "compile_sources", "copy_files", "visible_files"]

_IGNORED_NAMES = {".git", ".venv", "mutants", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"}


def visible_files(root: Path) -> list[str]:
    """What git sees (tracked, and untracked but not ignored); without git, everything but caches."""
    if (root / ".git").exists():
        done = subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"],
            cwd=root,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode == 0:
            return [name for name in done.stdout.split("\0") if name]
    return [
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and not _IGNORED_NAMES & set(p.relative_to(root).parts)
    ]


def copy_files(root: Path, names: Iterable[str], dest: Path) -> None:
    """Copy each relative path under `root` to the same path under `dest` (missing ones are skipped)."""
    for name in names:
        source = root / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


def adopt_bytecode(copy: Path, pristine: Path) -> int:
    """Copy the bytecode a child compiled in its copy (`__pycache__/NAME.*.pyc`, pytest's rewritten gates
    included) into the pristine tree, so later children load it instead of compiling the same files again.

    Only caches of sources the pristine tree holds are taken, never replacing one it has; each lands whole
    (written aside, then renamed), since other children may be copying the pristine tree at that moment.
    Python and pytest check every cache against its source before using it. Returns how many it took.
    """
    taken = 0
    for pyc in copy.rglob("__pycache__/*.pyc"):
        rel = pyc.relative_to(copy)
        source = pristine / rel.parent.parent / f"{pyc.name.partition('.')[0]}.py"
        dest = pristine / rel
        if not source.is_file() or dest.exists():
            continue
        dest.parent.mkdir(exist_ok=True)
        aside = dest.with_name(f".{dest.name}.tmp")
        shutil.copyfile(pyc, aside)
        aside.replace(dest)
        taken += 1
    return taken


def compile_sources(tree: Path, names: Iterable[str]) -> int:
    """Compile each named `.py` file of `tree` (the pristine copy) into the bytecode cache beside it, where none
    is, so that every child loads it instead of compiling it again: a module a gate imports only when it runs is
    imported by no collection, so no earlier child left its bytecode. The cache is Python's own (checked against
    its source's size and time on each load), written as the import system would; a file that does not compile
    is left for its import to report. Returns how many it wrote."""
    if sys.pycache_prefix is not None:
        return 0  # the caches live elsewhere: a copy would not carry them
    written = 0
    for name in names:
        source = tree / name
        if not name.endswith(".py") or not source.is_file():
            continue
        cache = Path(importlib.util.cache_from_source(str(source)))
        if cache.exists():
            continue
        try:
            py_compile.compile(str(source), cfile=str(cache), doraise=True)
        except (py_compile.PyCompileError, OSError, ValueError):
            continue
        written += 1
    return written
