"""What a child may take and what it inherits, against the real CLI and the fork executor: a memory hog, a
disk filler and a bounded fork bomb are crashes of a named kind, confirmed, their siblings' verdicts unchanged
and every process they made ended; a child's environment holds no Ray variable and no credential (on a Ray
node's path too), its stdin is /dev/null and the kernel picks it first; a timed-out child's daemon is gone
before the next job starts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
import uuid
from pathlib import Path

import pytest

from tests.arith_texts import CORE, GATES
from verify.config.settings import load_config
from verify.mutation import Mutation
from verify.report.crashes import CrashKind
from verify.report.json_report import read_json
from verify.report.matrix import LEGEND, build_matrix
from verify.report.verdict import Status
from verify.run.execution.fork import Executor, Job
from verify.sandbox.hardening import clean_environment

# What the hostile mutants call (each writes what it did into the shared folder, declared writable).
EVIL = """import json
import os
import sys
import time

SHARED = os.environ["HOSTILE_SHARED"]


def hog():
    # Grows until the ceiling stops it: a stop condition that never fires, appending forever.
    grown = []
    while True:
        grown.append(bytearray(32 << 20))


def bomb():
    # 40 sleeping children, each pid written down: past a ceiling of 8 processes. Each names the shared folder
    # on its command line, so the test finds any left from outside the child's PID namespace.
    for _ in range(40):
        pid = os.fork()
        if pid == 0:
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(120)", SHARED])
        with open(f"{SHARED}/bomb-pids", "a") as pids:
            pids.write(f"{pid}\\n")


def fill():
    # One file past a ceiling of 1 MiB, in the child's own temp folder.
    with open(os.path.join(os.environ["TMPDIR"], "big"), "wb") as big:
        big.write(bytes(2 << 20))


def dump_environment():
    with open(f"{SHARED}/env-{os.getpid()}.json", "w") as dump:
        oom = open("/proc/self/oom_score_adj").read().strip()
        json.dump({"keys": sorted(os.environ), "stdin": os.readlink("/proc/self/fd/0"), "oom": oom}, dump)
"""

_CALL = "return __import__('hostile.evil').evil.{}() or a {} b"
MUTATIONS = {
    "assertion-kill": ("return a + b", "return a + b + 1"),
    "changes-nothing": ("return a * b", "return b * a"),
    "memory-hog": ("return a + b", _CALL.format("hog", "+")),
    "fork-bomb": ("return a + b", _CALL.format("bomb", "+")),
    "fills-disk": ("return a * b", _CALL.format("fill", "*")),
    "dumps-environment": ("return a * b", _CALL.format("dump_environment", "*")),
}


def _project(make, tmp_path: Path, names: list[str]) -> tuple[Path, Path]:
    project = make(tmp_path / "p").write(
        core=CORE,
        gates={"test_core.py": GATES},
        modules={"evil.py": EVIL},
        mutations=[Mutation(name, f"hostile: {name}", "hostile/core.py", *MUTATIONS[name]) for name in names],
        settings={
            "jobs": 2, "timeout_factor": 5.0, "timeout_min_s": 20.0, "flake_reruns": 1, "preload": [],
            "memory_factor": 1.0, "memory_min_mb": 256, "processes_max": 8, "file_max_mb": 1,
        },
    )  # fmt: skip
    return project.root, project.shared


def alive_with(marker: str) -> list[int]:
    """The live processes of this machine whose command line holds `marker` (found from outside any child's PID
    namespace, where the pids a child wrote down mean nothing)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            if marker.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
    return found


