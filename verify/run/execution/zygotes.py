"""The fork executor's warm workers (`verify.run.child.zygote`): started, handed jobs, checked and ended here.

A worker is a child of the executor that has imported the project and collected the gates once, with one gate
seed, in a private copy of its own. `take` hands it a job. It answers with the pid of the job's child, which is
by then the executor's own child (the executor is a subreaper), or with "cold": then the executor forks a
fresh child for the job, as it does for every job without a worker. Each worker serves one job at a time. Once
the job's child and everything it started are over, `give_back` checks the worker's copy: a worker whose copy
changed is ended, since the next job must start from the pristine tree.

Workers are started for the seed most of a batch's jobs carry, one per slot, and run only on the CPU (on a GPU
a worker's CUDA state cannot be shared across a fork). `DFLASH_WARM=off` turns them off, and every job then runs
in a fresh child. Knows nothing of mutations or verdicts.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import shutil
import signal
import socket
import sys
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from verify.compat import StrEnum
from verify.config.settings import ProjectConfig
from verify.run.child.job import JobPaths
from verify.run.child.zygote import run_zygote
from verify.run.execution.ceilings import threads_per_child
from verify.run.execution.devices import child_environment
from verify.run.execution.jobs import Job
from verify.sandbox import cgroups, hardening
from verify.sandbox.copies import CopyPool
from verify.sandbox.inventory import Snapshot, diff, snapshot

__all__ = ["SWITCH", "Zygotes"]

SWITCH = "DFLASH_WARM"  # "off": every job in a fresh child
_REPLY_S = 10.0  # a worker answers a job within this, or is ended and the job runs cold
_MAX_MESSAGE = 100_000  # a larger job (a whole tree served) runs cold: one datagram carries a job
_MAX_STARTS = 8  # workers started over an executor's life: past this, the rest of the jobs run cold
_JOBS_PER_START = 8  # a worker saves ~0.08 s a job and costs ~0.4 s to start


class _WorkerState(StrEnum):
    STARTING = "starting"  # forked, importing the project and collecting its gates
    READY = "ready"  # said so, and waiting for a job
    BUSY = "busy"  # serving a job


@dataclass
class _Worker:
    pid: int
    sock: socket.socket
    seed: int
    copy: Path
    base: Path
    state: _WorkerState = _WorkerState.STARTING
    threads: int = 1  # torch's threads, set before it collects (a conftest may set its own): its jobs' share
    taken: Snapshot | None = None  # its copy once it was ready


class Zygotes:
    def __init__(
        self, config: ProjectConfig, folder: Path, copies: CopyPool, confined: bool, load_scale: Callable[[], float]
    ) -> None:
        self.config, self.folder, self.copies = config, folder, copies
        self.confined, self.load_scale = confined, load_scale
        self.enabled = config.device != "cuda" and os.environ.get(SWITCH, "").lower() != "off"
        self.workers: list[_Worker] = []
        self.refused = ""  # why no worker can serve this project (a collection error, a reordering plugin)
        self.served = self.cold = 0  # jobs each way (figures for tests and benchmarks)
        self.why_cold: list[str] = []  # each job a worker sent back cold, and why
        self._count = 0
        self._first_batch = True
        self._deferred: tuple[int, int, Collection[int]] | None = None

    def pids(self) -> set[int]:
        return {w.pid for w in self.workers}

    def fds(self) -> list[int]:
        """The workers' sockets: a forked child closes them, none of its business."""
        return [w.sock.fileno() for w in self.workers]

    def eligible(self, job: Job) -> bool:
        return self.enabled and not self.refused and not (job.measure_coverage or job.claims or job.share_bytecode)

    def want(self, jobs: Sequence[Job], count: int, close_fds: Collection[int]) -> None:
        """Workers for a batch of `jobs` run `count` at a time: for the seed most of its jobs carry, when they are
        enough to repay a worker's start (~0.4 s of a core each); for the seed of the executor's first batch,
        whatever it holds, since the jobs that follow a run's baseline carry its seed."""
        if not self.enabled or self.refused or not jobs:
            return
        seeds = [job.gate_seed for job in jobs if self.eligible(job)]
        seed = max(set(seeds), key=seeds.count) if seeds else jobs[0].gate_seed
        first, self._first_batch = self._first_batch, False
        if first and not seeds:
            # A baseline's batch compiles the bytecode later children load: workers started after it is adopted
            # (`pristine_changed`) start in half the time (~0.2 s against ~0.4 s), with every module compiled.
            self._deferred = (seed, count, close_fds)
        elif first or seeds.count(seed) >= _JOBS_PER_START * count:
            self._deferred = None
            self._ensure(seed, count, close_fds)

    def pristine_changed(self) -> None:
        """The pristine tree gained the bytecode of an unmutated run: the workers a first batch wants start now."""
        if self._deferred is not None:
            self._ensure(*self._deferred)
            self._deferred = None

    def _ensure(self, seed: int, count: int, close_fds: Collection[int]) -> None:
        threads = threads_per_child(count)  # what the executor gives each of `count` jobs (`Job.threads`)
        stale = [w for w in self.workers if (w.seed, w.threads) != (seed, threads)]
        for worker in [w for w in stale if w.state is not _WorkerState.BUSY]:
            self._end(worker)
        while sum((w.seed, w.threads) == (seed, threads) for w in self.workers) < max(1, count):
            if self._count >= _MAX_STARTS:
                break
            self._start(seed, threads, close_fds)

    def _start(self, seed: int, threads: int, close_fds: Collection[int]) -> None:
        self._count += 1
        base = self.folder / f"w{self._count}"
        paths = JobPaths(base, self.copies.take())
        (base / "jobs").mkdir(parents=True)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        environment, parent = child_environment(self.config.device), os.getpid()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the worker: never returns into the executor's code

            def worker() -> int:
                ours.close()
                for fd in [*close_fds, *self.fds()]:
                    with contextlib.suppress(OSError):
                        os.close(fd)
                hardening.enter(parent, environment, hardening.Ceilings(), paths.log)
                return run_zygote(
                    self.config, paths, base / "jobs", theirs, seed, threads, self.confined, parent, self.load_scale
                )

            hardening.leave(worker)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.setpgid(pid, pid)
        theirs.close()
        self.workers.append(_Worker(pid, ours, seed, paths.project, base, threads=threads))

    def _poll(self, worker: _Worker) -> None:
        """A starting worker that has said whether it is ready becomes ready or ends."""
        if worker.state is not _WorkerState.STARTING or not select.select([worker.sock], [], [], 0)[0]:
            return
        with contextlib.suppress(OSError):
            said = worker.sock.recv(4096).decode(errors="replace")
            if said == "ready":
                worker.state, worker.taken = _WorkerState.READY, snapshot(worker.copy)
                return
            if said.startswith("fail "):  # the project itself: no worker will do better
                self.refused = said.removeprefix("fail ")
        self._end(worker)

    def ready(self, within_s: float) -> int:
        """The workers ready to serve, once every starting one has answered or `within_s` has passed."""
        deadline = time.monotonic() + within_s
        while any(w.state is _WorkerState.STARTING for w in self.workers) and time.monotonic() < deadline:
            starting = [w.sock for w in self.workers if w.state is _WorkerState.STARTING]
            select.select(starting, [], [], max(0.0, deadline - time.monotonic()))
            for worker in list(self.workers):
                self._poll(worker)
        return sum(w.state is _WorkerState.READY for w in self.workers)

    def take(
        self, job: Job, limits: hardening.Ceilings, key: bytes = b"", group: cgroups.Group | None = None
    ) -> tuple[int, JobPaths, int, int] | None:
        """(the job's child's pid, its paths, the read end of its "confined" pipe, its worker's pid), or None:
        run it cold. `key` seals the job's journal (`verify.run.child.journal`). With a cgroup, the worker is in it
        while it forks the job's child, so the child is born there (a confined worker could not move it) and the
        worker goes back once it has answered."""
        if not self.eligible(job):
            return None
        for starting in list(self.workers):
            self._poll(starting)
        kind = (job.gate_seed, job.threads)
        ready = [w for w in self.workers if w.state is _WorkerState.READY and (w.seed, w.threads) == kind]
        worker = ready[0] if ready else None
        message = b""
        if worker is not None:
            self._count += 1
            paths = JobPaths(worker.base / "jobs" / f"{self._count}", worker.copy)
            environment = child_environment(self.config.device)
            message = pickle.dumps((job, paths, limits, environment, key))
        if worker is None or len(message) > _MAX_MESSAGE:
            self.cold += 1
            return None
        paths.base.mkdir()
        confined_read, confined_write = os.pipe()
        reply = ""
        try:
            if group is not None:
                group.join(worker.pid)
            socket.send_fds(worker.sock, [message], [confined_write])
            if select.select([worker.sock], [], [], _REPLY_S)[0]:
                reply = worker.sock.recv(4096).decode(errors="replace")
        except OSError:
            reply = ""
        finally:
            os.close(confined_write)
            if group is not None:
                group.leave(worker.pid)
        if reply.startswith("hot "):
            worker.state = _WorkerState.BUSY
            self.served += 1
            return int(reply.removeprefix("hot ")), paths, confined_read, worker.pid
        os.close(confined_read)
        shutil.rmtree(paths.base, ignore_errors=True)
        self.why_cold.append(f"{job.key}: {reply.removeprefix('cold ') or 'no answer'}")
        if not reply.startswith("cold "):
            self._end(worker)  # it died or hangs: the job runs cold, later ones get another worker
        self.cold += 1
        return None

    def give_back(self, pid: int, over: bool) -> None:
        """The job its worker `pid` served is over (`over`: nothing it started is left): the worker serves again
        if its copy is exactly as it was when it became ready."""
        found = [w for w in self.workers if w.pid == pid]
        if not found:
            return
        worker = found[0]
        if over and worker.taken is not None and not diff(worker.taken, snapshot(worker.copy)):
            worker.state = _WorkerState.READY
        else:
            self._end(worker)

    def _end(self, worker: _Worker) -> None:
        with contextlib.suppress(OSError):
            worker.sock.close()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(worker.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(worker.pid, 0)
        self.workers.remove(worker)
        self.copies.give_back(worker.copy, reusable=False)
        shutil.rmtree(worker.base, ignore_errors=True)

    def close(self) -> None:
        for worker in list(self.workers):
            self._end(worker)
