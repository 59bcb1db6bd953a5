"""The warm-parent fork executor: one forked child per job, gates run by pytest in a private copy.

The parent copies the project's source roots, gates, conftest files and pytest config into a temp
dir, imports the preload modules (torch) and pytest once, and never imports the project's own
modules. Each child purges them anyway, resolves them inside the private copy through a
`MutantFinder` (serving the mutated text), runs `pytest.main` with the `Recorder` plugin and writes
its outcomes as JSON to a result file before `os._exit`. The parent keeps up to N children alive,
kills one past its timeout, and reports one that dies without a result as crashed. This module
knows nothing of mutations' meaning, verdicts or caching.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import importlib
import io
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from verify.report.verdict import GateOutcome, Outcome
from verify.run import coverage_map
from verify.run.apply import MutantFinder
from verify.run.recorder import Recorder
from verify.run.settings import ProjectConfig, project_files

__all__ = ["Executor", "Job", "JobResult"]

_POLL_S = 0.01


@dataclass(frozen=True, slots=True)
class Job:
    key: str  # unique within one `Executor.run` call
    gate_ids: tuple[str, ...]  # node ids to run; () runs every gate under the configured gate paths
    timeout_s: float
    overrides: tuple[tuple[str, str], ...] = ()  # (file relative to root, text served instead)
    measure_coverage: bool = False
    force_fail: bool = False


@dataclass(frozen=True, slots=True)
class JobResult:
    key: str
    state: str  # "done", "timeout" or "crashed"
    duration_s: float
    outcomes: tuple[GateOutcome, ...] = ()
    reason: str = ""
    pytest_exit: int = 0
    loaded: tuple[str, ...] = ()  # mutated files the child actually imported
    collect_errors: tuple[str, ...] = ()
    coverage: dict[str, Any] | None = None  # {"lines": ..., "fixtures": ...} when measured


def _copy_private(config: ProjectConfig, dest: Path) -> None:
    for rel in project_files(config):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(config.root / rel, dest / rel)


def _warm_pytest(empty: Path) -> None:
    """Run pytest once on an empty folder, so its plugins and entry points are imported before forking.

    It never sees the project: its own rootdir and ini file, and nothing to collect.
    """
    empty.mkdir()
    (empty / "pytest.ini").write_text("[pytest]\n")
    args = [str(empty), "-q", "-p", "no:cacheprovider", "-c", str(empty / "pytest.ini"), "--rootdir", str(empty)]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        pytest.main(args)


def _inside(module: Any, root: Path) -> bool:
    """A module loaded from the user's tree (a gate helper, a test module imported by an outer pytest run):
    the child must import its own copy from the private tree, never reuse the parent's. Installed packages
    are not the project's, even when the virtualenv lives inside the project folder."""
    file = getattr(module, "__file__", None)
    if not file or getattr(module, "__name__", "") == "__main__":
        return False
    path = Path(file).resolve()
    return path.is_relative_to(root.resolve()) and not path.is_relative_to(Path(sys.prefix).resolve())


