"""A warm worker: one child that configures pytest and collects every gate once, then forks a child per job.

It runs in a child its executor forked (`verify.run.execution.zygotes`), confined like any child to its own
folder, its private copy and the folder its jobs' folders are made in. It imports the project from that copy
with the original code, under coverage.py, and collects the configured gates, reaching the point where pytest
would run them. There it stops measuring and serves jobs from its socket. For each job it either answers
"cold" with a reason (the job then runs in a fresh child as before) or forks the job's child. That child is handed
to the executor itself: the worker forks a middle process, which forks the job's child and exits at once, so the
kernel gives the job's child to the nearest subreaper, the executor, which then waits for it, times it, watches
and reaps it exactly as a child it forked.

The job's child adds its own confinement (its own folder and the worker's copy), its own ceilings, streams
(pytest's capture pointed at files of its own, never the worker's: `verify.run.child.streams`) and temp dir,
swaps the mutated functions' code in (`verify.run.child.hotswap`; a mutated file not imported yet is served by
the import hook, as in a fresh child), keeps only its job's gates, in the job's order, and lets pytest run them.
It saves pytest's start-up, the project's imports and collection: about 0.1 s a child.

A job runs cold when the mutation changes code that runs at import or code that already ran, when its gates are
not all collected here, or when this worker could not be made (a collection error, gates reordered by a plugin):
what a warm child does must be what a fresh one would do. Knows nothing of verdicts.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import socket
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from verify.config.settings import ProjectConfig
from verify.config.writable import writable_paths
from verify.mutation.apply import MutantFinder
from verify.run.child import coverage, hotswap, streams
from verify.run.child.job import (
    QUIET_TRACEBACKS,
    UNCONFINED_EXIT,
    JobPaths,
    end_child,
    fresh_random_state,
    isolate,
    write_result,
)
from verify.run.child.recorder import Recorder
from verify.sandbox import hardening, namespaces, reaper
from verify.sandbox.confine import ConfineError, confine
from verify.sandbox.namespaces import NamespaceError
from verify.seeds import GATE_SEED_ENV

__all__ = ["run_zygote"]

_MESSAGE_BYTES = 1 << 22  # one job, pickled: its overrides hold whole mutated files
_REPARENT_S = 5.0  # how long a job's child waits to become its executor's child


@dataclass(frozen=True)
class _NoJob:
    """What `isolate` reads of a job, for the worker itself: its jobs' share of the cores, set before it
    collects, so a conftest that sets its own thread count is obeyed in every job the worker serves."""

    threads: int = 1
    share_bytecode: bool = False


def _matches(node_id: str, arg: str) -> bool:
    """Whether pytest, given `arg` on its command line, would run the gate `node_id`."""
    arg = arg.rstrip("/")
    return node_id == arg or any(node_id.startswith(arg + sep) for sep in ("::", "[", "/"))


class _Warm:
    """The pytest plugin of the warm worker: it records what was collected, then serves jobs instead of running."""

    def __init__(
        self, config: ProjectConfig, private: Path, sock: socket.socket, finder: MutantFinder, cov: Any, log: Path,
        executor: int, load_scale: Callable[[], float], confined: bool,
    ) -> None:  # fmt: skip
        self.confined = confined  # its executor found Landlock: a job's child that cannot confine itself runs nothing
        self.config, self.private, self.sock, self.finder, self.cov = config, private, sock, finder, cov
        self.log, self.executor, self.load_scale = log, executor, load_scale
        self.collected: list[pytest.Item] = []
        self.kept: set[str] = set()
        self._ids: list[tuple[str, pytest.Item]] = []
        self._by_file: dict[str, list[tuple[str, pytest.Item]]] = {}
        self.refused = ""
        self.job: tuple[Any, JobPaths] | None = None  # set in a job's child only
        self.recorder: Recorder | None = None
        self._live: dict[str, hotswap.Live] = {}
        self._executed: Any = None
        self._plans: dict[tuple[str, str], Any] = {}
        self._modules: dict[str, Any] = {}

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> Generator[None, None, None]:
        before = list(items)
        yield
        position = {id(item): k for k, item in enumerate(before)}
        order = [position.get(id(item), -1) for item in items]
        if order != sorted(order) or -1 in order:
            self.refused = "a plugin reorders or adds gates after collection"
        self.collected, self.kept = before, {item.nodeid for item in items}
        self._ids = [(item.nodeid, item) for item in before]  # computed once: pytest builds a node id on each ask
        self._by_file = {}
        for node_id, item in self._ids:
            self._by_file.setdefault(node_id.partition("::")[0], []).append((node_id, item))

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.refused = f"collection error in {report.nodeid or '<collection>'}"

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool | None:
        self.cov.stop()
        if streams.captures(session.config) is None:
            self.refused = "pytest's capture is not one a job's child can own"
        if self.refused or session.testsfailed:
            self.sock.send(f"fail {self.refused or 'collection failed'}".encode())
            return True
        # Nothing is imported or defined between jobs (the worker runs none of the project's code): what each job's
        # plan needs from the process is gathered once, before the first.
        files = [(getattr(m, "__file__", None), m) for m in list(sys.modules.values())]
        self._modules = {os.path.realpath(file): m for file, m in files if isinstance(file, str)}
        inside = [m.__file__ for path, m in self._modules.items() if Path(path).is_relative_to(self.private)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an object walked past may warn when asked what it is
            self._live = hotswap.live_functions(inside)
        self._executed = self.cov.get_data()
        self.sock.send(b"ready")
        while True:
            try:
                message, fds, _, _ = socket.recv_fds(self.sock, _MESSAGE_BYTES, 1)
            except OSError:
                return True
            if not message:
                return True  # the executor is done with this worker
            job, paths, limits, environment, key = pickle.loads(message)
            chosen = self._choose(job)
            if isinstance(chosen, str):
                for fd in fds:
                    os.close(fd)
                self.sock.send(f"cold {chosen}".encode())
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            said, say = os.pipe()
            middle = os.fork()
            if middle == 0:
                os.close(said)
                try:
                    child = os.fork()
                except OSError:
                    os._exit(1)
                if child == 0:  # the job's child: back into pytest, which runs its gates
                    try:
                        os.close(say)
                        self._become(session, job, paths, limits, environment, fds[0], key, *chosen)
                    except BaseException:
                        with contextlib.suppress(BaseException):
                            os.write(2, traceback.format_exc().encode())
                        os._exit(70)
                    return None
                os.write(say, f"{child}\n".encode())
                os._exit(0)  # its child is handed to the subreaper above: the executor
            os.close(say)
            for fd in fds:
                os.close(fd)
            with os.fdopen(said, "rb") as pipe:
                child_pid = pipe.readline().decode().strip()  # said before the middle exits: the executor waits
            self.sock.send(f"hot {child_pid}".encode() if child_pid else b"cold the fork failed")
            os.waitpid(middle, 0)  # once it is gone (a few ms), its child is the executor's

    def _choose(self, job: Any) -> tuple[list[pytest.Item], list[tuple[Any, str, str, tuple[hotswap.Swap, ...]]]] | str:
        """The job's gates in its order and the swaps for its mutated files, or why it must run cold."""
        items: list[pytest.Item] = []
        for arg in job.gate_ids or self.config.gates:
            # A node id names one file: only that file's gates can match it (the lookup is per job, on the path
            # every child waits on; a scan of every collected gate grew with the suite).
            file, has_file, _ = arg.partition("::")
            candidates = self._by_file.get(file, ()) if has_file else self._ids
            matched = [item for node_id, item in candidates if _matches(node_id, arg)]
            if not matched:
                return f"not collected here: {arg}"
            items += [item for item in matched if item.nodeid in self.kept]
        if len({id(item) for item in items}) != len(items):
            return "a gate named twice"
        swaps = []
        for rel, text in job.overrides:
            path = os.path.realpath(self.private / rel)
            module = self._modules.get(path)
            if module is None:
                continue  # not imported yet: the import hook serves the mutant, as in a fresh child
            key = (path, text)
            if key not in self._plans:
                self._plans[key] = self._plan(module, path, text)
            if isinstance(self._plans[key], str):
                return f"{rel}: {self._plans[key]}"
            swaps.append((module, path, text, self._plans[key]))
        return items, swaps

    def _plan(self, module: Any, path: str, text: str) -> tuple[hotswap.Swap, ...] | str:
        executed = self._executed.lines(path) if self._executed is not None else None
        live = self._live.get(module.__file__)
        if executed is None or live is None:
            return "its file was not measured"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return hotswap.plan(module, Path(path).read_text(), text, executed, live)
        except Exception as error:  # a plan not made is a job run cold, never a worker lost
            return f"no plan: {type(error).__name__}: {error}"

    def _become(
        self, session: pytest.Session, job: Any, paths: JobPaths, limits: Any, environment: Any, confined_fd: int,
        key: bytes, items: list[pytest.Item], swaps: list[tuple[Any, str, str, tuple[hotswap.Swap, ...]]],
    ) -> None:  # fmt: skip
        """The job's child, before its gates: what `verify.run.execution.fork` gives a child, then the mutant."""
        self.sock.close()
        os.setpgid(0, 0)
        deadline = time.monotonic() + _REPARENT_S
        while os.getppid() != self.executor:  # the middle process is exiting
            if time.monotonic() > deadline:
                os._exit(70)
            time.sleep(0.0005)
        hardening.die_with_parent(self.executor)
        reaper.become_subreaper()
        hardening.harden(environment, limits)
        log_fd = os.open(paths.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        # Every descriptor still on the worker's log (the streams, pytest's saved copies of them, faulthandler's)
        # now writes to this job's log, where the executor reads a death's last words.
        worker_log = os.path.realpath(self.log)  # as the kernel names an open file: every link resolved
        for name in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError, ValueError):
                if int(name) != log_fd and os.readlink(f"/proc/self/fd/{name}") == worker_log:
                    os.dup2(log_fd, int(name))
        try:
            namespaces.enter(paths.base, paths.tmp, limits.memory_bytes)  # what it cannot see: before Landlock
            applied = confine([paths.base, paths.project, *writable_paths(self.config.writable)])
            if self.confined and not applied.active:
                raise ConfineError("its worker was confined, this child got none")
            os.write(confined_fd, b"1")
        except (ConfineError, NamespaceError) as error:
            sys.stderr.write(f"not confined, so no gate ran: {error}\n")
            os._exit(UNCONFINED_EXIT)
        finally:
            os.close(confined_fd)
        paths.tmp.mkdir(exist_ok=True)  # made already where it has a private tmpfs
        os.environ["TMPDIR"] = str(paths.tmp)
        tempfile.tempdir = str(paths.tmp)
        fresh_random_state()  # where a fresh child reseeds them too: where its gates start (`FreshStreams`)
        self.finder.overrides = {str(Path(self.private, rel).resolve()): text for rel, text in job.overrides}
        self.finder.loaded = set()
        for module, path, text, planned in swaps:
            hotswap.apply(planned, path, text)
            self.finder.adopt(module, path, text)  # its loader and spec as the hook gives them, as in a fresh child
        session.items[:] = items
        session.testscollected = len(items)
        self.job = (job, paths)
        self.recorder = Recorder(
            paths.journal, self.config.invariant_errors, None, job.force_fail, job.stop_after, None,
            dict(job.deadlines), self.load_scale, self._end, key,
        )  # fmt: skip
        self.recorder._session = session
        self.recorder.order = [item.nodeid for item in items]
        session.config.pluginmanager.register(self.recorder)
        # Its own capture files, never the worker's (registered after configure: it owns them at once).
        session.config.pluginmanager.register(streams.JobStreams(paths.streams, limits.output_bytes))

    def _end(self, exit_code: int) -> None:
        assert self.job is not None and self.recorder is not None
        write_result(self.job[1], self.private, self.finder.loaded, self.recorder, exit_code)
        end_child(0)


