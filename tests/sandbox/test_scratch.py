"""Scratch folders (`verify.sandbox.scratch`): a folder whose owner is provably gone is removed when the next one
of its prefix is made; one whose owner lives, or cannot be judged from here, is left alone. And an executor
killed outright leaves a folder the next executor removes."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

from verify.config.settings import load_config
from verify.run.execution.fork import Executor
from verify.sandbox import scratch

PREFIX = "dflash-test-scratch-"


@pytest.fixture
def temp(tmp_path, monkeypatch) -> Path:
    """The temp dir the folders are made in: this test's own."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def _folder(temp: Path, owner: str | None) -> Path:
    folder = Path(tempfile.mkdtemp(prefix=PREFIX, dir=temp))
    (folder / "kept.txt").write_text("x")
    if owner is not None:
        (folder / scratch.OWNER).write_text(owner)
    return folder


def _here() -> tuple[str, str]:
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip(), os.readlink("/proc/self/ns/pid")


def _ended_process() -> tuple[int, str]:
    """The pid and start time of a process that has ended."""
    process = subprocess.Popen(["sleep", "30"])
    started = Path(f"/proc/{process.pid}/stat").read_text().rpartition(")")[2].split()[19]
    process.kill()
    process.wait()
    return process.pid, started


def test_a_folder_records_its_owner_and_is_not_gone_while_it_lives(temp) -> None:
    made = scratch.make(PREFIX)
    assert made.parent == temp and made.name.startswith(PREFIX)
    boot, ns, pid, started = (made / scratch.OWNER).read_text().split()
    assert (boot, ns, int(pid)) == (*_here(), os.getpid()) and started.isdigit()
    assert not scratch.owner_gone(made)
    again = scratch.make(PREFIX)
    assert made.is_dir() and again.is_dir() and made != again


def test_the_folders_of_owners_gone_are_removed_and_no_other(temp) -> None:
    boot, ns = _here()
    pid, started = _ended_process()
    own_start = Path("/proc/self/stat").read_text().rpartition(")")[2].split()[19]
    gone = {
        "ended": _folder(temp, f"{boot} {ns} {pid} {started}\n"),
        "pid reused": _folder(temp, f"{boot} {ns} {os.getpid()} {int(own_start) + 1}\n"),
        "an earlier boot": _folder(temp, f"not-this-boot {ns} {os.getpid()} {own_start}\n"),
    }
    kept = {
        "alive": _folder(temp, f"{boot} {ns} {os.getpid()} {own_start}\n"),
        "another PID namespace": _folder(temp, f"{boot} pid:[1] {pid} {started}\n"),
        "no owner (being made, or an older version's)": _folder(temp, None),
        "an unreadable owner": _folder(temp, "half"),
    }
    other_prefix = Path(tempfile.mkdtemp(prefix="dflash-other-", dir=temp))
    (other_prefix / scratch.OWNER).write_text(f"{boot} {ns} {pid} {started}\n")
    scratch.make(PREFIX)
    assert [why for why, folder in gone.items() if folder.exists()] == []
    assert [why for why, folder in kept.items() if not (folder / "kept.txt").exists()] == []
    assert other_prefix.exists()


def test_an_executor_killed_outright_leaves_a_folder_the_next_one_removes(toy_copy, temp) -> None:
    config = load_config(toy_copy())
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # an executor that is SIGKILLed inside its `with` block: no cleanup runs
        try:
            os.close(read)
            with Executor(config) as executor:
                os.write(write, executor._tmp.encode())
                os.close(write)
                os.kill(os.getpid(), signal.SIGKILL)
        finally:
            os._exit(1)
    os.close(write)
    with os.fdopen(read) as said:
        left = Path(said.read())
    _, status = os.waitpid(child, 0)
    assert os.WIFSIGNALED(status) and left.parent == temp and (left / "pristine").is_dir()
    with Executor(config) as executor:
        assert not left.exists()
        assert Path(executor._tmp).is_dir()
    assert not Path(executor._tmp).exists()
