"""What a child cannot see, against the real CLI (`python -m verify`, a process of its own started with a fake
secret in its environment) at --jobs 2: no secret in its own /proc/self/environ nor in any other process's it can
find, none in the JSON report even when a mutant raises it; no listener of the machine's loopback; a /dev/shm of
its own, counted in its memory ceiling and gone with it. Namespaces off or refused, the report says which layer is
missing (`verify.sandbox.namespaces`).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from verify.mutation import Mutation
from verify.report.json_report import read_json
from verify.report.verdict import Status
from verify.sandbox import cgroups, namespaces

SECRET = "dflash-test-secret-9f3c1a7e5b"
HALVES = (SECRET[:12], SECRET[12:])  # the mutant's source never holds the value whole

CORE = '''"""Code under test."""


def add(a, b):
    return a + b
'''

# What the mutants do, in a module of the project they call (unmutated itself); each leaves its findings in the
# shared folder (the one folder outside its copy a child may write).
SPY = """import json, os, socket, time
from pathlib import Path

SHARED = Path(os.environ["SPY_SHARED"])


def _note(kind, data):
    (SHARED / f"{kind}-{os.getpid()}-{time.time_ns()}.json").write_text(json.dumps(data))


def environ():
    pids = sorted(p for p in os.listdir("/proc") if p.isdigit())
    found = {}
    for pid in ["self", str(os.getppid()), *pids]:
        try:
            found[pid] = open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace")
        except OSError as error:
            found[pid] = type(error).__name__
    _note("environ", {"pids": pids, "found": found})


def dial():
    try:
        socket.create_connection(("127.0.0.1", int(os.environ["SPY_PORT"])), timeout=5).close()
        _note("dial", "connected")
    except OSError as error:
        _note("dial", type(error).__name__)


def fill_shm():
    for i in range(3):
        with open(f"/dev/shm/dflash-spy-{os.getpid()}-{i}", "wb") as out:
            for _ in range(200):
                out.write(b"x" * (1 << 20))
"""

GATES = """import pytest
from hostile import core


@pytest.mark.gate
def test_add():
    assert core.add(2, 3) == 5
