"""The observation worker: a subprocess started in a private copy of the project that observes the pristine
tree (twice, in two children, when there are mutants to compare: two runs that differ mean an observer that is
not deterministic, and every comparison would be noise), then each mutant in a child forked from it, and
compares every mutant with the pristine run there. Jobs are named by number (`m0`, `m1`, ... in the order of
the job's mutants), never by the mutant's name, so no name can collide with the pristine run's files.

Only the comparison and a digest of each observation come back (a pickle per job in the output folder), so a
mutant's observation never crosses a process boundary. Each child serves its mutant's files through
`verify.run.apply.MutantFinder` from the private copy; the user's tree is never read here. A child that dies
or outlives its budget is reported as a failure of the harness, never as an observation. Run as
`python -m verify.observe.worker JOB.json`; knows nothing of the CLI or of reports.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

__all__ = ["DRIFT", "PRISTINE", "PRISTINE_AGAIN", "job_id", "main"]

# The files each job leaves in the output folder, named here once (verify.observe.session reads them back):
# `<id>.pkl` a result, `<id>.failure` the harness's own failure, DRIFT where the two pristine runs first differ.
PRISTINE, PRISTINE_AGAIN, DRIFT = "pristine", "pristine-again", "nondeterministic"


def job_id(index: int) -> str:
    """The id of the job observing the job file's index-th mutant (never the mutant's name, which could be one of
    the names above)."""
    return f"m{index}"


def _child(job: dict[str, Any], spec: dict[str, Any], pristine: Any, out: Path) -> None:
    """In the forked child: serve the mutant, observe, compare, write the result. Never returns."""
    code = 0
    try:
        import torch

        from verify.observe import compare, protocol, record
        from verify.run.apply import MutantFinder

        root = Path(job["root"])
        tmp = Path(job["tmp"]) / spec["id"]
        tmp.mkdir(parents=True, exist_ok=True)
        os.environ["TMPDIR"] = tempfile.tempdir = str(tmp)
        torch.manual_seed(0)
        roots = [root / rel for rel in job["import_paths"]]
        overrides = {str(root / rel): text for rel, text in spec["overrides"].items()}
        sys.meta_path.insert(0, MutantFinder(roots, job["packages"], overrides))
        cov = _start_reach(root, spec["overrides"]) if pristine is not None else None
        observer = protocol.make(job["observe"])
        scrub = ((str(tmp), "<tmp>"), (str(root), "<project>"))
        stop = None
        if pristine is not None and job.get("first_only"):
            tolerance = compare.Tolerance(*job["tolerance"])

            def stop(so_far: record.Observation) -> bool:
                # Only the workload just finished can hold a new divergence; the pristine run's part of it.
                workload = so_far.entries[-1][0][0] if so_far.entries else ""
                mine = record.Observation(tuple(e for e in so_far.entries if e[0][0] == workload))
                theirs = record.Observation(tuple(e for e in pristine.entries if e[0][0] == workload))
                return not compare.compare(theirs, mine, tolerance).is_equivalent

        observation, seconds = protocol.observe(observer, scrub, spec.get("budget_s"), stop)
        result: dict[str, Any] = {"id": spec["id"], "digest": record.digest(observation), "seconds": seconds}
        result["gates"] = protocol.gates_of(observer)
        if cov is not None:
            result["reach"] = _collect_reach(cov, root, spec["overrides"])
        if pristine is None:
            result["observation"] = observation
        else:
            tolerance = compare.Tolerance(*job["tolerance"])
            if job.get("first_only"):  # the run stopped early: compare the workloads it ran, not the ones it skipped
                ran = set(observation.workloads)
                pristine = record.Observation(tuple(e for e in pristine.entries if e[0][0] in ran))
            result["comparison"] = compare.compare(pristine, observation, tolerance)
        (out / f"{spec['id']}.part").write_bytes(pickle.dumps(result))
        (out / f"{spec['id']}.part").replace(out / f"{spec['id']}.pkl")
    except BaseException:  # the harness's own failure (an observer that cannot load): reported by name
        (out / f"{spec['id']}.failure").write_text(traceback.format_exc())
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _start_reach(root: Path, overrides: dict[str, str]) -> Any:
    """Line and branch coverage of a mutant's changed lines over its observation (`verify.observe.reach`)."""
    from verify.observe import reach

    return reach.start(root, overrides)


def _collect_reach(cov: Any, root: Path, overrides: dict[str, str]) -> dict[str, Any]:
    """What of the changed lines the observation reached: plain JSON data (`verify.observe.reach.collect`)."""
    from verify.observe import reach

    return reach.collect(cov, root, overrides)


def _start(job: dict[str, Any], spec: dict[str, Any], pristine: Any, out: Path) -> int:
    pid = os.fork()
    if pid == 0:
        os.setpgid(0, 0)
        _child(job, spec, pristine, out)
    return pid


def _run(job: dict[str, Any], specs: list[dict[str, Any]], pristine: Any, out: Path, jobs: int, limit_s: float) -> None:
    """Up to `jobs` children at once; a child past `limit_s` is killed with its process group."""
    queue, running = list(specs), dict[int, tuple[str, float]]()
    while queue or running:
        while queue and len(running) < jobs:
            spec = queue.pop(0)
            running[_start(job, spec, pristine, out)] = (spec["id"], time.monotonic())
        time.sleep(0.02)
        for pid, (name, started) in list(running.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done == 0 and time.monotonic() - started > limit_s:
                os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                (out / f"{name}.failure").write_text(f"killed after {limit_s:.0f} s: the child outlived its budget")
            elif done == 0:
                continue
            elif not (out / f"{name}.pkl").exists() and not (out / f"{name}.failure").exists():
                (out / f"{name}.failure").write_text(f"the child ended without a result (wait status {status})")
            del running[pid]


def main(argv: list[str]) -> int:
    job = json.loads(Path(argv[0]).read_text())
    out = Path(job["out"])
    import torch

    import verify.observe.compare  # noqa: F401  (imported once here, shared by every child)
    import verify.run.apply  # noqa: F401

    torch.set_num_threads(1)
    sys.path[:0] = [str(Path(job["root"]) / rel) for rel in job["import_paths"]]
    os.chdir(job["root"])
    twice = (PRISTINE, PRISTINE_AGAIN) if job["mutants"] else (PRISTINE,)
    runs = [{"id": name, "overrides": {}, "budget_s": job["pristine_budget_s"]} for name in twice]
    _run(job, runs, None, out, min(len(runs), max(1, job["jobs"])), job["limit_s"])
    if not all((out / f"{name}.pkl").exists() for name in twice):
        return 3
    pristine = pickle.loads((out / f"{PRISTINE}.pkl").read_bytes())
    if len(twice) == 2:
        from verify.observe import compare

        again = pickle.loads((out / f"{PRISTINE_AGAIN}.pkl").read_bytes())["observation"]
        drift = compare.compare(pristine["observation"], again, compare.Tolerance(*job["tolerance"]))
        if not drift.is_equivalent:
            first = drift.first
            where = f"{first.place}: {first.what}: {first.amount}" if first is not None else "?"
            (out / DRIFT).write_text(where)
            return 3
    slowest = max(pristine["seconds"].values(), default=1.0)
    budget = max(job["min_budget_s"], job["budget_factor"] * slowest)
    specs = [{"id": job_id(index), "overrides": overrides, "budget_s": budget}
             for index, overrides in enumerate(job["mutants"].values())]  # fmt: skip
    observation = pristine["observation"] if job["mutants"] else None
    _run(job, specs, observation, out, job["jobs"], job["limit_s"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
