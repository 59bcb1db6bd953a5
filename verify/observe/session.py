"""An observation session: the pristine tree and some mutants observed side by side, in a private copy, on the
project's observer's workloads, its gates (`GateWorkloads`), or both.

Copies the project's files (the ones a verify run copies) into a temporary folder, starts the worker there in a
subprocess (`verify/observe/worker.py`, with the children's clean environment and no stdin) and reads back each
mutant's comparison with the pristine run and the digest of its observation, as JSON (never unpickled). The
user's tree is only read: the worker's children are confined, and the whole session runs under the run's tree
guard (`verify.sandbox.guard`: the project inventoried before and after, everything its processes left behind
ended), so a change to the user's files is an `ObserveTreeError` naming them, never a silent success. An
observation run that fails in the pristine tree (an error or a timeout in a workload, an observer that cannot
load) is a harness error, named, never an explanation. Knows nothing of the CLI or of reports.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verify.observe import record, worker
from verify.observe.compare import Comparison, Tolerance

__all__ = [
    "ChildLimits",
    "GateWorkloads",
    "ObserveHarnessError",
    "ObserveJob",
    "ObserveTreeError",
    "Observed",
    "SessionOptions",
    "observe_mutants",
]


class ObserveHarnessError(Exception):
    """The observation itself failed: the pristine run raised or timed out, or the worker could not run."""


class ObserveTreeError(ObserveHarnessError):
    """The user's files changed while the observation ran (a mutant wrote there, confinement being off), or a
    process it started could not be ended: nothing it observed is trusted."""


@dataclass(frozen=True, slots=True)
class ChildLimits:
    """What an observation child may take and write, from `[tool.dflash]` (the keys of the same names)."""

    memory_factor: float = 4.0
    memory_min_mb: int = 2048
    processes_max: int = 64
    file_max_mb: int = 1024
    writable: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SessionOptions:
    jobs: int = 1
    tolerance: Tolerance = field(default_factory=Tolerance)
    budget_factor: float = 10.0  # a mutant's workload may take this many times the slowest pristine workload
    min_budget_s: float = 20.0
    pristine_budget_s: float = 600.0
    limit_s: float = 1800.0  # a child past this is killed (the per-workload budget normally ends it first)
    # Stop each mutant at the first workload that diverges: enough to tell observable from equivalent, and
    # cheaper; the explanation then lists only what diverged up to there, and duplicates are not grouped.
    first_only: bool = False
    # Run the engine's gates as workloads too (`verify.observe.gate_record`): the only workloads without an
    # observer; beside one, they measure which gates reach the change and see it differ
    gate_workloads: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.jobs, bool) or not isinstance(self.jobs, int) or self.jobs < 1:
            raise ValueError(f"jobs must be an integer >= 1, got {self.jobs!r}")
        for name in ("budget_factor", "min_budget_s", "pristine_budget_s", "limit_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0")


@dataclass(frozen=True, slots=True)
class GateWorkloads:
    """The gates run as workloads (`verify.observe.gate_record`): where they are (`paths`, with pytest's
    `options`: the marker expression and the project's pytest_args), the source roots whose functions' returns
    are recorded, and the recording's limits (`RecordLimits`' fields)."""

    paths: tuple[str, ...]
    options: tuple[str, ...]
    source_roots: tuple[str, ...]
    limits: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("paths", "options", "source_roots"):
            value = getattr(self, name)
            if not isinstance(value, tuple) or not all(isinstance(item, str) for item in value):
                raise ValueError(f"GateWorkloads.{name} must be a tuple of strings, got {value!r}")
        if not self.paths:
            raise ValueError("GateWorkloads.paths must name at least one gate path")


@dataclass(frozen=True, slots=True)
class Observed:
    """What a session found: each mutant's comparison and observation digest, and the harness failures."""

    pristine_digest: str
    workloads: tuple[str, ...]
    compared: tuple[str, ...]
    gates: Mapping[str, str]
    comparisons: Mapping[str, Comparison]
    digests: Mapping[str, str]
    failures: Mapping[str, str]  # mutant -> why the harness got no observation (never an explanation)
    seconds: float = 0.0  # the pristine run's wall time over all workloads
    # mutant -> what its observation reached of its changed lines (verify.observe.reach.collect's data)
    reach: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # With the gates as workloads: per mutant the gates it ran (those that ran its rewritten lines in the pristine
    # run), their comparison where an observer made the main one, and what the recording's limits left out
    gates_run: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    gate_comparisons: Mapping[str, Comparison] = field(default_factory=dict)
    capped: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    functions: Mapping[str, str] = field(default_factory=dict)  # recorded function -> "file:line"
    unstable: tuple[tuple[str, str], ...] = ()  # (gate, function) pairs that differ between two pristine runs