"""

MUTATIONS = {
    "reads-environ": "__import__('hostile.spy').spy.environ()\n    return a + b",
    "raises-secret": f"raise RuntimeError('leaked: ' + {HALVES[0]!r} + {HALVES[1]!r})",
    "dials-host": "__import__('hostile.spy').spy.dial()\n    return a + b",
    "fills-shm": "__import__('hostile.spy').spy.fill_shm()\n    return a + b",
    "assertion-kill": "return a + b + 1",
}


def _project(make, root: Path, names: list[str]) -> Path:
    return (
        make(root)
        .write(
            core=CORE,
            gates={"test_core.py": GATES},
            modules={"spy.py": SPY},
            mutations=[Mutation(n, f"spy: {n}", "hostile/core.py", "return a + b", MUTATIONS[n]) for n in names],
            # A mutant's memory ceiling of 256 MiB: 3 x 200 MiB in /dev/shm is past it.
            settings={
                "jobs": 2,
                "timeout_factor": 5.0,
                "timeout_min_s": 3.0,
                "memory_factor": 1.0,
                "memory_min_mb": 256,
            },
        )
        .root
    )


def _run(root: Path, report: Path, env: dict[str, str], wrap: list[str] | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "verify", "verify", "--project", str(root), "--json", str(report), "--no-explain"]
    if wrap:  # a shell's script, the command its last words
        command = [*wrap[:-1], f"{wrap[-1]} {shlex.join(command)}"]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)


def _shm_spies() -> set[str]:
    return {name for name in os.listdir("/dev/shm") if name.startswith("dflash-spy-")}


def test_a_child_sees_no_secret_no_host_network_and_no_shared_memory_of_the_machine(tmp_path, hostile_project) -> None:
    found = namespaces.probe()
    assert found.full, f"this machine gives every namespace (root, Linux 6.18): {found.describe()}"
    root = _project(hostile_project, tmp_path / "p", list(MUTATIONS))
    shared = root.parent / "shared"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    env = {**os.environ, "DFLASH_TEST_SECRET_TOKEN": SECRET, "SPY_SHARED": str(shared),
           "SPY_PORT": str(listener.getsockname()[1]), "OMP_NUM_THREADS": "1"}  # fmt: skip
    before = _shm_spies()
    try:
        done = _run(root, tmp_path / "r.json", env)
    finally:
        listener.close()
    output = done.stdout + done.stderr
    report_text = (tmp_path / "r.json").read_text()
    report = read_json(tmp_path / "r.json")[0]
    statuses = {r.name: r for r in report.mutations}
    assert set(statuses) == set(MUTATIONS), output
    assert report.confinement.endswith("; namespaces user, pid, mount, ipc, net"), report.confinement

    # /proc: its own environment holds no secret, and it sees no other process (its parent is outside: pid 0).
    notes = [json.loads(p.read_text()) for p in shared.glob("environ-*.json")]
    assert notes, output  # the mutant ran (twice: a gate that passes is run once; here every attempt counts)
    for note in notes:
        assert note["pids"] == ["1", "2"], note["pids"]  # PID 1 (its init) and itself
        assert "PATH=" in note["found"]["self"] and "SPY_SHARED=" in note["found"]["self"]
        assert SECRET not in json.dumps(note) and "DFLASH_TEST_SECRET_TOKEN" not in json.dumps(note)
    assert statuses["reads-environ"].status is Status.SURVIVED

    # What a mutant says reaches the reports redacted.
    raised = statuses["raises-secret"]
    assert raised.status is Status.CRASHED
    assert "leaked: [redacted]" in raised.outcomes[0].message, raised.outcomes
    assert SECRET not in report_text and SECRET not in output

    # No listener of the machine's loopback answers.
    dials = {json.loads(p.read_text()) for p in shared.glob("dial-*.json")}
    assert dials == {"ConnectionRefusedError"}, dials

    # 3 x 200 MiB in /dev/shm: stopped at its 256 MiB ceiling, named memory, and nothing left behind.
    filled = statuses["fills-shm"]
    assert (filled.status, filled.crash_kind) == (Status.CRASHED, "memory"), filled
    assert _shm_spies() == before
    assert statuses["assertion-kill"].status is Status.KILLED


def test_without_namespaces_nor_landlock_no_process_of_the_run_holds_a_secret_and_dev_shm_is_emptied(
    tmp_path, hostile_project
) -> None:
    # Nothing hides the other processes here: the program re-executed itself without the secret, so neither its
    # environment block nor any other of the run's holds it; what a mutant left in the machine's /dev/shm is removed.
    names = ["reads-environ", "fills-shm", "assertion-kill"]
    root = _project(hostile_project, tmp_path / "p", names)
    shared = root.parent / "shared"
    env = {**os.environ, "DFLASH_TEST_SECRET_TOKEN": SECRET, "SPY_SHARED": str(shared), "DFLASH_NAMESPACES": "off",
           "DFLASH_CONFINE": "off", "OMP_NUM_THREADS": "1"}  # fmt: skip
    before = _shm_spies()
    done = _run(root, tmp_path / "off.json", env)
    report = read_json(tmp_path / "off.json")[0]
    expected = "off: DFLASH_CONFINE=off; namespaces off; all refused: DFLASH_NAMESPACES=off"
    assert report.confinement == expected, report.confinement
    assert "confinement namespaces off; all refused: DFLASH_NAMESPACES=off" in done.stderr, done.stderr
    statuses = {r.name: r for r in report.mutations}
    assert statuses["reads-environ"].status is Status.SURVIVED and statuses["assertion-kill"].status is Status.KILLED
    # The machine's /dev/shm: a cgroup charges what a child writes there to it (crashed at its memory ceiling);
    # where none holds it, nothing bounds it.
    shm_verdict = (Status.CRASHED, "memory") if cgroups.probe().active else (Status.SURVIVED, "")
    assert (statuses["fills-shm"].status, statuses["fills-shm"].crash_kind) == shm_verdict, done.stderr
    notes = [json.loads(p.read_text()) for p in shared.glob("environ-*.json")]
    assert notes, done.stderr
    for note in notes:
        assert len(note["pids"]) > 2  # the machine's processes, in sight
        parent = note["found"][next(pid for pid in note["found"] if pid not in ("self",))]
        assert "SPY_SHARED=" in parent, parent  # its parent's environment was read: the run's own
        assert SECRET not in json.dumps(note)
    assert _shm_spies() == before
    assert SECRET not in (tmp_path / "off.json").read_text()


def test_namespaces_refused_are_named_in_the_report_and_the_first_lines(tmp_path, hostile_project) -> None:
    root = _project(hostile_project, tmp_path / "p", ["assertion-kill"])

    # A kernel that refuses user namespaces: here, inside a user namespace whose limit of nested ones is 0.
    unshare = shutil.which("unshare")
    assert unshare, "util-linux's unshare is installed here"
    wrap = [unshare, "--user", "--map-root-user", "sh", "-c", "echo 0 > /proc/sys/user/max_user_namespaces && exec"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = _run(root, tmp_path / "refused.json", env, wrap)
    report = read_json(tmp_path / "refused.json")[0]
    assert "; user refused: [Errno 28] unshare(user)" in report.confinement, (report.confinement, done.stderr)
    assert "user refused" in done.stderr
    assert [r.status for r in report.mutations] == [Status.KILLED], done.stderr
