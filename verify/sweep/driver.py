"""The sweep: mutmut's operator mutants of runner modules, run against the CPU gates in a private copy.

Owns the copy of the project, the `[tool.mutmut]` settings written into it, the `mutmut run` subprocess
(progress, the time budget, a clean stop) and reading its per-file `.meta` verdicts back. Knows nothing of
the registered catalog, reports or rendering; it never writes into the project it sweeps.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verify.config.settings import ProjectConfig
from verify.config.writable import writable_paths
from verify.report.verdict import Status
from verify.run.phases import cache
from verify.sandbox import hardening, launch
from verify.sandbox import scratch as scratch_folder
from verify.sandbox.guard import TreeGuard
from verify.sandbox.private_copy import copy_files, visible_files
from verify.sweep import equivalents
from verify.sweep import mutant as sweep_mutant
from verify.sweep import mutmut_run as sweep_mutmut
from verify.sweep import source as sweep_source
from verify.sweep.result import NO_TESTS, NOT_CHECKED, SweepMutant, SweepOutcome, SweepProgress, SweepResult
from verify.sweep.undecorate import undecorate
from verify.sweep.watch import MutantWatch

_DEFAULTS: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(ProjectConfig)}
DEFAULT_PATHS = ("runner",)
DEFAULT_JOBS = os.cpu_count() or 1
# After SIGINT mutmut stops its workers and saves what it has; past this it is killed.
STOP_GRACE_S = 60.0

ProgressCallback = Callable[[SweepProgress], None]


class SweepInputError(ValueError):
    """A path, revision, budget or option the sweep cannot use (the CLI exits 2)."""


def parse_budget(text: str) -> float:
    """'90s', '10m', '1h30m' or a bare number of seconds, to seconds."""
    match = re.fullmatch(r"\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*(?:(\d+(?:\.\d+)?)s?)?\s*", text)
    if not text.strip() or match is None or not any(match.groups()):
        raise SweepInputError(f"bad budget {text!r}: use e.g. 90s, 10m or 1h30m")
    hours, minutes, seconds = (float(group or 0) for group in match.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if total <= 0:
        raise SweepInputError(f"bad budget {text!r}: it must be more than zero")
    return total


@dataclass(frozen=True, slots=True)
class SweepConfig:
    root: Path
    paths: tuple[str, ...] = DEFAULT_PATHS
    jobs: int = DEFAULT_JOBS
    budget_s: float | None = None
    changed_since: str | None = None
    equivalents: Path = equivalents.DEFAULT_PATH  # relative to root
    workdir: Path | None = None  # where to make (and keep) the private copy; a temp dir otherwise
    environ: tuple[tuple[str, str], ...] = field(default=())  # extra environment for mutmut
    # From [tool.dflash], used when the project has no [tool.mutmut] of its own: which tests are the gates, and
    # the folders (relative to the root) the source imports from (src/, several roots).
    gates: tuple[str, ...] = ("tests/gates",)
    gate_marker: str = "gate"
    import_paths: tuple[str, ...] = (".",)
    extra_args: tuple[str, ...] = ()  # every test run's extra pytest arguments ([tool.dflash] exclude, pytest_args)
    writable: tuple[str, ...] = ()  # [tool.dflash] writable: folders outside the project the gates may write
    # Each mutant's ceilings, as [tool.dflash] sets a verify child's (the defaults are its keys').
    memory_factor: float = _DEFAULTS["memory_factor"]
    memory_min_mb: int = _DEFAULTS["memory_min_mb"]
    processes_max: int = _DEFAULTS["processes_max"]
    file_max_mb: int = _DEFAULTS["file_max_mb"]

    def __post_init__(self) -> None:
        if self.jobs < 1:
            raise SweepInputError(f"--jobs must be at least 1, got {self.jobs}")
        if self.budget_s is not None and self.budget_s <= 0:
            raise SweepInputError(f"the budget must be more than zero seconds, got {self.budget_s}")
        if not self.paths:
            raise SweepInputError("nothing to sweep: give at least one runner path")
        for name in ("memory_factor", "memory_min_mb", "processes_max", "file_max_mb"):
            if getattr(self, name) < 0:
                raise SweepInputError(f"{name} must be 0 (no ceiling) or more, got {getattr(self, name)}")


def resolve_modules(root: Path, paths: tuple[str, ...], changed_since: str | None = None) -> tuple[str, ...]:
    """The Python modules under `paths`, as posix paths relative to `root`, optionally only those that
    differ from revision `changed_since` (committed, uncommitted or untracked)."""
    root = root.resolve()
    modules: set[str] = set()
    for path in paths:
        target = (root / path).resolve()
        if not target.exists() or not target.is_relative_to(root) or target == root:
            raise SweepInputError(f"unknown path {path!r}: not a file or folder inside {root}")
        if target.is_file() and target.suffix != ".py":
            raise SweepInputError(f"{path!r} is not a Python module")
        found = [target] if target.is_file() else sorted(target.rglob("*.py"))
        modules.update(p.relative_to(root).as_posix() for p in found if "__pycache__" not in p.parts)
    if changed_since is not None:
        modules &= _changed_files(root, changed_since)
    return tuple(sorted(modules))


def _changed_files(root: Path, rev: str) -> set[str]:
    if rev.startswith("-"):
        raise SweepInputError(f"unknown revision {rev!r}")
    known = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], cwd=root, capture_output=True, check=False
    )
    if known.returncode != 0:
        raise SweepInputError(f"--changed-since: unknown revision {rev!r}, or {root} is not a git repository")
    try:
        return cache.changed_files(root, rev)
    except cache.ChangedSinceError as error:
        raise SweepInputError(f"--changed-since: {error}") from None


def copy_project(root: Path, dest: Path) -> None:
    """Copy what git sees (tracked and untracked-not-ignored); without git, everything but caches."""
    copy_files(root, visible_files(root), dest)


_PHASES = (
    "Generating mutants",
    "Running stats",
    "Listing all tests",
    "Running clean tests",
    "Running forced fail",
)
_COUNTS = re.compile(r"(\d+)/(\d+)\s+🎉 (\d+) 🫥 (\d+)\s+⏰ \d+\s+🤔 \d+\s+🙁 (\d+)")


def _progress(fragment: str) -> SweepProgress | None:
    if match := _COUNTS.search(fragment):
        done, total, killed, no_tests, survived = (int(g) for g in match.groups())
        return SweepProgress("mutants", done, total, killed, survived, no_tests)
    return next((SweepProgress(phase) for phase in _PHASES if phase in fragment), None)


def _run_mutmut(
    copy: Path, scratch: Path, config: SweepConfig, on_progress: ProgressCallback, watch: MutantWatch
) -> tuple[SweepOutcome, str]:
    """mutmut in the copy, through the launcher that confines it (and every mutant) to the copy, its own temp
    folder and `[tool.dflash] writable`, and ends every process of the sweep when this one ends; each mutant
    under its ceilings (`watch`, polled here)."""
    writable = [copy, scratch, *writable_paths(config.writable)]
    # The environment mutmut is exec'd with holds no secret (verify's children's denylist), at the kernel's level.
    env = hardening.clean_environment({**os.environ, **sweep_mutmut.ENVIRONMENT, **dict(config.environ)})
    mutant = sweep_mutant.settings(watch.channel, watch.folder, [str(p) for p in writable], config.file_max_mb << 20)
    env |= {"TMPDIR": str(scratch), launch.WRITABLE: os.pathsep.join(map(str, writable))}
    env |= {sweep_mutant.SETTINGS: mutant}
    # By its file, not `-m`: with `-m` the copy (the cwd) comes first on sys.path, and a project of the user's
    # with a `verify` package of its own would be imported in place of this one.
    launcher = [sys.executable, launch.__file__]
    process = subprocess.Popen(
        [*launcher, *sweep_mutmut.command(), "run", "--max-children", str(config.jobs)],
        cwd=copy,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # our Ctrl-C is forwarded once, as a clean stop, not to every worker
        pass_fds=(watch.channel,),  # what each mutant process tells the driver (verify.sweep.mutant)
    )
    assert process.stdout is not None
    watch.keeper = process.pid
    deadline = time.monotonic() + config.budget_s if config.budget_s else None
    stopped: SweepOutcome | None = None
    stop_at = 0.0
    output, pending = [], ""
    last_progress: SweepProgress | None = None
    while True:
        try:
            chunk = sweep_mutmut.read_available(process.stdout, timeout_s=0.2)
        except KeyboardInterrupt:
            chunk, stopped, stop_at = b"", SweepOutcome.INTERRUPTED, time.monotonic()
            os.kill(process.pid, signal.SIGINT)
        pending += chunk.decode("utf-8", errors="replace")
        *fragments, pending = re.split(r"[\r\n]", pending)
        for fragment in fragments:
            output.append(fragment)
            progress = _progress(fragment)
            if progress is not None and progress != last_progress:
                on_progress(progress)
                last_progress = progress
        if not chunk and process.poll() is not None:
            break
        watch.poll()
        now = time.monotonic()
        if stopped is None and deadline is not None and now >= deadline:
            stopped, stop_at = SweepOutcome.BUDGET, now
            os.kill(process.pid, signal.SIGINT)
        elif stopped is not None and now - stop_at > STOP_GRACE_S:
            os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    try:  # a worker outliving mutmut (stuck in a mutant's infinite loop) must not keep burning CPU
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    lines = [line for line in output if line.strip() and not _progress(line)]
    tail = "\n".join(lines[-25:])
    if stopped is not None:
        why = "the time budget ran out" if stopped == SweepOutcome.BUDGET else "interrupted"
        return stopped, f"stopped early ({why}); the verdicts reached are kept, the rest are not_checked"
    if why := launch.refused(process.returncode, "\n".join(lines)):
        return SweepOutcome.FAILED, f"dflash sweep: the kernel refused to confine mutmut {why}; no mutant was run"
    if process.returncode != 0:
        return SweepOutcome.FAILED, f"mutmut run exited {process.returncode}:\n{tail}"
    return SweepOutcome.COMPLETE, ""


def run_sweep(config: SweepConfig, on_progress: ProgressCallback | None = None) -> SweepResult:
    """Sweep the runner modules under `config.paths`; the project itself is only read."""
    started = time.monotonic()
    root = config.root.resolve()
    modules = resolve_modules(root, config.paths, config.changed_since)
    marks = equivalents.load(root / config.equivalents)
    originals = {m: (root / m).read_text("utf-8") for m in modules}
    # In the copy, decorated functions are spelt as assignments so mutmut mutates them too (sweep.undecorate).
    rewritten = {m: undecorate(text) for m, text in originals.items()}
    reached = {(m, f) for m, (_, names) in rewritten.items() for f in names}
    skipped = tuple(d for m in modules for d in sweep_source.decorated(m, originals[m]))
    decorated = tuple(d for d in skipped if (d.module, d.function) not in reached)
    undecorated = tuple(d for d in skipped if (d.module, d.function) in reached)

    def result(outcome: SweepOutcome, mutants: tuple = (), message: str = "") -> SweepResult:
        return SweepResult(
            root=str(root),
            modules=modules,
            mutants=equivalents.apply(mutants, marks),
            decorated=decorated,
            undecorated=undecorated,
            outcome=outcome,
            wall_s=time.monotonic() - started,
            num_jobs=config.jobs,
            budget_s=config.budget_s,
            message=message,
            stale_equivalents=tuple(
                f"{eq.module}: {eq.function}: {eq.original.strip().splitlines()[0]}"
                for eq in equivalents.stale(marks, originals)
            ),
        )

    if not modules:
        return result(SweepOutcome.EMPTY, message="no runner module to sweep")
    # The copy sits beneath the folder that records its owner, so mutmut's tree holds only the project's files.
    copy = config.workdir or scratch_folder.make("dflash-sweep-") / "project"  # (a killed sweep's go first)
    scratch = scratch_folder.make("dflash-sweep-tmp-")  # the gates' TMPDIR, writable to them
    watching = str(scratch_folder.make("dflash-sweep-watch-"))  # the driver's, which no mutant may write
    # The project is inventoried before mutmut starts and after it ends, whatever confinement the kernel gave:
    # a difference voids every verdict (mutmut runs mutants where the sweep cannot tell which one changed it).
    outputs = (copy,) if config.workdir is not None else ()
    try:
        copy_project(root, copy)
        for module, (text, _) in rewritten.items():
            (copy / module).write_text(text, "utf-8")
        sweep_mutmut.write_settings(
            copy, modules, config.gates, config.gate_marker, config.import_paths, config.extra_args
        )
        with TreeGuard(root, outputs=outputs) as guard:
            start_ns = time.time_ns()
            memory = (hardening.memory_bytes() // config.jobs, config.memory_min_mb << 20, config.memory_factor)
            with MutantWatch(Path(watching), memory, config.processes_max) as watch:
                outcome, message = _run_mutmut(copy, scratch, config, on_progress or (lambda progress: None), watch)
            guard.record("_mutmut", start_ns, time.time_ns())
        mutants = watch.judge(sweep_mutmut.read_mutants(copy, modules, originals))
        if guard.errors:
            mutants = tuple(_voided(mutant) for mutant in mutants)
        return dataclasses.replace(
            result(outcome, mutants, message), harness_errors=guard.errors, confinement=guard.confinement.describe()
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(watching, ignore_errors=True)
        if config.workdir is None:
            shutil.rmtree(copy.parent, ignore_errors=True)


def _voided(mutant: SweepMutant) -> SweepMutant:
    """A mutant whose gates ran while the project changed gets no verdict; one that ran none keeps its own."""
    if mutant.mutmut in (NO_TESTS, NOT_CHECKED):
        return mutant
    why = "no verdict: the project's files changed while the sweep ran (see the harness error)"
    return dataclasses.replace(mutant, status=Status.ERROR, reason=why)
