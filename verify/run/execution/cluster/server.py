"""The fresh process a Ray worker runs its jobs in: a warm fork executor over the node's unpacked tree.

A Ray worker process holds gRPC threads and Ray's own state: forking a child from it is unsafe, and a child
confined or crashed inside it would take the worker with it. So a worker starts this server once
(`python -m verify.run.execution.cluster.server`, a clean single-threaded process) and keeps it across its tasks: the
server imports the preload modules and pytest once, then runs each job it is sent in a forked child of its
own (`verify.run.execution.fork.Executor`, with the node's load scaling the budget exactly as on one machine) and
sends the `JobResult` back. The server and its children die with the worker (PR_SET_PDEATHSIG), so a worker
killed or cancelled leaves nothing running. The run's confinement travels with the config: on, a node that
cannot confine its children (no Landlock there, a node the preflight never saw) fails before any child
starts, so no mutant runs unconfined under a report that says confined; off (DFLASH_CONFINE=off on the
driver), every child runs unconfined. Job and result travel pickled over two pipes. Knows nothing of Ray;
`NodeServer` is the worker's handle on it.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import platform
import signal
import subprocess
import sys
import traceback
from multiprocessing.connection import Connection
from pathlib import Path

from verify.config.settings import ProjectConfig
from verify.run.execution.jobs import Job, JobResult
from verify.sandbox.hardening import clean_environment

__all__ = ["NodeServer", "ServerError"]


class ServerError(Exception):
    """The node's server could not start or died: harness trouble on that node, never a verdict."""


def _die_with_worker() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG (Linux)


class NodeServer:
    """A running server for one (config, tree); `run` sends one job and waits for its result."""

    def __init__(self, config: ProjectConfig, tree: Path, confine: bool = True) -> None:
        job_read, self._job_write = os.pipe()
        self._result_read, result_write = os.pipe()
        command = [sys.executable, "-m", "verify.run.execution.cluster.server", str(job_read), str(result_write)]
        # Started by exec with the environment its children get: none of Ray's variables (its auth token) nor any
        # other secret is in the block its forked children inherit (verify.sandbox.secrets).
        self._process = subprocess.Popen(
            command, pass_fds=(job_read, result_write), preexec_fn=_die_with_worker, stdin=subprocess.DEVNULL,
            env=clean_environment(os.environ),
        )  # fmt: skip
        os.close(job_read)
        os.close(result_write)
        self._jobs = Connection(self._job_write, readable=False)
        self._results = Connection(self._result_read, writable=False)
        # On the node the unpacked tree is the project: the config's paths resolve there.
        self._jobs.send((dataclasses.replace(config, root=tree), confine))
        self._receive()  # "ready": the warm parent is set up

    @property
    def alive(self) -> bool:
        return self._process.poll() is None

    def _receive(self) -> object:
        try:
            kind, payload = self._results.recv()
        except (EOFError, OSError):
            code = self._process.wait()
            raise ServerError(f"the node's dflash server exited with code {code}") from None
        if kind == "error":
            raise ServerError(str(payload))
        return payload

    def run(self, job: Job) -> JobResult:
        self._jobs.send(job)
        result = self._receive()
        assert isinstance(result, JobResult)
        return result

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._jobs.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=10)
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self._results.close()


def _serve(jobs: Connection, results: Connection) -> None:
    from verify.run.execution.fork import Executor  # here, not above: the worker side never needs it
    from verify.sandbox.confine import SWITCH, probe

    config, confine = jobs.recv()
    if not confine:
        os.environ[SWITCH] = "off"  # the run's choice, on the driver: this server's children run unconfined
    elif not (found := probe()).active:
        raise RuntimeError(f"node {platform.node()} cannot confine its children ({found.why.partition('; ')[0]})")
    # A node runs up to a task per CPU, each in a server like this one: each child's memory ceiling is its share.
    with Executor(config, slots=os.cpu_count() or 1) as executor:
        results.send(("ready", None))
        while True:
            try:
                job = jobs.recv()
            except EOFError:
                return  # the worker closed the pipe: its process ends
            [result] = executor.run([job], 1)
            results.send(("result", result))


def main(job_fd: int, result_fd: int) -> None:
    jobs, results = Connection(job_fd, writable=False), Connection(result_fd, readable=False)
    # The children's output goes to their own logs; the server's own (a chatty preload) must not reach the
    # worker's log as if it were Ray's.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    try:
        _serve(jobs, results)
    except BaseException as error:  # reported to the worker, which reports it to the driver as harness trouble
        with contextlib.suppress(OSError):
            last = traceback.format_exception_only(error)[-1].strip()
            results.send(("error", f"the node's dflash server failed: {last}"))
        raise


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
