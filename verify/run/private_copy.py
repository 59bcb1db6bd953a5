"""Private copies of a project: which files a copy holds, and copying them. The one home of that code for
both the verify run (the gates' files) and the sweep (every file git sees).

Only ever reads the user's tree; writes only under the destination it is given.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

__all__ = ["copy_files", "visible_files"]

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