class Executor:
    """Use as a context manager: the private copy lives exactly as long as the `with` block."""

    def __init__(self, config: ProjectConfig) -> None:
        self.config = config
        self.private_root = Path()
        self._tmp = ""

    def __enter__(self) -> Executor:
        self._tmp = tempfile.mkdtemp(prefix="dflash-verify-")
        self.private_root = Path(self._tmp, "project").resolve()
        _copy_private(self.config, self.private_root)
        for name in self.config.preload:
            importlib.import_module(name)
        _warm_pytest(Path(self._tmp, "warm"))
        # Objects alive now are shared by every child: freezing them keeps each child's collections
        # from walking (and copy-on-write touching) the parent's heap, torch included.
        gc.freeze()
        return self

    def __exit__(self, *exc: object) -> None:
        gc.unfreeze()
        shutil.rmtree(self._tmp, ignore_errors=True)

    def run(
        self, jobs: Sequence[Job], num_jobs: int, on_done: Callable[[JobResult], None] | None = None
    ) -> tuple[list[JobResult], bool]:
        """Run every job, up to `num_jobs` children at once; returns (results in job order, interrupted).

        On Ctrl-C the running children are killed and the finished results are returned.
        """
        pending = list(reversed(jobs))
        running: dict[int, tuple[Job, float]] = {}
        done: dict[str, JobResult] = {}
        try:
            while pending or running:
                while pending and len(running) < max(1, num_jobs):
                    job = pending.pop()
                    running[self._spawn(job)] = (job, time.monotonic())
                if not self._reap(running, done, on_done):
                    time.sleep(_POLL_S)
        except KeyboardInterrupt:
            for pid in running:
                self._kill(pid)
            return [done[j.key] for j in jobs if j.key in done], True
        return [done[j.key] for j in jobs], False

    def _reap(self, running: dict[int, tuple[Job, float]], done: dict[str, JobResult], on_done: Any) -> bool:
        reaped = False
        for pid, (job, started) in list(running.items()):
            finished, status = os.waitpid(pid, os.WNOHANG)
            elapsed = time.monotonic() - started
            if finished:
                result = self._collect(job, os.waitstatus_to_exitcode(status), elapsed)
            elif elapsed > job.timeout_s:
                self._kill(pid)
                result = JobResult(job.key, "timeout", elapsed, reason=f"killed after {job.timeout_s:.1f}s")
            else:
                continue
            del running[pid]
            done[job.key] = result
            reaped = True
            if on_done is not None:
                on_done(result)
        return reaped

    @staticmethod
    def _kill(pid: int) -> None:
        # The child leads its own process group, so anything it spawned dies with it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)

    def _paths(self, job: Job) -> tuple[Path, Path]:
        base = Path(self._tmp, "jobs")
        base.mkdir(exist_ok=True)
        return base / f"{job.key}.json", base / f"{job.key}.log"

    def _spawn(self, job: Job) -> int:
        result_path, log_path = self._paths(job)
        result_path.unlink(missing_ok=True)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: never returns into the parent's code
            exit_code = 70
            try:
                os.setpgid(0, 0)
                log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.dup2(log_fd, 1)
                os.dup2(log_fd, 2)
                exit_code = self._child(job, result_path)
            except BaseException:
                with contextlib.suppress(BaseException):
                    os.write(2, traceback.format_exc().encode())
            finally:
                os._exit(exit_code)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.setpgid(pid, pid)  # both sides set it, so a kill right after fork cannot miss
        return pid

    def _child(self, job: Job, result_path: Path) -> int:
        config, private = self.config, self.private_root
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(1)  # one core per child; the parent runs N of them
        owned = config.top_level_names
        for name in [m for m in sys.modules if m.partition(".")[0] in owned or _inside(sys.modules[m], config.root)]:
            del sys.modules[name]
        real_paths = {str((config.root / rel).resolve()) for rel in config.import_paths} | {str(config.root)}
        import_roots = [(private / rel).resolve() for rel in config.import_paths]
        sys.path[:] = [str(p) for p in import_roots] + [p for p in sys.path if p not in ("", ".", *real_paths)]
        os.chdir(private)
        overrides = {str(private / rel): text for rel, text in job.overrides}
        finder = MutantFinder(import_roots, config.source_packages, overrides)
        sys.meta_path.insert(0, finder)
        cov = coverage_map.start(private, config.source_roots) if job.measure_coverage else None
        recorder = Recorder(cov, job.force_fail)
        args = [*(job.gate_ids or config.gates), "-m", config.gate_marker, "-p", "no:cacheprovider", "-q"]
        args += ["--rootdir", str(private)]
        exit_code = pytest.main(args, plugins=[recorder])
        payload: dict[str, Any] = {
            "outcomes": [dataclasses.asdict(o) for o in recorder.outcomes()],
            "pytest_exit": int(exit_code),
            "loaded": sorted(str(Path(p).relative_to(private)) for p in finder.loaded),
            "collect_errors": recorder.collect_errors,
        }
        if cov is not None:
            payload["coverage"] = {"lines": coverage_map.collect(cov, private), "fixtures": recorder.fixtures}
        tmp = result_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(payload))
        os.replace(tmp, result_path)
        return 0

    def _collect(self, job: Job, exit_code: int, elapsed: float) -> JobResult:
        result_path, log_path = self._paths(job)
        if exit_code < 0:
            name = signal.Signals(-exit_code).name
            return JobResult(job.key, "crashed", elapsed, reason=f"killed by {name}")
        if exit_code != 0 or not result_path.is_file():
            tail = log_path.read_text(errors="replace").strip().splitlines()[-1:] if log_path.is_file() else []
            detail = f": {tail[0][:200]}" if tail else ""
            return JobResult(job.key, "crashed", elapsed, reason=f"exited with code {exit_code}{detail}")
        data = json.loads(result_path.read_text())
        outcomes = [
            GateOutcome(o["gate_id"], Outcome(o["outcome"]), o["duration_s"], o["exc_type"], o["message"])
            for o in data["outcomes"]
        ]
        seen = {o.gate_id for o in outcomes}
        # A gate asked for but never reported did not run: its module failed to import, which is red.
        outcomes += [GateOutcome(g, Outcome.ERROR, 0.0, "NotCollected") for g in job.gate_ids if g not in seen]
        return JobResult(
            job.key,
            "done",
            elapsed,
            tuple(outcomes),
            pytest_exit=data["pytest_exit"],
            loaded=tuple(data["loaded"]),
            collect_errors=tuple(data["collect_errors"]),
            coverage=data.get("coverage"),
        )
