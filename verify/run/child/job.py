"""One forked child's life: its own private copy of the project, its own cwd, temp dir and modules, then the
gates under pytest with the mutated text served by the import hook, journalled gate by gate.

Nothing a child does can reach another child or the user's tree through the files it was given: it works
in a copy identical to the parent's pristine private copy, which no child ever writes, and which serves a
later child only if this one left it unchanged (`verify.sandbox.copies`). Nor by naming a path: its
first act is to confine itself (`verify.sandbox.confine`) to writing its own folder (temp dir, journal,
result, log), its copy, the claims folder it shares with its siblings and the project's `writable` paths. A child that
was to be confined and is not (the kernel refused a step, or offered no Landlock where its parent found some)
runs nothing: it never writes to the fd its executor gave it to say "confined" (closed before any of the
mutant's code runs, so no mutant can say it), and exits with `UNCONFINED_EXIT`; the executor reports that as
harness trouble, never a verdict. Runs in a child that an executor started, and ends with `os._exit`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import json
import os
import signal
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import pytest

from verify.config.settings import ProjectConfig
from verify.config.writable import writable_paths
from verify.mutation.apply import MutantFinder
from verify.run.child import coverage
from verify.run.child.recorder import Recorder
from verify.run.child.streams import JobStreams
from verify.sandbox import hardening, reaper
from verify.sandbox.confine import ConfineError, confine
from verify.seeds import GATE_SEED_ENV

__all__ = ["UNCONFINED_EXIT", "FreshStreams", "JobPaths", "end_child", "fresh_random_state", "isolate", "prime",
           "run_child", "warm_pytest", "write_result"]  # fmt: skip

UNCONFINED_EXIT = 77  # the child was to be confined and could not be: it ran nothing (EX_NOPERM)


@dataclasses.dataclass(frozen=True, slots=True)
class JobPaths:
    """Where one child works and what it leaves for the parent."""

    base: Path  # the child's own folder: temp dir, journal, result, log
    project: Path  # its private copy of the project, identical to the pristine tree (`verify.sandbox.copies`)

    @property
    def tmp(self) -> Path:
        return self.base / "tmp"

    @property
    def journal(self) -> Path:
        return self.base / "journal.jsonl"

    @property
    def result(self) -> Path:
        return self.base / "result.json"

    @property
    def log(self) -> Path:
        return self.base / "child.log"

    @property
    def streams(self) -> tuple[Path, Path, Path]:
        """What the child writes to its streams: its log, then pytest's capture of its stdout and of its stderr
        (`verify.run.child.streams`)."""
        return self.log, self.base / "stdout", self.base / "stderr"


# file -> whether it lies in the user's tree. Resolving every loaded module's path (torch alone brings a
# thousand) took ~0.3 s per child, so the parent fills this once (`prime`) and every child inherits it.
_INSIDE: dict[tuple[str, str], bool] = {}
_HARNESS = __name__.partition(".")[0]  # "verify"


@functools.cache
def _real_folder(folder: str) -> str:
    return os.path.realpath(folder)


# The recorder reads a red gate's exception itself (`verify.run.child.recorder`); pytest's own report of it goes
# only to the child's log. Its default (long) traceback parses every frame's source file into an AST, per red
# gate: on 300 generated mutants a third of the children's CPU. Python's own traceback says the same, cheaply.
QUIET_TRACEBACKS = ["--tb=native"]


def _real_path(file: str) -> str:
    """`file` with every link resolved; its folder resolved once for all the modules beside it (a thousand
    files of torch lie in a few dozen folders)."""
    if os.path.islink(file):
        return os.path.realpath(file)
    folder, name = os.path.split(os.path.abspath(file))
    return os.path.join(_real_folder(folder), name)


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _inside(module: Any, root: Path) -> bool:
    """A module loaded from the user's tree (a gate helper, a test module imported by an outer pytest run):
    the child must import its own copy from the private tree, never reuse the parent's. Installed packages
    are not the project's, even when the virtualenv lives inside the project folder."""
    file = getattr(module, "__file__", None)
    if not file or getattr(module, "__name__", "") == "__main__":
        return False
    key = (file, str(root))
    if key not in _INSIDE:
        path = _real_path(file)
        _INSIDE[key] = _under(path, _real_folder(str(root))) and not _under(path, _real_folder(sys.prefix))
    return _INSIDE[key]