def run_zygote(
    config: ProjectConfig, paths: JobPaths, jobs_folder: Path, sock: socket.socket, gate_seed: int, threads: int,
    confined: bool, executor: int, load_scale: Callable[[], float],
) -> int:  # fmt: skip
    """The worker's body, in a child its executor forked; returns its exit code (a job's child never returns).
    `jobs_folder`: where the executor makes its jobs' folders; `executor`: the executor's pid."""
    # Its jobs' children take their namespaces (id maps written to /proc, mounts) before their own Landlock, which a
    # Landlocked worker would refuse them: where the kernel gives namespaces, the worker, which runs only the
    # project's own unmutated code (imports, collection) and never a mutant, is left unconfined.
    try:
        if not namespaces.probe().layers:
            applied = confine([paths.base, paths.project, jobs_folder, *writable_paths(config.writable)])
            if confined and not applied.active:
                raise ConfineError("its parent found Landlock, this worker got none")
    except ConfineError as error:
        sock.send(f"fail not confined: {error}".encode())
        return UNCONFINED_EXIT
    private = isolate(config, _NoJob(threads), paths)
    finder = MutantFinder([private / rel for rel in config.import_paths], config.source_packages, {})
    sys.meta_path.insert(0, finder)
    os.environ[GATE_SEED_ENV] = str(gate_seed)
    cov = coverage.start(private, config.source_roots)
    warm = _Warm(config, private, sock, finder, cov, paths.log, executor, load_scale, confined)
    args = [*config.gates, *config.marker_args, "-p", "no:cacheprovider", "-q", *config.pytest_args, *QUIET_TRACEBACKS]
    exit_code = int(pytest.main([*args, "--rootdir", str(private)], plugins=[warm]))
    if warm.job is not None and warm.recorder is not None:  # a job's child whose session ended another way
        write_result(warm.job[1], private, finder.loaded, warm.recorder, exit_code)
        end_child(0)
    with contextlib.suppress(OSError):
        sock.send(f"fail pytest ended with {exit_code}".encode())
    return 0
