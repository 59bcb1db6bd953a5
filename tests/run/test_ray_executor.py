"""`--executor ray` against a real two-node Ray cluster on this machine (one CPU a node, 127.0.0.1 alone, in
namespaces of its own: benchmarks/ray_cluster.py), shared by every test of this module.

The verdicts equal the fork executor's on the toy catalog (every status it reaches, plus a named invariant);
a Ray worker SIGKILLed mid-job, or a whole node, is retried and changes nothing; SIGTERM to `dflash verify`
cancels every task, keeps the finished verdicts in the cache and exits 143, and the next run resumes; a driver
whose harness code differs from the workers' is refused before any job; no Ray socket uses an address but
127.0.0.1.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.ray_cluster import ADDRESS, LocalCluster, wait_for

pytestmark = pytest.mark.slow

DFLASH = [sys.executable, "-m", "verify", "verify"]
RAY = ["--executor", "ray", "--ray-address", ADDRESS]
# A mutant that takes a few seconds and is then killed by an assertion: long enough to be caught mid-job.
SLOW = """
register(Mutation("add-slow", "slow, then off by one", ARITH, "return a + b",
                  "return __import__('time').sleep(4) or a + b + 1"))
register(Mutation("sub-slow", "slower, then off by one", ARITH, "return a - b",
                  "return __import__('time').sleep(8) or a - b + 1"))
"""

# One toy mutation per status (the catalog's other two only repeat a kill and a stale anchor).
COMPARED = ("add-off-by-one", "add-type-error", "mul-crashes", "sub-hangs", "describe-label", "orphan-unreached",
            "stale-absent")  # fmt: skip


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster() as running:
        yield running


def _environment() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path.cwd())}


def _run(cluster: LocalCluster, root: Path, *args: str, timeout: float = 240) -> tuple[int, dict, str]:
    """`dflash verify --executor ray` on the cluster: (exit code, JSON report, stdout then stderr)."""
    report = root.parent / f"{root.name}-report.json"
    command = cluster.command([*DFLASH, *RAY, "--project", str(root), "--json", str(report), *args])
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=_environment())
    data = json.loads(report.read_text()) if report.is_file() else {}
    return done.returncode, data, done.stdout + "\n--- stderr\n" + done.stderr


def _statuses(report: dict) -> dict[str, tuple[str, tuple[str, ...]]]:
    return {m["name"]: (m["status"], tuple(m["killed_by"])) for m in report["mutations"]}


def _slow_toy(toy_copy, name: str) -> Path:
    root = toy_copy(name)
    (root / "toy_mutations.py").write_text((root / "toy_mutations.py").read_text() + SLOW)
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("timeout_min_s = 3.0", "timeout_min_s = 60.0"))
    return root


def test_verdicts_equal_the_fork_executors(cluster, toy_run, toy_copy, hash_tree) -> None:
    # The whole toy catalog (killed, crashed by an exception and by an abort, timeout, survived, unreached,
    # stale), with TypeError declared a named invariant so that add-type-error is caught: the fork side is the
    # session's toy run, and, for add-type-error alone, a fork run on this same copy.
    root = toy_copy("invariant")
    pyproject = root / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace("preload = []", 'preload = []\ninvariant_errors = ["TypeError"]')
    )
    before = hash_tree(root)
    code, report, output = _run(cluster, root, *(f"--mutation={name}" for name in COMPARED))
    assert code == 1, output  # the toy catalog fails on purpose (survivors, stale ones)
    fork = {
        k: v for k, v in _statuses(json.loads((toy_run.reports / "report.json").read_text())).items() if k in COMPARED
    }
    fork_args = ["--project", str(root), "--no-cache", "-m", "add-type-error", "--json", str(root.parent / "fork.json")]
    fork_caught = subprocess.run([*DFLASH, *fork_args], capture_output=True, text=True, env=_environment())
    assert fork_caught.returncode == 0, fork_caught.stdout  # caught counts as detected
    fork["add-type-error"] = _statuses(json.loads((root.parent / "fork.json").read_text()))["add-type-error"]
    ray_statuses = _statuses(report)
    assert ray_statuses == fork
    assert {status for status, _ in ray_statuses.values()} >= {"killed", "caught", "crashed", "timeout", "survived"}
    assert report["harness_errors"] == [] and not report["interrupted"]
    assert hash_tree(root) == before  # nothing of the user's tree changed, on the cluster's side either
    assert "FAIL" in output.partition("\n--- stderr")[0].strip().splitlines()[-1]


def _processes(marker: str, cluster: LocalCluster | None = None) -> list[int]:
    """Pids whose command line holds `marker` (Ray sets its workers' titles to ray::TASK while they run one); of
    `cluster`'s processes alone when given (another test module may run a cluster of its own at the same time)."""
    ours = set(_descendants(cluster.namespace_pid)) if cluster is not None else None
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (ours is None or int(entry.name) in ours):
            try:
                if marker in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def test_a_worker_killed_mid_job_is_retried_and_changes_no_verdict(cluster, toy_copy) -> None:
    root = _slow_toy(toy_copy, "killed-worker")
    command = cluster.command([*DFLASH, *RAY, "--project", str(root), "-m", "add-slow", "--json", str(root / "r.json")])
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_environment())
    # The mutant's job is the one that sleeps: its worker's server has a forked child running the gate.
    worker = wait_for(
        lambda: [p for p in _processes("ray::run_job", cluster) if any(_children(s) for s in _children(p))], 120
    )
    assert worker, "no Ray task ran the mutant"
    server = _children(worker[0])[0]
    os.kill(worker[0], signal.SIGKILL)
    output, errors = process.communicate(timeout=240)
    assert process.returncode == 0, output + errors
    report = json.loads((root / "r.json").read_text())
    assert _statuses(report) == {"add-slow": ("killed", ("tests/gates/test_arith.py::test_add",))}
    assert wait_for(lambda: not Path(f"/proc/{server}").exists(), 30), "the killed worker's server outlived it"
    assert "PASS" in output.strip().splitlines()[-1]


