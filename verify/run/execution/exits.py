"""Noticing at once that a forked child exited: a pidfd per child (Linux 5.3 and later), readable from its exit.

The executor's loop waits on them between its rounds of reaping and watching, so a freed slot takes its next
job as soon as its child is gone. Polling alone left a slot idle for half a poll at every job's end (about
5 ms a job at a 10 ms poll). Where there is no pidfd the loop sleeps out the poll instead. Knows nothing of
jobs.
"""

from __future__ import annotations

import os
import select
import time
from collections.abc import Sequence

__all__ = ["close", "pidfd", "wait"]


def pidfd(pid: int) -> int:
    """A file descriptor that turns readable when `pid` exits, or -1 where the system offers none."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return -1


def close(fd: int) -> None:
    if fd >= 0:
        os.close(fd)


def wait(fds: Sequence[int], timeout_s: float) -> None:
    """Until one of the children behind `fds` exits, or `timeout_s` passes (all of it, if any has no pidfd)."""
    if fds and all(fd >= 0 for fd in fds):
        select.select(fds, [], [], timeout_s)
    else:
        time.sleep(timeout_s)
