"""An observation session: the pristine tree and some mutants observed side by side, in a private copy.

Copies the project's files (the ones a verify run copies) into a temporary folder, starts the worker there in a
subprocess (`verify/observe/worker.py`) and reads back each mutant's comparison with the pristine run and the
digest of its observation. The user's tree is only read. An observation run that fails in the pristine tree
(an error or a timeout in a workload, an observer that cannot load) is a harness error, named, never an
explanation. Knows nothing of the CLI or of reports.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verify.observe import worker
from verify.observe.compare import Comparison, Tolerance

__all__ = ["ObserveHarnessError", "Observed", "SessionOptions", "observe_mutants"]


class ObserveHarnessError(Exception):
    """The observation itself failed: the pristine run raised or timed out, or the worker could not run."""


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

    def __post_init__(self) -> None:
        if isinstance(self.jobs, bool) or not isinstance(self.jobs, int) or self.jobs < 1:
            raise ValueError(f"jobs must be an integer >= 1, got {self.jobs!r}")
        for name in ("budget_factor", "min_budget_s", "pristine_budget_s", "limit_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0")


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


def _pristine_trouble(observation: object) -> str:
    entries = getattr(observation, "entries", ())
    for (workload, step, _row, what), value in entries:
        if what.partition("#")[0] in ("error", "timeout"):
            return f"workload {workload!r} (step {step}): {what}: {value}"
    return ""


def observe_mutants(
    root: Path,
    files: list[str],
    import_paths: tuple[str, ...],
    packages: tuple[str, ...],
    observe_spec: str,
    mutants: Mapping[str, Mapping[str, str]],
    options: SessionOptions | None = None,
) -> Observed:
    """Observe the pristine tree and every mutant (name -> {relative file: mutated text}) and compare them.

    `files` are the project files the private copy holds (relative to `root`)."""
    from verify.run.private_copy import copy_files

    options = options or SessionOptions()
    with tempfile.TemporaryDirectory(prefix="dflash-observe-") as tmp:
        base = Path(tmp)
        project, out, scratch = base / "project", base / "out", base / "tmp"
        for folder in (project, out, scratch):
            folder.mkdir()
        copy_files(Path(root), files, project)
        job = {
            "root": str(project.resolve()),
            "tmp": str(scratch.resolve()),
            "out": str(out),
            "import_paths": list(import_paths),
            "packages": list(packages),
            "observe": observe_spec,
            "mutants": {name: dict(overrides) for name, overrides in mutants.items()},
            "jobs": options.jobs,
            "tolerance": [options.tolerance.atol, options.tolerance.rtol],
            "budget_factor": options.budget_factor,
            "min_budget_s": options.min_budget_s,
            "pristine_budget_s": options.pristine_budget_s,
            "limit_s": options.limit_s,
            "first_only": options.first_only,
        }
        (base / "job.json").write_text(json.dumps(job))
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
        done = subprocess.run(
            [sys.executable, "-m", "verify.observe.worker", str(base / "job.json")],
            cwd=project, env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if (out / worker.DRIFT).exists():
            raise ObserveHarnessError(
                "the observer is not deterministic: two runs of the pristine tree differ "
                f"(first at {(out / worker.DRIFT).read_text()}); every comparison with a mutant would be noise "
                "(seed every random draw the workloads make, and keep their inputs fixed)"
            )
        for name in (worker.PRISTINE, worker.PRISTINE_AGAIN):
            if (failed := out / f"{name}.failure").exists():
                raise ObserveHarnessError(f"the observer failed on the pristine tree:\n{failed.read_text()}")
        if done.returncode != 0 or not (out / f"{worker.PRISTINE}.pkl").exists():
            raise ObserveHarnessError(f"the observation worker failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
        pristine = pickle.loads((out / f"{worker.PRISTINE}.pkl").read_bytes())
        trouble = _pristine_trouble(pristine["observation"])
        if trouble:
            raise ObserveHarnessError(f"the pristine tree fails its own observation run: {trouble}")
        comparisons, digests, failures, reach = {}, {}, {}, {}
        for index, name in enumerate(mutants):
            if (out / f"{worker.job_id(index)}.pkl").exists():
                result = pickle.loads((out / f"{worker.job_id(index)}.pkl").read_bytes())
                comparisons[name], digests[name] = result["comparison"], result["digest"]
                reach[name] = result.get("reach", {})
            else:
                failure = out / f"{worker.job_id(index)}.failure"
                failures[name] = failure.read_text() if failure.exists() else "no result"
        observation = pristine["observation"]
        return Observed(
            pristine["digest"], observation.workloads, observation.whats, pristine["gates"], comparisons, digests,
            failures, round(sum(pristine["seconds"].values()), 3), reach,
        )  # fmt: skip