def test_sigterm_cancels_every_task_exits_143_and_the_next_run_resumes(cluster, toy_copy) -> None:
    root = _slow_toy(toy_copy, "interrupted")
    args = ["--project", str(root), "-m", "add-off-by-one", "-m", "sub-slow", "--jobs", "2"]
    process = subprocess.Popen(cluster.command([*DFLASH, *RAY, *args]), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, env=_environment())  # fmt: skip
    # Interrupted once the quick mutant's verdict is in (the partial report) and the slow one's task is running.
    assert wait_for(lambda: _finished(root) == {"add-off-by-one"} and _processes("ray::run_job", cluster), 150), (
        "never got there"
    )
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=90)
    assert process.returncode == 143, output
    assert _processes("ray::run_job", cluster) == [], "a task of the interrupted run is still running"
    # Nor any server or child of it: the driver is gone, so Ray ends its workers, and their servers die with them.
    server = "verify.run.execution.cluster.server"
    assert wait_for(lambda: not _processes(server, cluster), 60), "a node server outlived the run"
    code, report, output = _run(cluster, root, "-m", "add-off-by-one", "-m", "sub-slow", "--jobs", "2")
    assert code == 0, output
    by_name = {m["name"]: m for m in report["mutations"]}
    assert by_name["add-off-by-one"]["cached"] and not by_name["sub-slow"]["cached"]
    assert {name: m["status"] for name, m in by_name.items()} == {"add-off-by-one": "killed", "sub-slow": "killed"}


def _finished(root: Path) -> set[str]:
    try:
        report = json.loads((root / ".dflash-cache" / "last-report.json").read_text())
    except (OSError, ValueError):
        return set()  # not written yet, or being replaced
    return {m["name"] for m in report.get("mutations", ())}


def test_a_driver_whose_harness_differs_from_the_workers_is_refused(cluster, toy_copy, tmp_path) -> None:
    # A real difference: the driver runs a copy of verify/ with one harness file changed; the workers run theirs.
    copy = tmp_path / "driver"
    shutil.copytree(Path.cwd() / "verify", copy / "verify", ignore=shutil.ignore_patterns("__pycache__"))
    judge = copy / "verify" / "run" / "phases" / "judge.py"
    judge.write_text(judge.read_text() + "\n# a local edit the workers do not have\n")
    root = toy_copy("mismatch")
    environment = {**_environment(), "PYTHONPATH": f"{copy}{os.pathsep}{Path.cwd()}"}
    # `python -m` puts its working directory first on sys.path: the copy's verify is the driver's.
    done = subprocess.run(cluster.command([*DFLASH, *RAY, "--project", str(root), "-m", "add-off-by-one"]),
                          capture_output=True, text=True, timeout=120, env=environment, cwd=copy)  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "differs from this machine in harness" in done.stdout + done.stderr


# Every slot of the cluster is held by a task of the test's own for HOLD_S; the driver's backstop is cut to
# BACKSTOP_S after a task starts, shorter than that wait and much longer than one job (one took over 10 s on a
# 2-core machine running two other test processes beside the cluster).
HOLD_S, BACKSTOP_S = 25.0, 20.0
QUEUED = f"""
import json, sys, time
from pathlib import Path
import ray
from verify.run.execution.cluster import driver
from verify.run.execution.jobs import Job
from verify.config.settings import load_config

driver.BACKSTOP_SCALE, driver.BACKSTOP_GRACE_S = 0.0, {BACKSTOP_S}

@ray.remote(num_cpus=1)
def hold():
    yield "started"
    time.sleep({HOLD_S})

with driver.Driver(load_config(Path(sys.argv[1])), sys.argv[2]) as cluster:
    holders = [hold.remote() for _ in range(cluster.capacity)]
    for holder in holders:
        ray.get(next(holder))  # every slot is taken now
    jobs = [Job(f"queued-{{i}}", ("tests/gates/test_arith.py::test_add",), 60.0) for i in range(cluster.capacity + 1)]
    results = cluster.run(jobs, len(jobs))
    print(json.dumps([[r.key, r.state, r.reason, [str(o.outcome) for o in r.outcomes]] for r in results]))
"""


