"""The machine's /dev/shm, for children that have no private one (`verify.sandbox.namespaces` without its
`mount` layer): what a job left there, removed when it ends.

/dev/shm is writable to every child by design (POSIX shared memory, multiprocessing's semaphores, torch's
tensors between processes), and a file left there outlives the child, outside its memory ceiling. So the entries
are inventoried (name and inode) when a job starts; when it ends, every entry that is new since, owned by this
user, and held open or mapped by no process is taken for the job's and removed. Other programs use /dev/shm
too: an entry that was there before, belongs to another user or is in use is never touched; one that another
program (or a sibling job running at once) made and closed meanwhile is taken for this job's, the price of
having no private /dev/shm. Knows nothing of jobs or verdicts.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

__all__ = ["Leftovers"]

SHM = Path("/dev/shm")


def _entries() -> dict[str, tuple[int, int]]:
    """name -> (inode, owner) of every entry of /dev/shm now."""
    found: dict[str, tuple[int, int]] = {}
    with contextlib.suppress(OSError), os.scandir(SHM) as listing:
        for entry in listing:
            with contextlib.suppress(OSError):
                stat = entry.stat(follow_symlinks=False)
                found[entry.name] = (stat.st_ino, stat.st_uid)
    return found


def _in_use() -> set[int]:
    """The inodes under /dev/shm some process this user may read holds open or mapped."""
    inodes: set[int] = set()
    device = os.stat(SHM).st_dev
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            for fd in (proc / "fd").iterdir():
                with contextlib.suppress(OSError):
                    stat = fd.stat()
                    if stat.st_dev == device:
                        inodes.add(stat.st_ino)
        with contextlib.suppress(OSError):
            for line in (proc / "maps").read_text().splitlines():
                fields = line.split(maxsplit=5)
                if len(fields) == 6 and fields[5].startswith(f"{SHM}/"):
                    inodes.add(int(fields[4]))
    return inodes


class Leftovers:
    """`start(key)` when a job starts, `end(key)` when it is over: what it left, removed. `enabled` False (its
    children have a private /dev/shm): both do nothing."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._before: dict[str, set[tuple[str, int]]] = {}

    def start(self, key: str) -> None:
        if self.enabled:
            self._before[key] = {(name, inode) for name, (inode, _) in _entries().items()}

    def end(self, key: str) -> str:
        """What the job `key` left, removed from /dev/shm: "left in the machine's /dev/shm, removed: name (N MiB),
        ...", or ""."""
        before = self._before.pop(key, None)
        if before is None:
            return ""
        uid = os.getuid()
        entries = _entries().items()
        new = {name: inode for name, (inode, owner) in entries if owner == uid and (name, inode) not in before}
        if not new:
            return ""
        busy = _in_use()
        removed = []
        for name, inode in sorted(new.items()):
            if inode in busy:
                continue
            path = SHM / name
            with contextlib.suppress(OSError):
                if path.is_dir() and not path.is_symlink():
                    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())
                    shutil.rmtree(path)
                else:
                    size = path.lstat().st_size
                    path.unlink()
                removed.append(f"{name} ({size >> 20} MiB)")
        return f"left in the machine's /dev/shm, removed: {', '.join(removed)}" if removed else ""
