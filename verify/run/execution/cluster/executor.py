"""`--executor ray`, the side in `dflash`: every job a Ray task, run by a driver process this side watches.

The cluster connection lives in a process of its own (`verify.run.execution.cluster.driver`), started when the executor
is entered and fed the jobs over a pipe; its results come back the same way, each handed on as it arrives
(so the phases cache every verdict as it is reached). Ray ends a driver whose node goes away by ending its
whole process: here that is seen as the pipe closing, and `run` raises `ExecutorLost` naming the cause (the
driver's exit status and the last lines it wrote), which ends the run with a partial report and exit code 4;
the next run resumes from the cache. A preflight refusal (a node that differs, or cannot confine) comes back
as a `ClusterError` (exit code 2). On an interrupt the pipe to the driver is closed: it force-cancels every
task still out, and this side waits for it to end before the interrupt propagates. Imports no Ray: only the
driver process does.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import IO, Any

import verify
from verify.config.settings import ProjectConfig
from verify.run.execution.jobs import ExecutorLost, Job, JobResult
from verify.sandbox.confine import switched_off

__all__ = ["RayExecutor"]

_POLL_S = 0.1
_END_WAIT_S = 60.0  # for the driver to cancel its tasks and disconnect, once told to stop
# What Ray writes when the driver's node goes away: the first of these lines name the cause.
_CAUSES = ("plasma store", "marked dead", "raylet died", "Raylet", "LocalRayletDied")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_RAY_PREFIX = re.compile(r"^(\(raylet\)\s*|\[[0-9 :,.-]+[A-Z] \d+ \d+\] \S+:\d+: )")


class RayExecutor:
    def __init__(self, config: ProjectConfig, address: str | None = None) -> None:
        self.config = config
        self.address = address
        self._process: subprocess.Popen[bytes] | None = None
        self._requests: Connection | None = None
        self._replies: Connection | None = None
        self._log: IO[bytes] | None = None
        self._capacity = 1
        self._nodes: tuple[tuple[str, str], ...] = ()

    def __enter__(self) -> RayExecutor:
        request_read, request_write = os.pipe()
        reply_read, reply_write = os.pipe()
        self._log = tempfile.TemporaryFile(prefix="dflash-ray-driver-")  # noqa: SIM115 (closed in __exit__)
        # The driver imports the verify this process runs (a checkout, not only what is installed), and runs from
        # a neutral folder: Ray puts the driver's working directory on every worker's sys.path, and a checkout
        # there would hide the code the workers have installed.
        here = str(Path(verify.__file__).resolve().parent.parent)
        code = (
            f"import sys; sys.path.insert(0, {here!r}); from verify.run.execution.cluster.driver import main; "
            "main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))"
        )
        command = [sys.executable, "-c", code, str(request_read), str(reply_write), str(os.getpid())]
        self._process = subprocess.Popen(
            command, pass_fds=(request_read, reply_write), stdin=subprocess.DEVNULL, stdout=self._log,
            stderr=subprocess.STDOUT, cwd=tempfile.gettempdir(), start_new_session=True,
        )  # fmt: skip
        os.close(request_read)
        os.close(reply_write)
        self._requests = Connection(request_write, readable=False)
        self._replies = Connection(reply_read, writable=False)
        try:
            self._requests.send((self.config, self.address, not switched_off()))
            kind, *payload = self._receive()
        except BaseException:
            self.__exit__()
            raise
        if kind == "refused":
            from verify.run.execution.cluster.preflight import ClusterError  # here: the rest of this side needs no Ray

            self.__exit__()
            raise ClusterError(payload[0])
        self._capacity, self._nodes = payload
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop()
        if self._log is not None:
            self._log.close()
            self._log = None

    @property
    def default_jobs(self) -> int:
        """As many jobs as the cluster's resources hold at once."""
        return self._capacity

    @property
    def nodes(self) -> tuple[tuple[str, str], ...]:
        """(node, the confinement its children get) for every node the preflight probed."""
        return self._nodes

    @property
    def ceilings(self) -> str:
        """Each node's fork executor has its own: not known here."""
        return ""

    def run(
        self, jobs: Sequence[Job], num_jobs: int, on_done: Callable[[JobResult], None] | None = None
    ) -> list[JobResult]:
        if self._requests is None:
            raise ExecutorLost("the Ray driver has already ended")
        done: dict[str, JobResult] = {}
        try:
            self._requests.send((tuple(jobs), num_jobs))
            while (reply := self._receive())[0] == "result":
                result: JobResult = reply[1]
                done[result.key] = result
                if on_done is not None:
                    on_done(result)
        except KeyboardInterrupt:
            self._stop()  # the driver cancels every task still out before it ends
            raise
        return [done[j.key] for j in jobs]

    def _receive(self) -> tuple[Any, ...]:
        """The driver's next message; ExecutorLost when it died or failed."""
        assert self._replies is not None
        while not self._replies.poll(_POLL_S):
            pass
        try:
            message: tuple[Any, ...] = self._replies.recv()
        except (EOFError, OSError):
            raise ExecutorLost(self._death()) from None
        if message[0] == "failed":
            raise ExecutorLost(f"the Ray driver failed: {message[1]}")
        return message

    def _death(self) -> str:
        """Why the driver ended: its exit status and what Ray wrote about it (a node marked dead, a lost plasma
        store), else its last line."""
        assert self._process is not None
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=10)
        code = self._process.poll()
        status = "is still running, its pipe closed" if code is None else (
            f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}")  # fmt: skip
        lines: list[str] = []
        if self._log is not None:
            self._log.seek(0)
            text = _ANSI.sub("", self._log.read().decode(errors="replace"))
            lines = [_RAY_PREFIX.sub("", line).strip() for line in text.splitlines() if line.strip()]
        causes = [line for line in lines if any(marker in line for marker in _CAUSES)]
        said = "; ".join(dict.fromkeys(line[:240] for line in (causes[:2] or lines[-1:])))
        lost = " (Ray ends a driver whose node is lost)" if causes else ""
        return f"the process holding the Ray driver {status}{lost}" + (f": {said}" if said else "")

    def _stop(self) -> None:
        """Close the driver's pipe and wait for it to end (it cancels its tasks first); kill it past the wait."""
        if self._requests is not None:
            self._requests.close()
            self._requests = None
        if self._process is not None:
            try:
                self._process.wait(timeout=_END_WAIT_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None
        if self._replies is not None:
            self._replies.close()
            self._replies = None
