"""`--executor ray`, the driver side: every job a Ray task, its result back as data, harness trouble never a verdict.

Entering connects to the cluster (`--ray-address`, else RAY_ADDRESS, else a local cluster started for the run
and stopped when it ends), checks every node's environment (`preflight`), and puts the pristine project in the
object store once, content-addressed (`tree`). Each job is a task reserving `[tool.dflash] job_resources`;
inside it the node's warm server forks the child and enforces the job's budget scaled by that node's load,
exactly as the fork executor does on one machine, so a hang comes back as a timeout with its journal and is
confirmed by the phases like any other. What the cluster suffers is not evidence: a worker or node lost
mid-job is retried by Ray elsewhere (`max_retries`), and after the retries the job comes back `lost`, its
gates not run, which the phases retry once and then report as an error. A task that neither answers nor
fails long past its budget is cancelled (force: its worker, server and child die) and comes back `lost` too.
On an interrupt every running task is force-cancelled before the interrupt propagates.

Jobs that share a claims group (one run of the gates split over the workers) need a shared folder to split
it; with none assumed, the first of the group runs every gate and the others come back empty (`done`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import ray

from verify.report.verdict import GateOutcome, Outcome
from verify.run.cluster.preflight import ClusterError, check_nodes
from verify.run.cluster.task import run_job
from verify.run.cluster.tree import pack
from verify.run.jobs import Job, JobResult
from verify.run.settings import ProjectConfig

__all__ = ["RayExecutor"]

MAX_RETRIES = 3  # a worker or node lost mid-job: Ray runs the task again elsewhere, this many times
# A task still out this long past its budget is lost, not slow: its node's own supervisor (which scales the
# budget by that node's load) would have ended the child and answered long before.
_BACKSTOP_SCALE = 4.0
_BACKSTOP_GRACE_S = 120.0
_WAIT_S = 0.1  # ray.wait's timeout: an interrupt is handled between waits
_CANCEL_WAIT_S = 30.0


@dataclass
class _Task:
    job: Job
    submitted: float

    @property
    def deadline(self) -> float:
        return self.submitted + self.job.timeout_s * _BACKSTOP_SCALE + _BACKSTOP_GRACE_S


def _lost(job: Job, elapsed: float, why: str) -> JobResult:
    """A job the cluster lost: each of its gates not run, so the phases retry it and never judge it."""
    outcomes = tuple(GateOutcome(g, Outcome.NOT_RUN, 0.0, "Lost", why[:200]) for g in job.gate_ids)
    return JobResult(job.key, "lost", elapsed, outcomes, why)


def _first_line(error: BaseException) -> str:
    lines = [line for line in str(error).strip().splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[-1] if lines else ''}"[:200]


class RayExecutor:
    def __init__(self, config: ProjectConfig, address: str | None = None) -> None:
        self.config = config
        self.address = address or os.environ.get("RAY_ADDRESS") or None
        self._digest = ""
        self._archive: list[Any] = []
        self._capacity = 1

    def __enter__(self) -> RayExecutor:
        handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        cwd = os.getcwd()
        try:
            # Ray puts the driver's working directory on every worker's sys.path: from a checkout of
            # dflash-verify (or a project holding a `verify` folder) the workers would import the driver's code
            # where it exists, hiding what they have installed. From a neutral directory, they run their own.
            os.chdir(tempfile.gettempdir())
            ray.init(address=self.address, logging_level=logging.WARNING, log_to_driver=False,
                     include_dashboard=False if self.address is None else None, configure_logging=False)  # fmt: skip
        except (ConnectionError, RuntimeError, ValueError) as error:
            where = self.address or "a local cluster"
            raise ClusterError(f"cannot connect to the Ray cluster at {where}: {_first_line(error)}") from None
        finally:
            os.chdir(cwd)
            for signum, handler in handlers.items():
                signal.signal(signum, handler)  # SIGINT/SIGTERM stay the run's: it cancels tasks, then exits
        try:
            check_nodes(self.config)
            self._digest, archive = pack(self.config)
            self._archive = [ray.put(archive)]  # in a list: a task fetches it only where the tree is missing
            self._capacity = self._fit()
        except BaseException:
            ray.shutdown()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        ray.shutdown()  # a cluster started for the run stops with it; a given one only loses this driver

    def _fit(self) -> int:
        """How many jobs the cluster holds at once, by job_resources; refuses a cluster that holds none."""
        total, need = ray.cluster_resources(), self.config.job_resources
        fits = [int(total.get(kind, 0.0) // amount) for kind, amount in (("CPU", need.num_cpus),
                ("GPU", need.num_gpus)) if amount > 0]  # fmt: skip
        if min(fits) < 1:
            raise ClusterError(
                f"no node of the Ray cluster has the resources one job reserves ({need}); cluster: "
                f"{ {k: v for k, v in total.items() if k in ('CPU', 'GPU')} } ([tool.dflash] job_resources)"
            )
        return min(fits)

    @property
    def default_jobs(self) -> int:
        """As many jobs as the cluster's resources hold at once."""
        return self._capacity

    def _submit(self, job: Job) -> Any:
        need = self.config.job_resources
        options = {"num_cpus": need.num_cpus, "num_gpus": need.num_gpus, "max_retries": MAX_RETRIES}
        return run_job.options(**options).remote(self._digest, self._archive, self.config, job)

    def run(
        self, jobs: Sequence[Job], num_jobs: int, on_done: Callable[[JobResult], None] | None = None
    ) -> list[JobResult]:
        done: dict[str, JobResult] = {}
        pending: list[Job] = []
        leaders: set[str] = set()
        for job in jobs:
            if job.claims and job.claims in leaders:
                empty = JobResult(job.key, "done", 0.0, reason="its gates ran in another job of its group")
                self._deliver(empty, done, on_done)
                continue
            if job.claims:
                leaders.add(job.claims)
            pending.append(job)
        pending.reverse()
        running: dict[Any, _Task] = {}
        try:
            while pending or running:
                while pending and len(running) < max(1, num_jobs):
                    job = pending.pop()
                    running[self._submit(job)] = _Task(job, time.monotonic())
                ready, _ = ray.wait(list(running), num_returns=1, timeout=_WAIT_S)
                for ref in ready:
                    self._finish(ref, running.pop(ref), done, on_done)
                now = time.monotonic()
                for ref, task in list(running.items()):
                    if now > task.deadline:
                        ray.cancel(ref, force=True)
                        del running[ref]
                        why = f"no answer from the cluster {now - task.submitted:.0f}s after it was sent; cancelled"
                        self._deliver(_lost(task.job, now - task.submitted, why), done, on_done)
        finally:
            self._cancel(list(running))
        return [done[j.key] for j in jobs]

    def _finish(self, ref: Any, task: _Task, done: dict[str, JobResult], on_done: Any) -> None:
        elapsed = time.monotonic() - task.submitted
        try:
            result = ray.get(ref)
        except ray.exceptions.RayError as error:  # a lost worker or node after its retries, a failed server
            result = _lost(task.job, elapsed, f"the cluster lost it ({_first_line(error)})")
        self._deliver(result, done, on_done)

    @staticmethod
    def _deliver(result: JobResult, done: dict[str, JobResult], on_done: Any) -> None:
        done[result.key] = result
        if on_done is not None:
            on_done(result)

    @staticmethod
    def _cancel(refs: list[Any]) -> None:
        """Force-cancel every task still out (its worker dies, and its server and child with it) and wait until
        Ray reports each ended, so that nothing of this run is left running on the cluster."""
        for ref in refs:
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)
        if refs:
            with contextlib.suppress(Exception):
                ray.wait(refs, num_returns=len(refs), timeout=_CANCEL_WAIT_S)
