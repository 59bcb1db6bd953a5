"""`--executor ray` on a two-node cluster whose second node has no Landlock (its kernel refuses the calls:
benchmarks/no_landlock.py), and a driver whose own node dies mid-run.

A node that cannot confine its children refuses the run (exit 2, naming the node and why) unless confinement is
off, and then the run goes on and says so node by node. The driver's own node killed mid-run (its raylet and
everything under it: Ray then ends the driver) ends the run with exit 4, a message naming the cause and a
partial report, never a verdict; the next run (here on this machine, with the fork executor) resumes from the
verdicts cached before.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.ray_cluster import ADDRESS, LocalCluster, wait_for
from tests.run.test_ray_executor import _children, _descendants, _finished, _processes, _slow_toy, _statuses

pytestmark = pytest.mark.slow

DFLASH = [sys.executable, "-m", "verify", "verify"]
RAY = ["--executor", "ray", "--ray-address", ADDRESS]


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(landlock_on_second=False) as running:
        yield running


def _environment(**extra: str) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path.cwd()), **extra}


def test_a_node_that_cannot_confine_refuses_the_run(cluster, toy_copy) -> None:
    root = toy_copy("refused")
    done = subprocess.run(cluster.command([*DFLASH, *RAY, "--project", str(root), "-m", "add-off-by-one"]),
                          capture_output=True, text=True, timeout=240, env=_environment())  # fmt: skip
    output = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2, output
    assert "cannot confine its children (the kernel has no Landlock system calls (ENOSYS))" in output
    assert "error: node 127.0.0.1 (" in output and "DFLASH_CONFINE=off" in output
    assert not (root / ".dflash-cache").exists()  # refused before any job ran


def test_with_confinement_off_the_run_goes_on_and_says_so_node_by_node(cluster, toy_copy) -> None:
    root = toy_copy("off")
    report = root.parent / "off.json"
    command = [*DFLASH, *RAY, "--project", str(root), "-m", "add-off-by-one", "--json", str(report)]
    done = subprocess.run(cluster.command(command), capture_output=True, text=True, timeout=240,
                          env=_environment(DFLASH_CONFINE="off"))  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    nodes = json.loads(report.read_text())["node_confinement"]
    assert sorted(nodes.values()) == [
        "off: DFLASH_CONFINE=off on the driver (landlock ABI 7)",
        "off: DFLASH_CONFINE=off on the driver (none there: the kernel has no Landlock system calls (ENOSYS))",
    ]
    line = " ".join(done.stderr.split())
    assert "confinement per node: 127.0.0.1 (" in line and "(none there: the kernel has no Landlock" in line


# Last in the module: the cluster has lost its head node's raylet after it.
def test_the_driver_s_node_lost_ends_the_run_with_exit_4_and_the_next_run_resumes(cluster, toy_copy) -> None:
    root = _slow_toy(toy_copy, "driver-lost")
    selected = ["-m", "add-off-by-one", "-m", "sub-slow"]
    report = root.parent / "lost.json"
    command = [*DFLASH, *RAY, "--project", str(root), *selected, "--jobs", "2", "--json", str(report)]
    process = subprocess.Popen(cluster.command(command), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=_environment(DFLASH_CONFINE="off"))  # fmt: skip

    def head_raylet_while_sub_slow_runs() -> int:
        if _finished(root) != {"add-off-by-one"}:
            return 0  # the quick verdict first, in the cache and the partial report
        if not any(_children(s) for w in _processes("ray::run_job", cluster) for s in _children(w)):
            return 0  # sub-slow's child not started yet
        for pid in _processes("--head", cluster):
            if Path(f"/proc/{pid}/comm").read_text().strip() == "raylet":
                return pid  # the driver's node: Ray connects a driver to the head node of its machine
        return 0

    raylet = wait_for(head_raylet_while_sub_slow_runs, 150)
    assert raylet, "never got there"
    for pid in [raylet, *_descendants(raylet)]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    output, errors = process.communicate(timeout=240)
    said = " ".join(errors.split())
    assert process.returncode == 4, output + errors
    assert "its executor lost: the process holding the Ray driver" in said, said
    assert "verdicts reached are cached: run again" in said
    partial = json.loads(report.read_text())
    assert partial["interrupted"] and partial["interrupted_by"] == "", said
    # What was reached before the driver died (sub-slow too when it ran on the other node and beat the death),
    # and nothing judged wrongly.
    reached = {name: status for name, (status, _) in _statuses(partial).items()}
    assert "add-off-by-one" in reached and set(reached.values()) == {"killed"}, (reached, said)
    assert "FAIL" in output.strip().splitlines()[-1]

    # Resumed here, with the fork executor: every verdict reached before is reused, the rest is judged.
    again = root.parent / "again.json"
    resumed = subprocess.run([*DFLASH, "--project", str(root), *selected, "--json", str(again)],
                             capture_output=True, text=True, timeout=240, env=_environment())  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    by_name = {m["name"]: m for m in json.loads(again.read_text())["mutations"]}
    assert {name: m["cached"] for name, m in by_name.items()} == {name: name in reached for name in by_name}
    assert {name: m["status"] for name, m in by_name.items()} == {"add-off-by-one": "killed", "sub-slow": "killed"}
    print(said)  # the error as a user reads it (pytest -s shows it)
