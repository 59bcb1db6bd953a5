"""Private copies of a project: which files a copy holds, and copying them. The one home of that code for
both the verify run (the gates' files) and the sweep (every file git sees).

Only ever reads the user's tree; writes only under the destination it is given.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

__all__ = ["adopt_bytecode", "copy_files", "visible_files"]

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
