"""Ending what a process left running: every process it started, with everything under each, whatever session
or process group they moved to.

The caller makes itself their subreaper first (`become_subreaper`), so a process whose parent dies comes back to
it instead of to init. `end_children` then stops each child before listing its children (a stopped process
cannot fork, so none is missed), from the top down, kills them all, reaps its own, and goes round again for the
orphans that came back meanwhile, until none is left or the time is up. The run's parent does this when the run
ends (`verify.sandbox.guard`), each forked child when its job ends and the executor's parent after every job
however it ended (`verify.run.execution.fork`: `end_tree` for a child it ends, `end_children` for what came back to
it), so a daemon a mutant started dies with its job, before another job's window opens. `tree` and
`running_tasks` and `resident_bytes` let the parent watch a job's processes (how many; how many are on a CPU
now; the memory they hold). Knows nothing of
jobs, mutants or verdicts.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from collections.abc import Collection
from pathlib import Path

__all__ = [
    "become_subreaper", "children", "end_children", "end_tree", "has_strays", "is_subreaper", "resident_bytes",
    "running_tasks", "tree",
]  # fmt: skip

_PR_SET_CHILD_SUBREAPER, _PR_GET_CHILD_SUBREAPER = 36, 37


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def is_subreaper() -> bool:
    flag = ctypes.c_int(0)
    _libc().prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0)
    return bool(flag.value)


def become_subreaper(on: bool = True) -> None:
    _libc().prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)


def children() -> set[int]:
    """This process's children, live or not yet reaped (orphans it took in as their subreaper included)."""
    me, found = os.getpid(), set()
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            # pid (comm) state ppid ...: comm may hold spaces and parentheses, so split after its last ")"
            if int(stat_file.read_text().rpartition(")")[2].split()[1]) == me:
                found.add(int(stat_file.parent.name))
    return found


def has_strays(keep: Collection[int]) -> bool:
    """Whether this process has a child not in `keep`, from its threads' children lists (~0.1 ms, where
    `children` scans every process: tens of ms on a busy machine). The lists are exact only for stopped
    children, so a stray this misses is ended by the next `end_children` (at the latest, the run's last)."""
    return bool(set(_children_of(os.getpid())) - set(keep))


def _children_of(pid: int) -> list[int]:
    """`pid`'s children (any of its threads may have forked), from /proc; [] once it is gone."""
    found: list[int] = []
    for listing in _task_files(pid, "children"):
        with contextlib.suppress(OSError, ValueError):
            found += [int(child) for child in listing.read_text().split()]
    return found


def _task_files(pid: int, name: str) -> list[Path]:
    """`name` in each of `pid`'s threads' /proc folders; [] once it is gone (it may go while they are listed:
    the glob's scandir then raises, which a caller scanning a dying tree must not see)."""
    try:
        return list(Path(f"/proc/{pid}/task").glob(f"*/{name}"))
    except OSError:
        return []


def tree(pid: int) -> list[int]:
    """`pid` and every process beneath it, parents before their children; [] once `pid` is gone."""
    if not Path(f"/proc/{pid}").exists():
        return []
    found, todo = [pid], [pid]
    while todo:
        for child in _children_of(todo.pop()):
            if child not in found:
                found.append(child)
                todo.append(child)
    return found


def running_tasks(pids: Collection[int]) -> int:
    """Threads of these processes on a CPU or waiting for one now (state R): what they add to the load."""
    count = 0
    for pid in pids:
        for stat_file in _task_files(pid, "stat"):
            with contextlib.suppress(OSError, IndexError):
                count += stat_file.read_text().rpartition(")")[2].split()[0] == "R"
    return count


def resident_bytes(pids: Collection[int]) -> int:
    """The memory these processes hold: one process's resident set (/proc/pid/statm, ~0.1 ms); several
    processes' proportional sets summed (smaps_rollup's Pss: a page n of them share counts 1/n to each, so a
    fork's pages shared with its parent are not counted twice; ~15 ms a torch process, so ask seldom)."""
    total = 0
    if len(pids) == 1:
        with contextlib.suppress(OSError, ValueError, IndexError):
            total = int(Path(f"/proc/{next(iter(pids))}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        return total
    for pid in pids:
        with contextlib.suppress(OSError, ValueError, IndexError):
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
                    break
    return total


def _stop_all(roots: Collection[int]) -> list[int]:
    """SIGSTOP each root, then each process beneath it, top down (a stopped process cannot fork, so none is
    missed); the pids stopped, in that order."""
    doomed: list[int] = []
    todo = sorted(roots)
    while todo:
        pid = todo.pop()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGSTOP)
        doomed.append(pid)
        todo += [child for child in _children_of(pid) if child not in doomed]
    return doomed


def end_tree(pid: int) -> None:
    """Kill `pid` (a child of this process, not yet reaped) and every process beneath it, whatever session
    they moved to. `pid` itself is left for its parent to reap; the others come back to this process (its
    subreaper) or to init, and `end_children` reaps them."""
    for doomed in _stop_all([pid]):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(doomed, signal.SIGKILL)


def end_children(keep: Collection[int] = (), within_s: float = 10.0) -> tuple[int, ...]:
    """Stop, then kill, every child of this process not in `keep` with everything under it; () once none is
    left, else the pids still there after `within_s` seconds."""
    deadline = time.monotonic() + within_s
    while stray := children() - set(keep):
        if time.monotonic() > deadline:
            return tuple(sorted(stray))
        for pid in _stop_all(stray):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        for pid in stray:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
    return ()