def test_a_task_waiting_for_a_slot_is_never_declared_lost(cluster, toy_copy) -> None:
    # More jobs than the cluster holds, queued behind tasks that hold every slot longer than the backstop: each
    # waits, then runs, and none comes back lost (the backstop counts from a task's start, not from its queue).
    root = toy_copy("queued")
    command = cluster.command([sys.executable, "-c", QUEUED, str(root), ADDRESS])
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, env=_environment(), cwd=root.parent)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert [(key, state, outcomes) for key, state, _, outcomes in results] == [
        (f"queued-{i}", "done", ["passed"]) for i in range(len(results))
    ], results
    assert len(results) == 3  # the two slots of the cluster, and one more


def _addresses(cluster: LocalCluster) -> list[tuple[str, int, str]]:
    """(local address, port, state) of every TCP socket in the cluster's network namespace."""
    sockets = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        text = subprocess.run(cluster.command(["cat", table]), capture_output=True, text=True, check=True).stdout
        for line in text.splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, port = local.split(":")
            raw = bytes.fromhex(address)
            # /proc/net prints each 32-bit word in host (little-endian) order.
            words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            text_address = ".".join(str(b) for b in words) if len(words) == 4 else _ipv6(words)
            sockets.append((text_address, int(port, 16), state))
    return sockets


def _ipv6(raw: bytes) -> str:
    import ipaddress

    address = ipaddress.IPv6Address(raw)
    return str(address.ipv4_mapped or address)


def test_no_ray_socket_uses_an_address_but_loopback(cluster) -> None:
    sockets = _addresses(cluster)
    assert any(port == 6379 and state == "0A" for _, port, state in sockets)  # the head's GCS is listening
    assert {address for address, _, _ in sockets} == {"127.0.0.1"}


def test_without_an_address_a_local_cluster_runs_for_the_run_and_leaves_nothing(toy_copy, tmp_path) -> None:
    # In namespaces of its own (127.0.0.1 alone; the pid namespace lets `ps` see only what this run started),
    # with a HOME of its own: Ray writes a token to ~/.ray unless told otherwise, and nothing may land there.
    root, home = toy_copy("local"), tmp_path / "home"
    home.mkdir()
    script = (
        "ip link set lo up; "
        f"env -u RAY_ADDRESS HOME={home} {' '.join(DFLASH)} --executor ray --project {root} -m add-off-by-one; "
        "echo rc=$?; ps -eo comm= | grep -ciE 'raylet|gcs_server' || true"
    )
    command = ["unshare", "--net", "--pid", "--fork", "--mount-proc", "bash", "-c", script]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=_environment())
    lines = done.stdout.strip().splitlines()
    assert lines[-2:] == ["rc=0", "0"], done.stdout[-3000:] + done.stderr[-3000:]  # passed; no raylet nor GCS left
    assert "PASS 1/1 killed" in lines[-3]
    assert list(home.iterdir()) == []


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _raylet_of(pid: int) -> int:
    """The raylet (one per node) whose worker `pid` is: its nearest raylet ancestor, 0 if none."""
    while pid > 1:
        pid = _parent(pid)
        if pid and "raylet" in Path(f"/proc/{pid}/comm").read_text(errors="replace"):
            return pid
    return 0


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        children = _children(todo.pop())
        found += children
        todo += children
    return found


# Last in the module: the cluster has one node left after it.
def test_a_node_lost_mid_job_is_retried_on_another_and_changes_no_verdict(cluster, toy_copy) -> None:
    root = _slow_toy(toy_copy, "lost-node")
    args = ["--project", str(root), "-m", "add-slow", "-m", "sub-slow", "--jobs", "2", "--json", str(root / "r.json")]
    process = subprocess.Popen(cluster.command([*DFLASH, *RAY, *args]), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=_environment())  # fmt: skip

    def mutant_on_the_worker_node() -> int:
        # A worker whose server has a forked child (a mutant's gate running), on the node that is not the head.
        for worker in _processes("ray::run_job", cluster):
            raylet = _raylet_of(worker)
            head = raylet and "--head" in (Path(f"/proc/{raylet}/cmdline").read_bytes().decode(errors="replace"))
            if raylet and not head and any(_children(s) for s in _children(worker)):
                return raylet
        return 0

    raylet = wait_for(mutant_on_the_worker_node, 150)
    assert raylet, "no mutant ran on the second node"
    # The whole node goes: its raylet and everything under it (workers, node servers, their children), at once.
    doomed = [raylet, *_descendants(raylet)]
    for pid in doomed:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    output, errors = process.communicate(timeout=300)
    assert process.returncode == 0, output + errors
    report = json.loads((root / "r.json").read_text())
    assert _statuses(report) == {
        "add-slow": ("killed", ("tests/gates/test_arith.py::test_add",)),
        "sub-slow": ("killed", ("tests/gates/test_arith.py::test_sub",)),
    }
    assert report["harness_errors"] == []
    assert "PASS 2/2 killed" in output.strip().splitlines()[-1]
