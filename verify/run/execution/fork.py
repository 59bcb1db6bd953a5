"""The warm-parent fork executor: one forked child per job, each in its own fresh copy of the project.

The parent copies the project's source roots, gates, conftest files and pytest config once into a pristine
private tree, imports the preload modules (torch) and pytest, and never imports the project's own modules.
Each child (`verify.run.child.job`) works in a copy of that tree identical to it, made for it or left unchanged
by an earlier child (`verify.sandbox.copies`), and journals its gates as they finish; it starts
hardened (`verify.sandbox.hardening`). A job a warm worker can serve (`verify.run.execution.zygotes`) gets its
child from it instead, already past pytest's start-up and collection; that child is this parent's child too,
watched, ended and reaped as one forked here. The parent keeps up to N children alive, ends one past its budget (scaled
by the machine's load less the job's own, at most `max_job_s`) or its current gate's deadline however it treats
signals (`verify.run.execution.overtime`), or past a ceiling (`verify.run.execution.ceilings`), ends everything a job
started however it ended (the parent is the subreaper of what a child leaves), and turns what a child left
behind into one outcome per gate: what finished, what was running when it hung or died, and what never ran.
On SIGINT or SIGTERM every child is killed and the finished results are returned. With `device = "cuda"`
each child gets its own GPUs (`verify.run.execution.devices`), and a parent that initialised CUDA is refused before any
child starts. Children die with the parent, even a SIGKILLed one. It is one `verify.run.execution.jobs.JobExecutor`;
the Ray executor runs it on each worker node. It knows nothing of mutations or verdicts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import importlib
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verify.config.project import project_files
from verify.config.settings import ProjectConfig
from verify.run.child import integrity
from verify.run.child.job import UNCONFINED_EXIT, JobPaths, end_child, prime, run_child, warm_pytest
from verify.run.child.journal import new_key
from verify.run.execution import ceilings, exits
from verify.run.execution.child_result import collect
from verify.run.execution.devices import DevicePool, check_cuda_untouched, child_environment, visible_devices
from verify.run.execution.jobs import Job, JobResult, JobState
from verify.run.execution.overtime import GateClock, job_budget
from verify.run.execution.zygotes import Zygotes
from verify.sandbox import cgroups, hardening, namespaces, reaper, scratch, shm
from verify.sandbox.confine import probe
from verify.sandbox.copies import CopyPool
from verify.sandbox.private_copy import adopt_bytecode, compile_sources, copy_files

__all__ = ["Executor", "Job", "JobResult"]

_POLL_S = 0.01  # the longest the loop waits for a child's exit before it reaps and watches again
_LOAD_SAMPLE_S = 0.5
_WATCH_S = 0.05  # how often each child's processes are counted against its ceiling
_LEFTOVERS_S = 5.0  # to end what a finished job left behind, however deep
_HANDOVER_S = 5.0  # a warm worker's job child becomes this parent's child within this, or counts as dead


@dataclass
class _Running:
    job: Job
    paths: JobPaths
    started: float
    scales: list[float]
    gpus: int = -1  # the DevicePool group it holds (-1: none)
    ceilings: hardening.Ceilings = hardening.Ceilings()
    confined_fd: int = -1  # the child writes here once it is confined, before any gate: closed unwritten if not
    pidfd: int = -1  # readable once the child has exited (-1: this system has no pidfd)
    worker: int = 0  # the warm worker that forked it (`verify.run.execution.zygotes`); 0: forked here
    breach: tuple[str, str] = ("", "")  # (exc_type, why) when the parent ended it past a ceiling
    group: cgroups.Group | None = None  # its cgroup, where the kernel enforces its ceilings (None: polled only)
    key: bytes = b""  # its journal's seal (`verify.run.child.journal`)
    clock: GateClock | None = None  # its current gate's deadline, kept here
    max_s: float = 0.0  # [tool.dflash] max_job_s for a mutant's job (0: no cap)
    overdue: str = ""  # why the parent ended it past its current gate's deadline or max_job_s

    @property
    def budget_s(self) -> float:
        return job_budget(self.job.timeout_s, sum(self.scales) / len(self.scales), self.max_s)


class Executor:
    """Use as a context manager: the private copies live exactly as long as the `with` block."""

    def __init__(self, config: ProjectConfig, slots: int = 0) -> None:
        """`slots`: children this machine may run at once across every executor on it (a Ray node's workers
        each hold one); the memory ceiling divides the machine by it, or by the run's jobs if more."""
        self.config = config
        self._slots = slots
        self._peak = 0  # the most memory an unmutated child of this executor took (peak RSS)
        self._keep, self._was_subreaper = set[int](), False
        self.pristine = Path()
        self.copies = CopyPool(Path(), Path())
        self._tmp = ""
        self._count = 0
        self._devices: tuple[str, ...] = visible_devices() if config.device == "cuda" else ()
        if config.device == "cuda":
            DevicePool(self._devices, 1)  # no GPU visible: refused here, before anything is copied or forked
        self._pool: DevicePool | None = None
        self._confined = False  # Landlock found here: then a child that cannot confine itself runs nothing
        self._leftovers = shm.Leftovers(not namespaces.probe().has("mount"))  # in the machine's /dev/shm, if theirs
        self._said: set[int] = set()  # the read ends of the running children's "confined" pipes
        # Each job whose child ran no gate for want of confinement ("key: why"), tried once more at once: no gate
        # ran, so a second child is the same job (a transient refusal, a fork at a loaded machine's limit).
        self.unconfined: list[str] = []
        self._again: list[Job] = []
        self._tried_again: set[str] = set()  # this run's jobs tried once more
        self.warm = Zygotes(config, Path(), self.copies, False, ceilings.load_scale)
        self.groups = cgroups.Groups(cgroups.Layer(why="not started"))

    @property
    def nodes(self) -> tuple[tuple[str, str], ...]:
        """No nodes: the children run on this machine, under the run's own confinement."""
        return ()

    @property
    def ceilings(self) -> str:
        """Which layer enforces the children's ceilings: the kernel's cgroups, or the parent's polling alone."""
        return self.groups.layer.describe()

    @property
    def default_jobs(self) -> int:
        """One child per GPU on `cuda`, else one per CPU."""
        return len(self._devices) or self.config.num_jobs

    def __enter__(self) -> Executor:
        self._confined = probe().active
        self.groups = cgroups.Groups(cgroups.probe())  # the kernel's ceilings per child, where it has them
        self._tmp = str(scratch.make("dflash-verify-"))  # and those of runs killed outright, removed
        self.pristine = Path(self._tmp, "pristine").resolve()
        files = project_files(self.config)
        copy_files(self.config.root, files, self.pristine)
        compile_sources(self.pristine, [rel for rel in files if self.config.is_source(rel)])
        self.copies = CopyPool(self.pristine, Path(self._tmp, "copies"))
        for name in self.config.preload:
            importlib.import_module(name)
        if self.config.device == "cuda":
            check_cuda_untouched()  # on the CPU, children never touch CUDA, whatever the parent did
        warm_pytest(Path(self._tmp, "warm"))
        prime(self.config.root)
        integrity.prime()  # what every child's harness check compares against, taken once
        # What a child leaves behind comes back here (on a Ray node too) and is ended after every job.
        self._keep, self._was_subreaper = reaper.children(), reaper.is_subreaper()
        reaper.become_subreaper()
        self.warm = Zygotes(self.config, Path(self._tmp, "workers"), self.copies, self._confined, ceilings.load_scale)
        # Objects alive now are shared by every child: freezing them keeps each child's collections
        # from walking (and copy-on-write touching) the parent's heap, torch included.
        gc.freeze()
        return self

    def __exit__(self, *exc: object) -> None:
        self.warm.close()
        self.groups.close()
        reaper.become_subreaper(self._was_subreaper)
        gc.unfreeze()
        shutil.rmtree(self._tmp, ignore_errors=True)

    def run(
        self, jobs: Sequence[Job], num_jobs: int, on_done: Callable[[JobResult], None] | None = None
    ) -> list[JobResult]:
        """Run every job, up to `num_jobs` children at once; results in job order.

        On an interrupt (SIGINT, or SIGTERM under `signals_as_interrupts`) every running child's process
        group is killed before the interrupt propagates; `on_done` has already seen every finished job.
        """
        pending = list(reversed(jobs))
        if self.config.device == "cuda":
            self._pool = DevicePool(self._devices, num_jobs)
        running: dict[int, _Running] = {}
        done: dict[str, JobResult] = {}
        self._tried_again.clear()
        self._again.clear()  # a job an interrupted run meant to try again is not this run's
        last_sample = last_watch = 0.0
        self.warm.want(jobs, num_jobs, self._said)
        try:
            while pending or running:
                while pending and len(running) < max(1, num_jobs):
                    job = dataclasses.replace(pending.pop(), threads=ceilings.threads_per_child(num_jobs))
                    gpus = self._pool.acquire() if self._pool is not None else -1
                    limits = ceilings.for_child(self.config, job.key, (num_jobs, self._slots), self._peak)
                    devices = self._pool.devices(gpus) if self._pool is not None else ()
                    key = new_key()
                    group = self.groups.make(limits.memory_bytes, limits.processes)
                    self._leftovers.start(job.key)
                    hot = self.warm.take(job, limits, key, group) if gpus < 0 else None
                    pid, paths, said, worker = hot or (*self._spawn(job, devices, limits, key, group), 0)
                    self._said.add(said)
                    started, scales = time.monotonic(), [ceilings.load_scale()]
                    running[pid] = _Running(
                        job, paths, started, scales, gpus, limits, said, exits.pidfd(pid), worker, group=group
                    )
                    clock = GateClock(paths.journal, dict(job.deadlines), key) if job.deadlines else None
                    running[pid].key, running[pid].clock = key, clock
                    running[pid].max_s = 0.0 if ceilings.harness_job(job.key) else self.config.max_job_s
                if time.monotonic() - last_watch > _WATCH_S:
                    last_watch = time.monotonic()
                    sample = last_watch - last_sample > _LOAD_SAMPLE_S
                    last_sample = last_watch if sample else last_sample
                    for pid, entry in running.items():  # its ceilings (ended past one), the load less its own
                        processes = reaper.tree(pid)[namespaces.helpers() :]  # the job's, not its namespace's keepers
                        if not entry.breach[0]:
                            streams, group = entry.paths.streams, entry.group
                            entry.breach = ceilings.check(pid, processes, entry.ceilings, sample, streams, group)
                        if sample:
                            entry.scales.append(ceilings.load_scale(own=reaper.running_tasks(processes)))
                        if not entry.breach[0] and not entry.overdue and entry.clock is not None:
                            entry.overdue = entry.clock.overdue(max(entry.scales))  # SIGKILL: it cannot block it
                            if entry.overdue:
                                reaper.end_tree(pid)
                if not self._reap(running, done, on_done):
                    exits.wait([e.pidfd for e in running.values()], _POLL_S)
                pending += self._again  # next: the end of `pending` runs first
                self._again.clear()
        finally:
            for pid, entry in running.items():
                reaper.end_tree(pid)
                self._kill(pid)
                self._said.discard(entry.confined_fd)
                os.close(entry.confined_fd)
                exits.close(entry.pidfd)
                self.groups.release(entry.group)
                self._give_back(entry, over=False)
                self._leftovers.end(entry.job.key)
            reaper.end_children(keep=self._keep | self.warm.pids(), within_s=_LEFTOVERS_S)
            self._pool = None
        return [done[j.key] for j in jobs]

    def _reap(self, running: dict[int, _Running], done: dict[str, JobResult], on_done: Any) -> bool:
        reaped = False
        for pid, entry in list(running.items()):
            elapsed = time.monotonic() - entry.started
            try:
                finished, status, usage = os.wait4(pid, os.WNOHANG)
            except ChildProcessError:  # a warm worker's job child, not yet handed over (its middle is exiting)
                if entry.worker and elapsed <= _HANDOVER_S:
                    continue
                finished, status, usage = pid, 70 << 8, None  # never handed over: harness trouble, retried
            if not finished and elapsed <= entry.budget_s:
                continue
            if not finished:
                reaper.end_tree(pid)  # past its budget: it and everything beneath it, while it is still ours
                if entry.max_s and not entry.overdue and entry.budget_s >= entry.max_s:  # the cap, not the budget
                    entry.overdue = f"still running after {elapsed:.1f}s, past max_job_s = {entry.max_s:g}s"
            self._kill(pid)  # whatever it left running in its group dies too
            # Said through a pipe whose only write end the child closed before any of the mutant's code ran, so no
            # mutant can claim it (an exit code could be forged by one).
            self._said.discard(entry.confined_fd)
            with os.fdopen(entry.confined_fd, "rb") as said:
                confined = said.read(1) == b"1"
            del running[pid]
            exits.close(entry.pidfd)
            # What the job started outside its group came back here: it ends before another job's window opens.
            # Over once nothing of the job's is left to touch its copy: end_children names what outlived it.
            keep = self._keep | set(running) | self.warm.pids()
            over = not reaper.has_strays(keep) or not reaper.end_children(keep=keep, within_s=_LEFTOVERS_S)
            # Its peak resident memory: a fork's counts only the pages it touched, so this is what it took.
            peak = usage.ru_maxrss * 1024 if finished and usage is not None else 0
            exit_code = os.waitstatus_to_exitcode(status) if finished else None
            if not entry.breach[0]:  # the kernel's word: a kill at its memory limit, a fork refused at its task limit
                entry.breach = ceilings.kernel(entry.group, entry.ceilings)
            self.groups.release(entry.group)
            result = collect(
                entry.job, entry.paths, entry.breach, entry.ceilings, entry.budget_s, exit_code, elapsed, peak,
                confined or not self._confined, entry.overdue, entry.key,
            )  # fmt: skip
            if left := self._leftovers.end(entry.job.key):  # named in its result
                result = dataclasses.replace(result, reason="; ".join(filter(None, (result.reason, left))))
            if ceilings.harness_job(entry.job.key) and result.state == JobState.DONE:
                self._peak = max(self._peak, peak)
            if self._pool is not None and entry.gpus >= 0:
                self._pool.release(entry.gpus)
            # Never a mutant's copy (one with overrides): only an unmutated child's bytecode is adopted.
            if entry.job.share_bytecode and result.state == JobState.DONE and not entry.job.overrides:
                if adopt_bytecode(entry.paths.project, self.pristine):  # may hold any file: never taken
                    self.copies.pristine_changed()  # the copies made before lack what it now holds
                    self.warm.pristine_changed()
            self._give_back(entry, over)
            if result.state == JobState.UNCONFINED and entry.job.key not in self._tried_again:
                self._tried_again.add(entry.job.key)
                self.unconfined.append(f"{entry.job.key}: {result.reason}")
                self._again.append(entry.job)
                reaped = True
                continue
            done[entry.job.key] = result
            reaped = True
            if on_done is not None:
                on_done(result)
        return reaped

    def _give_back(self, entry: _Running, over: bool) -> None:
        """A finished job's copy (or its worker's) serves again if nothing of the job is left and it is unchanged."""
        if entry.worker:
            self.warm.give_back(entry.worker, over)
        else:
            self.copies.give_back(entry.paths.project, reusable=over)
        shutil.rmtree(entry.paths.base, ignore_errors=True)

    @staticmethod
    def _kill(pid: int) -> None:
        # The child leads its own process group, so anything it spawned dies with it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)

    def _spawn(
        self, job: Job, gpus: tuple[str, ...], limits: hardening.Ceilings, key: bytes, group: cgroups.Group | None
    ) -> tuple[int, JobPaths, int]:
        self._count += 1
        paths = JobPaths(Path(self._tmp, "jobs", f"{self._count}"), self.copies.take())
        paths.base.mkdir(parents=True)
        claims = Path(self._tmp, "claims", job.claims) if job.claims else None
        if claims is not None:
            claims.mkdir(parents=True, exist_ok=True)
        environment = child_environment(self.config.device, gpus)
        sys.stdout.flush()
        sys.stderr.flush()
        parent = os.getpid()
        confined_read, confined_write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns into the parent's code

            def child() -> int:
                if group is not None:
                    group.join()  # first: everything it allocates or starts is the kernel's to bound
                for fd in (confined_read, *self._said, *self.warm.fds()):  # a sibling's is none of its business
                    os.close(fd)
                # Before the project's code: no secret of the harness, no terminal, the ceilings, the log.
                hardening.enter(parent, environment, limits, paths.log)
                reaper.become_subreaper()  # what the job starts comes back here when its parent dies
                if not namespaces.entered(paths.base, paths.tmp, limits.memory_bytes):  # right before Landlock
                    return UNCONFINED_EXIT  # refused a layer the probe found: it runs no gate
                exit_code = run_child(
                    self.config, job, paths, claims, self._confined, confined_write, ceilings.load_scale, key
                )
                end_child(exit_code)  # the job is over: what it started ends with it, and so does this process

            hardening.leave(child)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.setpgid(pid, pid)  # both sides set it, so a kill right after fork cannot miss
        os.close(confined_write)
        return pid, paths, confined_read
