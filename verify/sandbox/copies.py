"""The private copies of the project that an executor's children work in, each serving one child at a time.

A copy is made from the executor's pristine tree and inventoried (`verify.sandbox.inventory`) before any
child sees it. When its child is over, and nothing the child started is left running, the copy is inventoried
again: a copy left exactly as it was made (no entry added, removed or changed; a write, a rename, a chmod or a
utime each move a ctime, which no process can set) serves the next child, and any other is deleted. So every
child starts from a tree identical to the pristine one, as a fresh copy would be, without paying for a copy
each (about 30 ms a child idle, twice that with both cores busy, against under 1 ms for the inventory).

A change to the pristine tree itself (bytecode adopted from an unmutated run) retires every copy made before
it, idle or lent. Knows nothing of jobs, mutations or verdicts.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from verify.sandbox.inventory import Snapshot, diff, snapshot

__all__ = ["CopyPool"]


class CopyPool:
    """Copies of `pristine` under `folder`: `take` one for a child, `give_back` it when the child is over."""

    def __init__(self, pristine: Path, folder: Path) -> None:
        self.pristine, self.folder = pristine, folder
        self._idle: list[tuple[Path, Snapshot]] = []
        self._lent: dict[Path, tuple[Snapshot, int]] = {}  # copy -> (as made, the pristine tree's version then)
        self._version = 0  # of the pristine tree, moved by `pristine_changed`
        self.made = 0  # copies made so far, each named by its number (a figure for tests and benchmarks)

    def take(self) -> Path:
        """An idle copy identical to the pristine tree, or a new one."""
        if self._idle:
            copy, taken = self._idle.pop()
        else:
            self.made += 1
            copy = self.folder / f"{self.made}"
            shutil.copytree(self.pristine, copy, symlinks=True)
            taken = snapshot(copy)
        self._lent[copy] = (taken, self._version)
        return copy

    def give_back(self, copy: Path, reusable: bool = True) -> bool:
        """Take `copy` back once its child and everything it started are over. It serves again only when
        `reusable` (the caller found nothing of the child's still running), nothing in it changed and the
        pristine tree did not change since it was made; else it is deleted. Returns whether it serves again."""
        taken, version = self._lent.pop(copy, (None, -1))
        if taken is not None and reusable and version == self._version and not diff(taken, snapshot(copy)):
            self._idle.append((copy, taken))
            return True
        shutil.rmtree(copy, ignore_errors=True)
        return False

    def pristine_changed(self) -> None:
        """The pristine tree changed: every copy made before now no longer matches it (idle ones are deleted
        now, lent ones when given back)."""
        self._version += 1
        for copy, _ in self._idle:
            shutil.rmtree(copy, ignore_errors=True)
        self._idle.clear()