def prime(root: Path) -> None:
    """In the parent, before forking: decide once for every module loaded so far whether it is the user's."""
    for module in list(sys.modules.values()):
        _inside(module, root)


def warm_pytest(empty: Path) -> None:
    """Run pytest once on an empty folder, so its plugins and entry points are imported before forking."""
    empty.mkdir()
    (empty / "pytest.ini").write_text("[pytest]\n")
    args = [str(empty), "-q", "-p", "no:cacheprovider", "-c", str(empty / "pytest.ini"), "--rootdir", str(empty)]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        pytest.main(args)


def fresh_random_state() -> None:
    """Random generators as a fresh process has them, not as the parent left them. CPython reseeds `random` at
    a fork; numpy seeds its global generator from the OS at import, so it is reseeded the same way; torch's
    default generator starts from its seed. Otherwise every child draws the parent's numbers, and a gate that
    fails by chance passes or fails alike in every child, where the flake check cannot see it. (A generator
    the parent never loaded is seeded afresh when the child first imports it.) Called again where the gates
    start (`FreshStreams`)."""
    if (numpy_random := sys.modules.get("numpy.random")) is not None:
        numpy_random.seed()
    if (torch := sys.modules.get("torch")) is not None:
        torch.manual_seed(torch.initial_seed())


def use_threads(threads: int) -> None:
    """torch's threads for this child's gates, whether torch is loaded already or the gates import it later
    (it reads OMP_NUM_THREADS then): the share of the cores its executor gave it (`Job.threads`)."""
    threads = max(1, threads)
    os.environ["OMP_NUM_THREADS"] = str(threads)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)


