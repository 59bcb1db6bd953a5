"""The harness's scratch folders in the temp dir (an executor's copies and jobs, a sweep's copy): each made with
its owner recorded, and those whose owner is gone removed when the next one is made.

A run ends its folder itself however it stops, but a process killed outright (SIGKILL, the OOM killer, a Ray
node's worker ended with its cluster, a lost machine's reboot) cannot: its copies of the project would pile up
in the temp dir, run after run. So each folder holds an `owner` file naming the process that made it (the boot,
its PID namespace, its pid and start time), and making a folder removes every folder of the same prefix, owned
by this user, whose owner is provably gone: the same boot and PID namespace and no process of that pid and start
time, or an earlier boot. A folder whose owner file is missing or unreadable (one being made right now, or an
older version's), or whose owner lives in another PID namespace (another container sharing the temp dir),
is left alone. Knows nothing of what the folders hold.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["OWNER", "make", "owner_gone"]

OWNER = "owner"


def _start_time(pid: int | str) -> str:
    """The process's start time in clock ticks since boot (field 22 of its stat), "" when it is gone."""
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rpartition(")")[2].split()[19]  # past the command, which may hold spaces and parentheses
    return ""


def _identity() -> tuple[str, str]:
    """(this boot, this process's PID namespace)."""
    boot = ns = ""
    with contextlib.suppress(OSError):
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    with contextlib.suppress(OSError):
        ns = os.readlink("/proc/self/ns/pid")
    return boot, ns


def owner_gone(folder: Path) -> bool:
    """The process that made `folder` is provably gone (see the module docstring)."""
    try:
        boot, ns, pid, started = (folder / OWNER).read_text().split()
    except (OSError, ValueError):
        return False
    here_boot, here_ns = _identity()
    if not boot or not here_boot:
        return False
    if boot != here_boot:
        return True  # made before the machine's last boot: nothing of that boot runs now
    return ns == here_ns and pid.isdigit() and _start_time(pid) != started


def make(prefix: str) -> Path:
    """A fresh folder `prefix`XXXX in the temp dir, private to this user, its owner recorded; first, the folders
    of that prefix whose owners are gone are removed."""
    temp = Path(tempfile.gettempdir())
    uid = os.getuid()
    with contextlib.suppress(OSError):
        for folder in temp.glob(f"{prefix}*"):
            with contextlib.suppress(OSError):
                if folder.is_dir() and not folder.is_symlink() and folder.stat().st_uid == uid and owner_gone(folder):
                    shutil.rmtree(folder, ignore_errors=True)
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    boot, ns = _identity()
    if boot and ns:
        record = folder / f".{OWNER}"
        record.write_text(f"{boot} {ns} {os.getpid()} {_start_time('self')}\n")
        record.replace(folder / OWNER)  # whole or not at all: a half-written owner is never read as gone
    return folder