def _read(out: Path, name: str) -> dict[str, Any]:
    """A job's result: JSON written by a child, read as data (never unpickled), an object or a ValueError."""
    data = json.loads((out / name / worker.RESULT).read_text())
    if not isinstance(data, dict):
        raise ValueError("a result must be a JSON object")
    return data


def _pristine_trouble(observation: object) -> str:
    entries = getattr(observation, "entries", ())
    for (workload, step, _row, what), value in entries:
        if what.partition("#")[0] in ("error", "timeout"):
            return f"workload {workload!r} (step {step}): {what}: {value}"
    return ""


@dataclass(frozen=True, slots=True)
class ObserveJob:
    """What one session observes: the project at `root` (the `files` its private copy holds, relative to it), how
    its code is imported, the observer (`module:function`, or "" for none), the gates run as workloads (None for
    none), and the mutants (name -> {relative file: mutated text})."""

    root: Path
    files: tuple[str, ...]
    import_paths: tuple[str, ...]
    packages: tuple[str, ...]
    observe_spec: str
    mutants: Mapping[str, Mapping[str, str]]
    options: SessionOptions = field(default_factory=SessionOptions)
    limits: ChildLimits = field(default_factory=ChildLimits)
    gates: GateWorkloads | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.observe_spec, str) or (self.observe_spec and ":" not in self.observe_spec):
            raise ValueError(f"observe_spec must be 'module:function', got {self.observe_spec!r}")
        if not self.observe_spec and self.gates is None:
            raise ValueError("an observation needs an observer (observe_spec) or the gates as workloads (gates)")
        for name in ("files", "import_paths", "packages"):
            if not isinstance(getattr(self, name), tuple):
                raise ValueError(f"{name} must be a tuple of strings")


def observe_mutants(job: ObserveJob) -> Observed:
    """Observe the pristine tree and every mutant of the job and compare them.

    Raises ObserveTreeError when the user's files changed meanwhile, ObserveHarnessError when the observation
    itself failed."""
    from verify.sandbox.guard import TreeGuard

    guard = TreeGuard(Path(job.root))  # the inventory before any child
    with guard:
        observed = _observe(job)
    if guard.errors:
        raise ObserveTreeError("; ".join(guard.errors))
    return observed