def isolate(config: ProjectConfig, job: Any, paths: JobPaths) -> Path:
    """Purge the project's modules, point sys.path, cwd and temp at this child's own copy and folder."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)  # the parent decides when a child ends
    paths.tmp.mkdir(exist_ok=True)  # made already where the child has a private tmpfs (sandbox.namespaces)
    os.environ["TMPDIR"] = str(paths.tmp)
    tempfile.tempdir = str(paths.tmp)
    use_threads(getattr(job, "threads", 1))
    fresh_random_state()
    # A shared unmutated run compiles into its copy for the parent to adopt (not under a user's pycache
    # prefix: that folder is theirs). Every other child only reads the caches, whatever the user's setting.
    sys.dont_write_bytecode = not (job.share_bytecode and sys.pycache_prefix is None)
    owned = set(config.top_level_names)
    # The harness's own package stays, as it does where it is installed: where it lives inside the project (this
    # repository's embedded run), a fresh `import verify` could find a folder of the user's named `verify`
    # first (a tests/verify/ on sys.path from an outer pytest run) and make the public import a namespace.
    purged = [
        m
        for m in sys.modules
        if m.partition(".")[0] in owned or (m.partition(".")[0] != _HARNESS and _inside(sys.modules[m], config.root))
    ]
    for name in purged:
        del sys.modules[name]
    private = paths.project.resolve()
    real_paths = {str((config.root / rel).resolve()) for rel in config.import_paths} | {str(config.root)}
    import_roots = [str((private / rel).resolve()) for rel in config.import_paths]
    sys.path[:] = import_roots + [p for p in sys.path if p not in ("", ".", *real_paths)]
    os.chdir(private)
    return private


def run_child(
    config: ProjectConfig,
    job: Any,
    paths: JobPaths,
    claims: Path | None = None,
    confined: bool = False,
    confined_fd: int = -1,
    load_scale: Callable[[], float] = lambda: 1.0,
    key: bytes = b"",
) -> int:
    """The child's body; returns its exit code, unless it ends the process itself as soon as its result is
    written (a run without coverage, from pytest's end of session: `end_child`). `job` is a
    `verify.run.execution.fork.Job`; `claims` is the folder it shares with the sibling children that split its
    gates (None: it runs them all); `confined` says that its parent found Landlock, so this child runs nothing
    unless it is confined too; `confined_fd` (a pipe's write end, or -1) gets one byte once it is, and is
    closed either way before any gate; `load_scale` is the executor's measure of the load, which stretches
    each gate's deadline (passed in: the child imports no executor); `key` seals its journal
    (`verify.run.child.journal`)."""
    # Before any of the project's code runs, and while this process has one thread: every later thread and
    # process inherits the restriction. Never unconfined where confinement was expected: no gate runs.
    try:
        own = [paths.base, paths.project, *([claims] if claims is not None else [])]
        applied = confine([*own, *writable_paths(config.writable)])
        if confined and not applied.active:
            raise ConfineError(f"its parent found Landlock, this child got none ({applied.why.partition('; ')[0]})")
        if confined_fd >= 0:
            os.write(confined_fd, b"1")
    except ConfineError as error:
        sys.stderr.write(f"not confined, so no gate ran: {error}\n")
        return UNCONFINED_EXIT
    finally:
        if confined_fd >= 0:
            os.close(confined_fd)  # before any of the mutant's code runs: none can say "confined" here
    private = isolate(config, job, paths)
    overrides = {str(private / rel): text for rel, text in job.overrides}
    finder = MutantFinder([private / rel for rel in config.import_paths], config.source_packages, overrides)
    sys.meta_path.insert(0, finder)
    # The harness owns its children's stream: a DFLASH_GATE_SEED the user exported never reaches a gate.
    os.environ[GATE_SEED_ENV] = str(job.gate_seed)
    cov = coverage.start(private, config.source_roots) if job.measure_coverage else None

    def result(exit_code: int) -> None:
        write_result(paths, private, finder.loaded, recorder, exit_code, cov)

    def end_now(exit_code: int) -> None:
        result(exit_code)
        end_child(0)

    recorder = Recorder(
        paths.journal, config.invariant_errors, cov, job.force_fail, job.stop_after, claims, dict(job.deadlines),
        load_scale, end_now if cov is None else None, key,
    )  # fmt: skip
    # Excluded files are absent from the copy (`verify.config.project`), so only `pytest_args` is added here.
    args = [*(job.gate_ids or config.gates), *config.marker_args, "-p", "no:cacheprovider", "-q", *config.pytest_args]
    args += QUIET_TRACEBACKS
    args += ["--rootdir", str(private)]
    own_streams = JobStreams(paths.streams, config.output_max_mb << 20)
    result(int(pytest.main(args, plugins=[recorder, FreshStreams(), own_streams])))
    return 0


class FreshStreams:
    """Random generators reseeded where the gates start, after collection: a gate file that draws at import
    moves torch's default generator, and which files a child collects depends on its job (a warm worker
    collects them all), so the first gate finds the same stream in every child whatever was imported."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        fresh_random_state()


def write_result(
    paths: JobPaths, private: Path, loaded: set[str], recorder: Recorder, exit_code: int, cov: Any = None
) -> None:
    """The child's result for its parent, written whole or not at all: pytest's exit status, the mutated files it
    imported, its collection errors and order, and its coverage when measured."""
    payload: dict[str, Any] = {
        "pytest_exit": exit_code,
        "loaded": sorted(str(Path(p).relative_to(private)) for p in loaded),
        "collect_errors": recorder.collect_errors,
        "order": recorder.order,
    }
    if cov is not None:
        payload["coverage"] = {"lines": coverage.collect(cov, private), "fixtures": recorder.fixtures}
    tmp = paths.result.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload))
    os.replace(tmp, paths.result)


def end_child(exit_code: int) -> NoReturn:
    """A child's last act, once its result is written (after `run_child` returns, or from inside pytest's end of
    session): whatever the job started (a daemon in a session of its own) ends with it, before another job's
    window opens, so a late write can never be laid at another mutant's door; its streams are flushed, and the
    process exits without running another line of pytest's or the parent's."""

    def reap() -> int:
        reaper.end_children(within_s=5.0)
        return exit_code

    hardening.leave(reap, failed=exit_code)
