"""The Ray driver, in a process of its own: the one process of a run that holds the cluster connection.

Ray ends a driver whose own node goes away (its raylet and object store: "connection to the plasma store
failed") by exiting the whole process. In the `dflash` process that would end the run with Ray's exit code,
no report and no word, so `dflash` starts this process instead (`verify.run.execution.cluster.executor` is the other
end of its two pipes) and sees its death. Here: the connection (`--ray-address`, else RAY_ADDRESS, else a
local cluster started for the run and stopped when it ends), the preflight (`preflight`: every node's
environment and confinement), the pristine project in the object store once (`tree`), and each job a Ray task
reserving `[tool.dflash] job_resources`; inside it the node's warm server forks the child and enforces the
job's budget scaled by that node's load, exactly as the fork executor does on one machine.

What the cluster suffers is not evidence. A worker or node lost mid-job is tried again (`MAX_RETRIES`
submissions more, on any node), and after those the job comes back `lost`, its gates not run, which the phases
retry once and then report as an error. Each task first tells the driver that it started: a task still out
long past its budget *since it started* is cancelled (force: its worker, server and child die) and comes back
`lost` too, and a task waiting for a free slot is never counted as late, however long it waits. When the
pipe from `dflash` closes (the run is over, interrupted, or `dflash` died) every task still out is
force-cancelled before this process ends. Jobs, results and messages travel pickled over the pipes.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import secrets
import signal
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import ray

from verify.config.settings import ProjectConfig
from verify.report.verdict import GateOutcome, Outcome
from verify.run.execution.cluster.preflight import ClusterError, check_nodes
from verify.run.execution.cluster.task import run_job
from verify.run.execution.cluster.tree import pack
from verify.run.execution.jobs import Job, JobResult, JobState

__all__ = ["Driver", "main"]

MAX_RETRIES = 3  # a worker or node lost mid-job: the job is sent again, to any node, this many times
# A task still out this long past its budget, counted from when it started on a node, is lost, not slow: its
# node's own supervisor (which scales the budget by that node's load) would have ended the child long before.
BACKSTOP_SCALE = 4.0
BACKSTOP_GRACE_S = 120.0
_WAIT_S = 0.1  # ray.wait's timeout: the pipe from dflash is read between waits
_CANCEL_WAIT_S = 30.0
_FIT_CHECK_S = 5.0  # how often queued tasks check that some node can still hold one


class _Gone(Exception):
    """The pipe from dflash closed mid-run: stop everything."""


@dataclass
class _Task:
    job: Job
    submitted: float
    tries: int = 1
    started: float | None = None  # when a node began it (its first yield); None while it waits for a slot

    @property
    def deadline(self) -> float | None:
        if self.started is None:
            return None  # waiting in the queue is not being late
        return self.started + self.job.timeout_s * BACKSTOP_SCALE + BACKSTOP_GRACE_S


def _lost(job: Job, elapsed: float, why: str) -> JobResult:
    """A job the cluster lost: each of its gates not run, so the phases retry it and never judge it."""
    outcomes = tuple(GateOutcome(g, Outcome.NOT_RUN, 0.0, "Lost", why[:200]) for g in job.gate_ids)
    return JobResult(job.key, JobState.LOST, elapsed, outcomes, why)


def _first_line(error: BaseException) -> str:
    lines = [line for line in str(error).strip().splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[-1] if lines else ''}"[:200]


class Driver:
    """The cluster side of a run: `with Driver(config, address, confine) as driver: driver.run(jobs, n, on_done)`.

    `confine` False runs every child unconfined (the run's DFLASH_CONFINE=off); True refuses a node that
    cannot confine its children."""

    def __init__(self, config: ProjectConfig, address: str | None = None, confine: bool = True) -> None:
        self.config = config
        self.address = address or os.environ.get("RAY_ADDRESS") or None
        self.confine = confine
        self.capacity = 1
        self.nodes: tuple[tuple[str, str], ...] = ()  # (node, its confinement) as the preflight found them
        self._digest = ""
        self._archive: list[Any] = []

    def __enter__(self) -> Driver:
        if self.address is None and not {"RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"} & set(os.environ):
            # A local cluster started for the run authenticates with a token, which Ray would otherwise write
            # into ~/.ray/auth_token (a file of the user's, left behind). One for this run alone, in this
            # process's environment (which the cluster's processes inherit), leaves nothing.
            os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
        try:
            ray.init(address=self.address, logging_level=logging.WARNING, log_to_driver=False,
                     include_dashboard=False if self.address is None else None, configure_logging=False)  # fmt: skip
        except (ConnectionError, RuntimeError, ValueError) as error:
            where = self.address or "a local cluster"
            raise ClusterError(f"cannot connect to the Ray cluster at {where}: {_first_line(error)}") from None
        try:
            self.nodes = check_nodes(self.config, self.confine)
            self._digest, archive = pack(self.config)
            self._archive = [ray.put(archive)]  # in a list: a task fetches it only where the tree is missing
            self.capacity = self._fit()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        ray.shutdown()  # a cluster started for the run stops with it; a given one only loses this driver

    def _holds(self) -> list[int]:
        total, need = ray.cluster_resources(), self.config.job_resources
        return [int(total.get(kind, 0.0) // amount) for kind, amount in (("CPU", need.num_cpus),
                ("GPU", need.num_gpus)) if amount > 0]  # fmt: skip

    def _fit(self) -> int:
        """How many jobs the cluster holds at once, by job_resources; refuses a cluster that holds none."""
        if min(self._holds()) < 1:
            total = ray.cluster_resources()
            raise ClusterError(
                f"no node of the Ray cluster has the resources one job reserves ({self.config.job_resources}); "
                f"cluster: { {k: v for k, v in total.items() if k in ('CPU', 'GPU')} } ([tool.dflash] job_resources)"
            )
        return min(self._holds())

    def _submit(self, job: Job) -> Any:
        need = self.config.job_resources
        # Retries are this driver's, not Ray's: each try is a fresh task that says when it starts.
        options = {"num_cpus": need.num_cpus, "num_gpus": need.num_gpus, "max_retries": 0}
        return run_job.options(**options).remote(self._digest, self._archive, self.config, job, self.confine)

    def run(
        self,
        jobs: Sequence[Job],
        num_jobs: int,
        on_done: Callable[[JobResult], None] | None = None,
        gone: Callable[[], bool] = lambda: False,
    ) -> list[JobResult]:
        """Every job as a task, up to `num_jobs` out at once; results in job order. `gone()` true ends the run:
        every task still out is cancelled and `_Gone` raised."""
        done: dict[str, JobResult] = {}
        pending: list[Job] = []
        leaders: set[str] = set()
        for job in jobs:
            if job.claims and job.claims in leaders:
                empty = JobResult(job.key, JobState.DONE, 0.0, reason="its gates ran in another job of its group")
                self._deliver(empty, done, on_done)
                continue
            if job.claims:
                leaders.add(job.claims)
            pending.append(job)
        pending.reverse()
        running: dict[Any, _Task] = {}
        checked = time.monotonic()
        try:
            while pending or running:
                while pending and len(running) < max(1, num_jobs):
                    job = pending.pop()
                    running[self._submit(job)] = _Task(job, time.monotonic())
                ready, _ = ray.wait(list(running), num_returns=1, timeout=_WAIT_S)
                for generator in ready:
                    self._step(generator, running, done, on_done)
                now = time.monotonic()
                for generator, task in list(running.items()):
                    if (deadline := task.deadline) is not None and now > deadline:
                        ray.cancel(generator, force=True)
                        del running[generator]
                        assert task.started is not None
                        why = f"no answer from its node {now - task.started:.0f}s after it started there; cancelled"
                        self._deliver(_lost(task.job, now - task.submitted, why), done, on_done)
                if now - checked > _FIT_CHECK_S:
                    checked = now
                    self._unplaceable(running, done, on_done)
                if gone():
                    raise _Gone
        finally:
            self._cancel(list(running))
        return [done[j.key] for j in jobs]

    def _step(self, generator: Any, running: dict[Any, _Task], done: dict[str, JobResult], on_done: Any) -> None:
        """The next thing a task yielded: that it started, or its result (or the error that ended it)."""
        task = running[generator]
        try:
            value = ray.get(next(generator))
        except StopIteration:  # ended without a result: nothing more will come
            value = RuntimeError("the task ended without a result")
        except ray.exceptions.RayError as error:
            value = error
        if isinstance(value, float):  # the first yield: the task runs now
            task.started = time.monotonic()
            return
        del running[generator]
        if isinstance(value, JobResult):
            self._deliver(value, done, on_done)
            return
        assert isinstance(value, BaseException)
        # The node server's own failure (a RayTaskError) is on that node for good; a worker or node that died
        # under the task is not: another try, on any node.
        if not isinstance(value, ray.exceptions.RayTaskError) and task.tries <= MAX_RETRIES:
            running[self._submit(task.job)] = _Task(task.job, task.submitted, task.tries + 1)
            return
        elapsed = time.monotonic() - task.submitted
        why = f"the cluster lost it ({_first_line(value)}" + (f", after {task.tries} tries)" if task.tries > 1 else ")")
        self._deliver(_lost(task.job, elapsed, why), done, on_done)

    def _unplaceable(self, running: dict[Any, _Task], done: dict[str, JobResult], on_done: Any) -> None:
        """Tasks still waiting for a slot when no node left can hold one job will never start: lost."""
        if min(self._holds()) >= 1:
            return
        for generator, task in list(running.items()):
            if task.started is None:
                ray.cancel(generator, force=True)
                del running[generator]
                why = "no node of the cluster left has the resources one job reserves"
                self._deliver(_lost(task.job, time.monotonic() - task.submitted, why), done, on_done)

    @staticmethod
    def _deliver(result: JobResult, done: dict[str, JobResult], on_done: Any) -> None:
        done[result.key] = result
        if on_done is not None:
            on_done(result)

    @staticmethod
    def _cancel(generators: list[Any]) -> None:
        """Force-cancel every task still out (its worker dies, and its server and child with it) and wait until
        Ray reports each ended, so that nothing of this run is left running on the cluster."""
        for generator in generators:
            with contextlib.suppress(Exception):
                ray.cancel(generator, force=True)
        if generators:
            with contextlib.suppress(Exception):
                ray.wait([g.completed() for g in generators], num_returns=len(generators), timeout=_CANCEL_WAIT_S)


def _serve(requests: Connection, replies: Connection) -> None:
    config, address, confine = requests.recv()
    try:
        driver = Driver(config, address, confine).__enter__()
    except ClusterError as error:
        replies.send(("refused", str(error)))
        return
    try:
        replies.send(("ready", driver.capacity, driver.nodes))
        while True:
            try:
                jobs, num_jobs = requests.recv()
            except EOFError:
                return  # the run is over
            driver.run(jobs, num_jobs, lambda result: replies.send(("result", result)), requests.poll)
            replies.send(("ran", None))
    except _Gone:
        return  # dflash closed the pipe mid-run (an interrupt): the tasks are cancelled
    finally:
        driver.__exit__()


def _die_with(parent: int) -> None:
    """SIGTERM when dflash dies, however it dies: its pipe closes too, but a driver busy connecting reads it only
    later (Ray ends the tasks of a driver that is gone)."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG (Linux)
    if os.getppid() != parent:  # dflash died before the request took effect
        sys.exit(1)


def main(request_fd: int, reply_fd: int, parent: int) -> None:
    _die_with(parent)
    requests, replies = Connection(request_fd, writable=False), Connection(reply_fd, readable=False)
    try:
        _serve(requests, replies)
    except BaseException as error:  # reported to dflash, which ends the run as harness trouble
        with contextlib.suppress(OSError):
            replies.send(("failed", traceback.format_exception_only(error)[-1].strip()))
        raise


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