def test_a_memory_hog_a_fork_bomb_and_a_disk_filler_crash_by_name_and_their_siblings_keep_their_verdicts(
    tmp_path, cli, monkeypatch, hostile_project
) -> None:
    root, shared = _project(hostile_project, tmp_path, list(MUTATIONS))
    monkeypatch.setenv("HOSTILE_SHARED", str(shared))
    # What the harness holds and no child may see, beside a setting of the user's a gate may read.
    for name, value in (
        ("RAY_AUTH_TOKEN", "ray-secret"),
        ("RAY_ADDRESS", "127.0.0.1:6379"),
        ("GITHUB_TOKEN", "gh-secret"),
        ("AWS_SECRET_ACCESS_KEY", "aws-secret"),
        ("PIP_INDEX_URL", "https://user:pw@127.0.0.1/simple"),
        ("HOSTILE_SETTING", "kept"),
    ):
        monkeypatch.setenv(name, value)  # fmt: skip
    result = cli(
        "--project", str(root), "--jobs", "2", "--no-cache", "--no-explain", "--json", str(tmp_path / "r.json")
    )
    report = read_json(tmp_path / "r.json")[0]
    by_name = {r.name: r for r in report.mutations}
    assert by_name["assertion-kill"].status is Status.KILLED, result.output
    assert by_name["changes-nothing"].status is Status.SURVIVED, result.output
    assert by_name["dumps-environment"].status is Status.SURVIVED, result.output
    kinds = (("memory-hog", CrashKind.MEMORY), ("fork-bomb", CrashKind.PROCESSES), ("fills-disk", CrashKind.DISK))
    for name, kind in kinds:
        crashed = by_name[name]
        assert (crashed.status, crashed.crash_kind) == (Status.CRASHED, kind), (crashed, result.output)
        assert crashed.attempts == 2 and crashed.reason.startswith(f"{kind}: "), crashed
    # In the matrix and its legend, and in the JSON as written (not only as read back).
    cells = {row.name: row.cells for row in build_matrix(report).rows}
    assert (cells["memory-hog"], cells["fork-bomb"], cells["fills-disk"]) == (("M",), ("P",), ("D",))
    assert "M memory  P processes  D disk" in LEGEND
    written = {m["name"]: m for m in json.loads((tmp_path / "r.json").read_text())["mutations"]}
    assert written["memory-hog"]["crash_kind"] == "memory"
    assert result.exit_code == 1  # crashes and survivors fail the run; the machine and the run carried on
    # The fork bomb was stopped and every process it made ended (two attempts, each writing its children's pids).
    assert (shared / "bomb-pids").read_text().split()
    assert alive_with(str(shared)) == []
    # Every child that dumped its environment (the mutant's two gates' child, the flake check's ...).
    dumps = [json.loads(path.read_text()) for path in shared.glob("env-*.json")]
    assert dumps
    for dump in dumps:
        assert not [k for k in dump["keys"] if k.startswith("RAY_")]
        assert not {"GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "PIP_INDEX_URL"} & set(dump["keys"])
        assert "HOSTILE_SETTING" in dump["keys"] and dump["stdin"] == "/dev/null" and dump["oom"] == "1000"


def test_a_timed_out_childs_daemon_is_gone_before_the_next_job_starts(toy_copy, monkeypatch, tmp_path) -> None:
    # The reaper's own path: in PID namespaces the kernel ends the daemon with its job's namespace, where the next
    # job could not see it anyway.
    monkeypatch.setenv("DFLASH_NAMESPACES", "off")
    root = toy_copy()
    # The two jobs talk through a folder declared writable (what a job leaves in /dev/shm is removed after it).
    shared = tmp_path / "shared"
    shared.mkdir()
    pid_file, seen_file = (shared / f"dflash-test-{uuid.uuid4().hex}-{n}" for n in ("pid", "seen"))
    source = (root / "toy" / "arith.py").read_text()
    daemon = (
        "import os, time\n    if os.fork() == 0:\n        os.setsid()\n        if os.fork() == 0:\n"
        f"            open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n            time.sleep(600)\n"
        "        os._exit(0)\n    time.sleep(600)\n    return a * b"
    )
    check = (
        f"import os\n    pid = int(open({str(pid_file)!r}).read())\n    alive = os.path.exists(f'/proc/{{pid}}') and "
        "open(f'/proc/{pid}/stat').read().split()[2] != 'Z'\n"
        f"    open({str(seen_file)!r}, 'w').write('alive' if alive else 'gone')\n    return a * b"
    )
    gate = "tests/gates/test_arith.py::test_mul"
    jobs = [
        Job("hangs", (gate,), 1.0, (("toy/arith.py", source.replace("return a * b", daemon)),)),
        Job("checks", (gate,), 30.0, (("toy/arith.py", source.replace("return a * b", check)),)),
    ]
    try:
        with Executor(dataclasses.replace(load_config(root), writable=(str(shared),))) as executor:
            started = time.monotonic()
            hung, checked = executor.run(jobs, 1)
        assert hung.state == "timeout" and checked.state == "done", (hung, checked)
        assert time.monotonic() - started < 120
        assert seen_file.read_text() == "gone"  # ended with its job, not when the run ended
    finally:
        for path in (pid_file, seen_file):
            path.unlink(missing_ok=True)


@pytest.mark.parametrize(
    ("name", "value", "secret"),
    [
        ("RAY_AUTH_TOKEN", "x", True), ("RAY_ADDRESS", "h:1", True), ("HF_TOKEN", "x", True),
        ("AWS_ACCESS_KEY_ID", "x", True), ("SSH_AUTH_SOCK", "/tmp/s", True), ("OPENAI_API_KEY", "x", True),
        ("DB_URL", "postgres://u:pw@127.0.0.1/db", True), ("GIT_AUTHOR_NAME", "me", False),
        ("HOME", "/home/me", False), ("DFLASH_DEVICE", "cpu", False), ("DATA_URL", "https://127.0.0.1/x", False),
    ],
)  # fmt: skip
def test_the_environment_a_child_gets_drops_ray_and_credentials_only(name, value, secret) -> None:
    assert (name in clean_environment({name: value})) is not secret


def test_a_ray_nodes_child_gets_the_same_clean_environment(toy_copy, monkeypatch, tmp_path) -> None:
    # The path a Ray task takes on its node, without Ray: the node server (a fresh process started from the
    # worker, RAY_* in its environment as in a Ray worker's) forks each job's child through the fork executor.
    from verify.run.execution.cluster.server import NodeServer

    root = toy_copy()
    monkeypatch.setenv("RAY_AUTH_TOKEN", "ray-secret")
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    dump = tmp_path / "shared" / "env"  # declared writable: each child's /dev/shm is its own
    dump.parent.mkdir()
    source = (root / "toy" / "arith.py").read_text()
    write = f"import os\n    open({str(dump)!r}, 'w').write(' '.join(os.environ))\n    return a * b"
    job = Job("dumps", ("tests/gates/test_arith.py::test_mul",), 30.0,
              (("toy/arith.py", source.replace("return a * b", write)),))  # fmt: skip
    server = NodeServer(dataclasses.replace(load_config(root), writable=(str(dump.parent),)), root)
    try:
        result = server.run(job)
        assert result.state == "done", result
        keys = dump.read_text().split()
        assert keys and not [k for k in keys if k.startswith("RAY_")], keys
    finally:
        server.close()
        dump.unlink(missing_ok=True)


def test_a_childs_own_load_does_not_stretch_its_budget(monkeypatch) -> None:
    from verify.run.execution import ceilings

    class Loadavg:  # 102 tasks runnable besides the sampler, 100 of them the timed child's (a fork bomb)
        def __init__(self, path: str) -> None:
            assert path == "/proc/loadavg"

        def read_text(self) -> str:
            return "9.0 9.0 9.0 103/900 4242\n"

    monkeypatch.setattr(ceilings, "Path", Loadavg)
    monkeypatch.setattr(ceilings.os, "cpu_count", lambda: 2)
    assert ceilings.load_scale() == 51.0  # the machine as a whole: 102 runnable on 2 cores
    assert ceilings.load_scale(own=100) == 1.5  # the child counted as one: 3 runnable on 2 cores


def test_a_mutants_memory_ceiling_scales_with_the_unmutated_childs_peak_within_the_machines_share(
    toy_copy, monkeypatch
) -> None:
    from verify.run.execution import ceilings

    config = load_config(toy_copy())  # memory_factor 4.0, memory_min_mb 2048 by default
    monkeypatch.setattr(ceilings.hardening, "memory_bytes", lambda: 64 << 30)
    mib = 1 << 20
    assert ceilings.for_child(config, "a-mutant", (4, 0), 1024 * mib).memory_bytes == 4096 * mib  # 4 x the peak
    assert ceilings.for_child(config, "a-mutant", (4, 0), 100 * mib).memory_bytes == 2048 * mib  # the floor
    assert ceilings.for_child(config, "a-mutant", (4, 0), 8192 * mib).memory_bytes == 16384 * mib  # the share
    assert ceilings.for_child(config, "a-mutant", (2, 16), 8192 * mib).memory_bytes == 4096 * mib  # a node's slots
    assert ceilings.for_child(config, "_baseline 1/1", (4, 0), 100 * mib).memory_bytes == 16384 * mib  # harness
    assert ceilings.for_child(config, "a-mutant", (4, 0), 0).memory_bytes == 16384 * mib  # nothing measured: share
