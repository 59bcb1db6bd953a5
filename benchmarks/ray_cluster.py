"""A real two-node Ray cluster on this machine, on 127.0.0.1 alone, for the tests and `make bench`.

Ray's processes connect through the machine's own interface address even when told 127.0.0.1; inside a fresh
network namespace, where only the loopback exists, the same cluster runs on 127.0.0.1 alone. So the cluster
runs in namespaces of its own (`unshare --net --pid`: its end ends every process it started, with no search
by name), and every command that talks to it joins its network namespace (`nsenter --net`). Root only.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["ADDRESS", "LocalCluster"]

ADDRESS = "127.0.0.1:6379"
_SCRIPT = Path(__file__).with_name("ray_cluster.sh")
_NO_LANDLOCK = Path(__file__).with_name("no_landlock.py")
_START_TIMEOUT_S = 180.0


class LocalCluster:
    """`with LocalCluster() as cluster:` two nodes of one CPU each; `cluster.command(argv)` runs inside.
    `LocalCluster(landlock_on_second=False)`: the second node's kernel refuses Landlock (benchmarks/no_landlock.py)."""

    def __init__(self, landlock_on_second: bool = True) -> None:
        self._wrapper = [] if landlock_on_second else [sys.executable, str(_NO_LANDLOCK)]
        self._process: subprocess.Popen[str] | None = None
        self._temp = ""
        self.namespace_pid = 0  # the script's pid: its network namespace is the cluster's

    def __enter__(self) -> LocalCluster:
        for tool in ("unshare", "nsenter", "ip"):
            if shutil.which(tool) is None:
                raise RuntimeError(f"the local Ray cluster needs `{tool}` (util-linux, iproute2)")
        self._temp = tempfile.mkdtemp(prefix="dflash-ray-")
        bin_dir = str(Path(sys.executable).parent)
        command = ["unshare", "--net", "--pid", "--fork", "--mount-proc", "bash", str(_SCRIPT), bin_dir, self._temp,
                   *self._wrapper]  # fmt: skip
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self._process.stdout is not None
        ready, _, _ = select.select([self._process.stdout], [], [], _START_TIMEOUT_S)
        line = self._process.stdout.readline() if ready else ""
        if line.strip() != "READY":
            logs = "".join(p.read_text() for p in Path(self._temp).parent.glob(Path(self._temp).name + ".*.log"))
            self.__exit__()
            raise RuntimeError(f"the local Ray cluster did not start: {line!r}\n{logs[-2000:]}")
        children = Path(f"/proc/{self._process.pid}/task/{self._process.pid}/children").read_text().split()
        self.namespace_pid = int(children[0])
        return self

    def command(self, argv: list[str]) -> list[str]:
        """`argv` run inside the cluster's network namespace (the same process: nsenter and env exec it), with the
        cluster's authentication mode (none)."""
        return ["nsenter", "--target", str(self.namespace_pid), "--net", "--", "env", "RAY_AUTH_MODE=disabled", *argv]

    def __exit__(self, *exc: object) -> None:
        if self._process is not None:
            if self._process.stdin is not None:
                self._process.stdin.close()  # the script stops Ray and ends
            try:
                self._process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                if self.namespace_pid:  # the namespace's init: its death kills every process in it
                    os.kill(self.namespace_pid, signal.SIGKILL)
                self._process.kill()
                self._process.wait()
            self._process = None
        shutil.rmtree(self._temp, ignore_errors=True)
        for log in Path(self._temp).parent.glob(Path(self._temp).name + ".*.log"):
            log.unlink()


def wait_for(predicate, timeout_s: float, poll_s: float = 0.05):  # type: ignore[no-untyped-def]
    """Poll `predicate` until it returns something truthy (returned) or `timeout_s` passes (None)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(poll_s)
    return None
