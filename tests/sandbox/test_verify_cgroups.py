"""Ceilings the kernel enforces, against the real CLI: a mutant that takes 0.6 of the machine's memory at once is
`crashed (memory)`, stopped by its child's cgroup before it holds more than its ceiling; the groups go with the
run; where cgroups are refused, the run names the parent's polling as the layer that enforces the ceilings.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.arith_texts import CORE, GATES
from verify.config.settings import load_config
from verify.mutation import Mutation
from verify.report.crashes import CrashKind
from verify.report.json_report import read_json
from verify.report.verdict import Status
from verify.run.execution.fork import Executor, Job
from verify.sandbox import cgroups

# 0.6 of the machine's memory asked for at once, two ways. A shared anonymous mapping is not private writable
# memory, so RLIMIT_DATA does not refuse it: it is taken as fast as its pages can be touched, each 64 MiB written
# down, and the mutant stops itself past 1.5 GiB (so the machine never loses more, whatever the harness does).
HOG = """import mmap
import os

SHARED = os.environ["HOSTILE_SHARED"]
CHUNK = 64 << 20
GUARD = 1536 << 20


def _share():
    with open("/proc/meminfo") as meminfo:
        total = int(next(line for line in meminfo if line.startswith("MemTotal:")).split()[1]) * 1024
    return int(0.6 * total)


def at_once():
    return bytearray(_share())


def touched():
    me = os.urandom(8).hex()  # one file per attempt: in its own PID namespace every child is pid 2
    mapping = mmap.mmap(-1, _share())
    zeros = b"\\1" * CHUNK
    for offset in range(0, GUARD, CHUNK):
        mapping[offset : offset + CHUNK] = zeros
        with open(f"{SHARED}/touched-{me}", "w") as progress:
            progress.write(str(offset + CHUNK))
    raise RuntimeError("took 1.5 GiB and was not stopped")
