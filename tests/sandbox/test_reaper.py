"""The reaper's /proc reads survive a process that goes while they list it (the CI failure of stop 57: a
job's child ended between pathlib's is_dir check and its scandir of /proc/<pid>/task)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from verify.sandbox import reaper


def test_a_process_gone_while_its_threads_are_listed_has_no_children_and_no_running_tasks(monkeypatch) -> None:
    real = os.scandir

    def vanished(path=".", *args):
        if str(path).startswith("/proc/") and str(path).endswith("/task"):
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return real(path, *args)

    monkeypatch.setattr(os, "scandir", vanished)
    me = os.getpid()
    assert Path(f"/proc/{me}/task").is_dir()  # it is there: only the listing fails, as in the race
    assert reaper._children_of(me) == []
    assert reaper.running_tasks([me]) == 0
    assert reaper.tree(me) == [me]


def test_a_child_is_listed_and_after_it_is_reaped_nothing_is() -> None:
    child = subprocess.Popen(["sleep", "30"])
    try:
        assert child.pid in reaper._children_of(os.getpid())
    finally:
        child.kill()
        child.wait()
    assert child.pid not in reaper._children_of(os.getpid())
    assert reaper._children_of(child.pid) == []