def _observe(job: ObserveJob) -> Observed:
    from verify.sandbox.hardening import clean_environment, memory_bytes
    from verify.sandbox.private_copy import copy_files

    options, limits, mutants = job.options, job.limits, job.mutants
    with tempfile.TemporaryDirectory(prefix="dflash-observe-") as tmp:
        base = Path(tmp)
        project, out, scratch = base / "project", base / "out", base / "tmp"
        for folder in (project, out, scratch):
            folder.mkdir()
        copy_files(Path(job.root), job.files, project)
        spec = {
            "root": str(project.resolve()),
            "tmp": str(scratch.resolve()),
            "out": str(out),
            "import_paths": list(job.import_paths),
            "packages": list(job.packages),
            "observe": job.observe_spec,
            "mutants": {name: dict(overrides) for name, overrides in mutants.items()},
            "jobs": options.jobs,
            "tolerance": [options.tolerance.atol, options.tolerance.rtol],
            "budget_factor": options.budget_factor,
            "min_budget_s": options.min_budget_s,
            "pristine_budget_s": options.pristine_budget_s,
            "limit_s": options.limit_s,
            "first_only": options.first_only,
            "writable": list(limits.writable),
            "memory_share_bytes": memory_bytes() // options.jobs if limits.memory_factor else 0,
            "memory_factor": limits.memory_factor,
            "memory_min_bytes": limits.memory_min_mb << 20,
            "processes_max": limits.processes_max,
            "file_bytes": limits.file_max_mb << 20,
            "gates": None if job.gates is None else {
                "paths": list(job.gates.paths), "options": list(job.gates.options),
                "source_roots": list(job.gates.source_roots), "limits": dict(job.gates.limits),
                "files": sorted({rel for overrides in mutants.values() for rel in overrides}),
            },
        }  # fmt: skip
        (base / "job.json").write_text(json.dumps(spec))
        env = {**clean_environment(os.environ), "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
        done = subprocess.run(
            [sys.executable, "-m", "verify.observe.worker", str(base / "job.json")],
            cwd=project, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if (out / worker.DRIFT).exists():
            raise ObserveHarnessError(
                "the observer is not deterministic: two runs of the pristine tree differ "
                f"(first at {(out / worker.DRIFT).read_text()}); every comparison with a mutant would be noise "
                "(seed every random draw the workloads make, and keep their inputs fixed)"
            )
        for name in (worker.PRISTINE, worker.PRISTINE_AGAIN):
            if (failed := out / name / worker.FAILURE).exists():
                raise ObserveHarnessError(f"the observer failed on the pristine tree:\n{failed.read_text()}")
        if done.returncode != 0 or not (out / worker.PRISTINE / worker.RESULT).exists():
            raise ObserveHarnessError(f"the observation worker failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
        try:
            pristine = _read(out, worker.PRISTINE)
            pristine["observation"] = record.from_data(pristine["observation"])
        except (OSError, ValueError, TypeError, KeyError) as error:
            raise ObserveHarnessError(f"the pristine run's result cannot be read: {error}") from None
        trouble = _pristine_trouble(pristine["observation"])
        if trouble:
            raise ObserveHarnessError(f"the pristine tree fails its own observation run: {trouble}")
        comparisons, digests, failures, reach = {}, {}, {}, {}
        gates_run, gate_comparisons, capped, functions = {}, {}, {}, dict(pristine.get("functions", {}))
        for index, name in enumerate(mutants):
            folder = out / worker.job_id(index)
            try:
                result = _read(out, worker.job_id(index)) if (folder / worker.RESULT).exists() else None
                if result is not None:
                    comparisons[name] = Comparison.from_data(result["comparison"])
                    digests[name] = str(result["digest"])
                    reach[name] = result.get("reach", {})
                    gates_run[name] = tuple(str(g) for g in result.get("gate_ids", ()))
                    if "gate_comparison" in result:
                        gate_comparisons[name] = Comparison.from_data(result["gate_comparison"])
                    capped[name] = {str(k): str(v) for k, v in result.get("capped", {}).items()}
                    functions.update({str(k): str(v) for k, v in result.get("functions", {}).items()})
            except (OSError, ValueError, TypeError, KeyError) as error:
                failures[name] = f"its result cannot be read: {type(error).__name__}: {error}"
                continue
            if result is None:
                failure = folder / worker.FAILURE
                failures[name] = failure.read_text(errors="replace") if failure.exists() else "no result"
        observation = pristine["observation"]
        if job.observe_spec:  # the observer's workloads are the explanation's; the gates only measure the hint
            gate_ids = set(pristine.get("gate_ids", ()))
            observation = record.Observation(tuple(e for e in observation.entries if e[0][0] not in gate_ids))
        unstable_file = out / worker.UNSTABLE
        unstable = json.loads(unstable_file.read_text()) if unstable_file.exists() else []
        return Observed(
            pristine["digest"], observation.workloads, observation.whats, pristine["gates"], comparisons, digests,
            failures, round(sum(pristine["seconds"].values()), 3), reach, gates_run, gate_comparisons, capped,
            functions, tuple((str(gate), str(what)) for gate, what in unstable),
        )  # fmt: skip