"""

_CALL = "return __import__('hostile.hog').hog.{}() or a {} b"
MUTATIONS = {
    "assertion-kill": ("return a + b", "return a + b + 1"),
    "changes-nothing": ("return a * b", "return b * a"),
    "hogs-at-once": ("return a + b", _CALL.format("at_once", "+")),
    "hogs-touched": ("return a * b", _CALL.format("touched", "*")),
}
ADD, MUL = "tests/gates/test_core.py::test_add", "tests/gates/test_core.py::test_mul"
CEILING = 1 << 30  # memory_min_mb: the unmutated child's peak is far below it, and the machine's share above


def _project(make, root: Path, names: list[str]) -> tuple[Path, Path]:
    project = make(root).write(
        core=CORE, gates={"test_core.py": GATES}, modules={"hog.py": HOG},
        mutations=[Mutation(name, f"hostile: {name}", "hostile/core.py", *MUTATIONS[name]) for name in names],
        settings={"jobs": 2, "timeout_factor": 5.0, "timeout_min_s": 30.0, "flake_reruns": 1, "preload": [],
                  "memory_factor": 1.0, "memory_min_mb": CEILING >> 20},
    )  # fmt: skip
    return project.root, project.shared


def _run(cli, root: Path, report: Path):
    result = cli("--project", str(root), "--jobs", "2", "--no-cache", "--no-explain", "--json", str(report))
    return result, read_json(report)[0]


@pytest.mark.skipif(not cgroups.probe().active, reason="no cgroup this process may make groups in: polled only")
def test_a_mutant_taking_most_of_the_machine_at_once_is_crashed_by_memory_within_its_ceiling(
    tmp_path, cli, monkeypatch, hostile_project
) -> None:
    root, shared = _project(hostile_project, tmp_path / "p", list(MUTATIONS))
    monkeypatch.setenv("HOSTILE_SHARED", str(shared))
    layer = cgroups.probe()
    assert layer.memory is not None
    # This test's process ran other tests' runs before (pytest-xdist): only a folder this run made counts.
    before = set(layer.memory.glob(f"dflash-{os.getpid()}-*"))
    result, report = _run(cli, root, tmp_path / "r.json")
    by_name = {r.name: r for r in report.mutations}
    assert by_name["assertion-kill"].status is Status.KILLED, result.output
    assert by_name["changes-nothing"].status is Status.SURVIVED, result.output
    for name in ("hogs-at-once", "hogs-touched"):
        crashed = by_name[name]
        assert (crashed.status, crashed.crash_kind) == (Status.CRASHED, CrashKind.MEMORY), (crashed, result.output)
        assert crashed.attempts == 2 and crashed.reason.startswith("memory: "), crashed
    assert "killed by the kernel at its memory ceiling of 1024 MiB" in by_name["hogs-touched"].reason
    # Each attempt of the touching hog was stopped before it held more than its ceiling.
    touched = [int(path.read_text()) for path in shared.glob("touched-*")]
    assert len(touched) == 2 and all(0 < size <= CEILING for size in touched), touched
    assert report.ceilings == cgroups.probe().describe() and report.ceilings.startswith("cgroup v")
    assert set(layer.memory.glob(f"dflash-{os.getpid()}-*")) <= before  # gone with the run


def test_where_cgroups_are_refused_the_run_names_polling_and_its_ceilings_still_hold(
    tmp_path, cli, monkeypatch, hostile_project
) -> None:
    root, shared = _project(hostile_project, tmp_path / "p", ["assertion-kill", "changes-nothing", "hogs-at-once"])
    monkeypatch.setenv("HOSTILE_SHARED", str(shared))
    monkeypatch.setenv(cgroups.SWITCH, "off")
    result, report = _run(cli, root, tmp_path / "r.json")
    assert report.ceilings == "polled: DFLASH_CGROUPS=off"
    first_line = "ceilings polled: DFLASH_CGROUPS=off: no kernel limit, the parent checks children every 50 ms"
    assert first_line in " ".join(result.output.split())  # as rich wrapped it
    by_name = {r.name: r for r in report.mutations}
    assert by_name["assertion-kill"].status is Status.KILLED and by_name["changes-nothing"].status is Status.SURVIVED
    hog = by_name["hogs-at-once"]  # RLIMIT_DATA's backstop refuses the one allocation
    assert (hog.status, hog.crash_kind) == (Status.CRASHED, CrashKind.MEMORY), (hog, result.output)


def test_a_cgroup_root_that_cannot_be_used_is_named_and_makes_no_group(tmp_path) -> None:
    # A plain folder that says it offers both controllers: the kernel behind it gives neither to its children.
    fake = tmp_path / "cgroup"
    fake.mkdir()
    (fake / "cgroup.controllers").write_text("memory pids\n")
    (fake / "cgroup.subtree_control").write_text("")
    layer = cgroups.probe(root=fake)
    assert not layer.active
    assert (
        layer.describe() == f"polled: cgroup v2 at {fake} cannot give its children memory and pids (not "
        "delegated, or it holds processes)"
    )
    assert cgroups.Groups(layer).make(1 << 30, 8) is None


@pytest.mark.skipif(not cgroups.probe().active, reason="no cgroup this process may make groups in: polled only")
def test_a_group_bounds_its_child_and_is_removed_with_what_is_left_in_it(tmp_path) -> None:
    groups = cgroups.Groups(cgroups.probe())
    try:
        group = groups.make(64 << 20, 2)
        assert group is not None
        limit = "memory.max" if group.version == 2 else "memory.limit_in_bytes"
        assert int((group.memory / limit).read_text()) == 64 << 20
        if group.pids is not None:
            assert int((group.pids / "pids.max").read_text()) == 2 * cgroups.TASKS_PER_PROCESS
        pid = os.fork()
        if pid == 0:  # joins, then takes 256 MiB of shared memory: the kernel kills it at 64 MiB
            try:
                group.join()
                import mmap

                mapping = mmap.mmap(-1, 256 << 20)
                mapping[:] = b"\1" * (256 << 20)
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == -9 and group.oom_kills() == 1
        groups.release(group)
        assert not group.memory.exists()
    finally:
        groups.close()
    roots = [root for root in (groups.layer.memory, groups.layer.pids) if root is not None]
    assert roots and not any((root / groups.name).exists() for root in roots)


@pytest.mark.skipif(not cgroups.probe().active, reason="no cgroup this process may make groups in: polled only")
def test_an_interrupt_removes_the_running_childrens_groups(tmp_path, hostile_project) -> None:
    root, _ = _project(hostile_project, tmp_path / "p", [])
    source = (root / "hostile" / "core.py").read_text()
    hangs = (("hostile/core.py", source.replace("return a * b", "while True: pass")),)
    jobs = [Job("quick", (ADD,), 30.0), Job("hangs", (MUL,), 30.0, hangs)]
    seen: list[list[Path]] = []

    def interrupt_after_first(result) -> None:
        seen.append([folder for group in executor.groups.made.values() for folder in group.folders])
        raise KeyboardInterrupt

    with Executor(load_config(root)) as executor:
        with pytest.raises(KeyboardInterrupt):
            executor.run(jobs, 2, interrupt_after_first)
        assert not executor.groups.made
    [held] = seen  # the hanging child's group, while it ran
    assert held and all(folder.name.isdigit() for folder in held) and not any(folder.exists() for folder in held)
    assert not any(folder.parent.exists() for folder in held)  # the run's folder went with the executor


@pytest.mark.skipif(not cgroups.probe().active, reason="no cgroup this process may make groups in: polled only")
def test_the_groups_a_killed_run_left_are_removed_by_the_next() -> None:
    layer = cgroups.probe()
    assert layer.memory is not None
    gone = os.fork()
    if gone == 0:
        os._exit(0)
    os.waitpid(gone, 0)  # a pid no process has now: a run that was SIGKILLed
    left = layer.memory / f"dflash-{gone}-0123abcd"
    (left / "3").mkdir(parents=True)
    cgroups.Groups(layer).close()
    assert not left.exists()


@pytest.mark.skipif(not cgroups.probe().pids, reason="no pids hierarchy this process may make groups in")
def test_tasks_past_a_groups_pids_max_are_refused_and_counted() -> None:
    import threading
    import time

    groups = cgroups.Groups(cgroups.probe())
    try:
        group = groups.make(0, 2)  # 2 processes: 2 x TASKS_PER_PROCESS tasks, threads included
        assert group is not None
        pid = os.fork()
        if pid == 0:
            started = 0
            try:
                group.join()
                for _ in range(20):
                    try:
                        threading.Thread(target=time.sleep, args=(2,), daemon=True).start()
                        started += 1
                    except RuntimeError:  # "can't start new thread": the kernel refused the task
                        pass
            finally:
                os._exit(started)
        _, status = os.waitpid(pid, 0)
        started = os.waitstatus_to_exitcode(status)
        assert started == 2 * cgroups.TASKS_PER_PROCESS - 1  # the process itself is one of its tasks
        assert group.refused_tasks() == 20 - started
    finally:
        groups.close()
