"""The observation worker: a subprocess started in a private copy of the project that observes (with the
project's observer, with its gates as workloads, `verify.observe.gate_record`, or both) the pristine
tree (twice, in two children, when there are mutants to compare: two runs that differ mean an observer that is
not deterministic, and every comparison would be noise), then each mutant in a child forked from it, and
compares every mutant with the pristine run there. Jobs are named by number (`m0`, `m1`, ... in the order of
the job's mutants), never by the mutant's name, so no name can collide with the pristine run's files. With the
gates as workloads, the first pristine run runs every gate and measures which run each line of the mutated
files (coverage contexts); each mutant runs the gates that ran its rewritten lines; a gate's value that differs
between the two pristine runs is compared nowhere (UNSTABLE), where an observer's must repeat exactly.

Every child lives under the regime of a verify run's children: hardened (`verify.sandbox.hardening`: a clean
environment, stdin /dev/null, oom_score_adj, memory and file-size ceilings), confined (`verify.sandbox.confine`) to
writing its own scratch folder and its own output folder (`out/<id>/`), the subreaper of what it starts, and
its whole process tree ended when it ends, however it ends (this worker is their subreaper); a child past its
process ceiling is ended. Only the comparison and a digest of each observation come back, as JSON (`out/<id>/
result.json`; `out/<id>/failure` the harness's own failure), so a mutant's observation never crosses a
process boundary and nothing a child wrote is ever unpickled. Each child serves its mutant's files through
`verify.mutation.apply.MutantFinder` from the private copy; the user's tree is never read here. A child that dies
or outlives its budget is reported as a failure of the harness, never as an observation. Run as
`python -m verify.observe.worker JOB.json`; knows nothing of the CLI or of reports.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

__all__ = ["DRIFT", "FAILURE", "PRISTINE", "PRISTINE_AGAIN", "RESULT", "UNSTABLE", "job_id", "main"]

# What each job leaves in its folder of the output folder, named here once (verify.observe.session reads them
# back): `<id>/RESULT` a result, `<id>/FAILURE` the harness's own failure; DRIFT (in the output folder, written
# by this worker) where the two pristine runs first differ.
PRISTINE, PRISTINE_AGAIN, DRIFT = "pristine", "pristine-again", "nondeterministic"
UNSTABLE = "unstable.json"  # the gates' values that differ between the two pristine runs: (gate, function) pairs
RESULT, FAILURE = "result.json", "failure"
_LEFTOVERS_S = 5.0
_KINDS = {"MemoryCeiling": "memory: ", "ProcessCeiling": "processes: "}  # a breach's crash kind, as the run names it


def job_id(index: int) -> str:
    """The id of the job observing the job file's index-th mutant (never the mutant's name, which could be one of
    the names above)."""
    return f"m{index}"


def _child(job: dict[str, Any], spec: dict[str, Any], pristine: Any, out: Path, parent: int) -> None:
    """In the forked child: harden and confine itself, serve the mutant, observe, compare, write the result as
    JSON. Never returns."""
    code = 0
    mine = out / spec["id"]
    try:
        from verify.config.writable import writable_paths
        from verify.sandbox import hardening, reaper
        from verify.sandbox.confine import confine

        hardening.die_with_parent(parent)
        reaper.become_subreaper()  # what the observer starts comes back here, and ends with it
        ceilings = hardening.Ceilings(int(spec.get("memory_bytes", 0)), int(job.get("file_bytes", 0)))
        hardening.harden({}, ceilings)
        tmp = Path(job["tmp"]) / spec["id"]
        tmp.mkdir(parents=True, exist_ok=True)
        # Before the project's code, while this process has one thread: it and all it starts write only here.
        confine([tmp, mine, *writable_paths(job.get("writable", ()))])

        import torch

        from verify.mutation.apply import MutantFinder
        from verify.observe import compare, protocol, record

        root = Path(job["root"])
        os.environ["TMPDIR"] = tempfile.tempdir = str(tmp)
        torch.manual_seed(0)
        roots = [root / rel for rel in job["import_paths"]]
        overrides = {str(root / rel): text for rel, text in spec["overrides"].items()}
        sys.meta_path.insert(0, MutantFinder(roots, job["packages"], overrides))
        cov = _start_reach(root, spec["overrides"]) if pristine is not None else None
        observer = protocol.make(job["observe"]) if job["observe"] else None
        scrub = ((str(tmp), "<tmp>"), (str(root), "<project>"))
        tolerance = compare.Tolerance(*job["tolerance"])
        stop = None
        if observer is not None and pristine is not None and job.get("first_only"):

            def stop(so_far: record.Observation) -> bool:
                # Only the workload just finished can hold a new divergence; the pristine run's part of it.
                workload = so_far.entries[-1][0][0] if so_far.entries else ""
                ours = record.Observation(tuple(e for e in so_far.entries if e[0][0] == workload))
                theirs = record.Observation(tuple(e for e in pristine.entries if e[0][0] == workload))
                return not compare.compare(theirs, ours, tolerance).is_equivalent

        observation, seconds = record.Observation(()), dict[str, float]()
        if observer is not None:
            observation, seconds = protocol.observe(observer, scrub, spec.get("budget_s"), stop)
        result: dict[str, Any] = {"id": spec["id"]}
        gates = job.get("gates")
        recording = None
        if gates is not None and (pristine is None or spec.get("gate_ids")):
            from verify.observe import gate_record, reach

            # The pristine run: every gate, with which gates run which line of the mutated files (measured);
            # a mutant: the gates that ran its rewritten lines in the pristine run.
            targets = spec["gate_ids"] if pristine is not None else gates["paths"]
            measure = reach.start_contexts(root, gates["files"]) if pristine is None and spec["measure"] else None
            limits = gate_record.RecordLimits(**gates.get("limits", {}))
            args = [*targets, *gates["options"]]
            recording = gate_record.record_gates(
                root, gates["source_roots"], args, scrub, spec.get("budget_s"), limits, measure if cov is None else cov
            )
            observation = record.Observation(observation.entries + recording.observation.entries)
            seconds.update(recording.seconds)
            result.update(gate_ids=list(recording.seconds), functions=recording.functions, capped=recording.capped)
            if measure is not None:
                result["gate_lines"] = reach.contexts_by_line(measure, root, gates["files"])
        ignore = {tuple(pair) for pair in job.get("ignore", ())}
        if ignore:  # values that differ between two pristine runs: compared nowhere
            observation = record.Observation(tuple(e for e in observation.entries if (e[0][0], e[0][3]) not in ignore))
        result.update(digest=record.digest(observation), seconds=seconds)
        # Its peak resident memory (a fork's counts only the pages it touched): what a mutant's ceiling scales.
        result["peak_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        result["gates"] = {str(k): str(v) for k, v in protocol.gates_of(observer).items()} if observer else {}
        if cov is not None:
            result["reach"] = _collect_reach(cov, root, spec["overrides"])
        if pristine is None:
            result["observation"] = record.to_data(observation)
        else:
            gate_ids = set(result.get("gate_ids", ())) | set(spec.get("gate_ids", ()))
            if observer is not None and job.get("first_only"):  # stopped early: compare the workloads it ran
                ran = set(observation.workloads)
                pristine = record.Observation(tuple(e for e in pristine.entries if e[0][0] in ran))
            every_gate = set((gates or {}).get("all", ()))
            mine_gates, mine_observed = _split(observation, gate_ids, every_gate)
            theirs_gates, theirs_observed = _split(pristine, gate_ids, every_gate)
            if observer is not None:
                result["comparison"] = compare.compare(theirs_observed, mine_observed, tolerance).to_data()
                result["gate_comparison"] = compare.compare(theirs_gates, mine_gates, tolerance).to_data()
            else:
                result["comparison"] = compare.compare(theirs_gates, mine_gates, tolerance).to_data()
        (mine / "result.part").write_text(json.dumps(result))
        (mine / "result.part").replace(mine / RESULT)
        reaper.end_children(within_s=_LEFTOVERS_S)  # the job is over: what it started ends with it
    except BaseException:  # the harness's own failure (an observer that cannot load): reported by name
        (mine / FAILURE).write_text(traceback.format_exc())
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _split(observation: Any, gate_ids: set[str], every_gate: set[str]) -> tuple[Any, Any]:
    """(the part of `gate_ids`, the observer's part: no gate's) of an observation, by workload."""
    from verify.observe.record import Observation

    gates = tuple(e for e in observation.entries if e[0][0] in gate_ids)
    observed = tuple(e for e in observation.entries if e[0][0] not in gate_ids | every_gate)
    return Observation(gates), Observation(observed)


def _start_reach(root: Path, overrides: dict[str, str]) -> Any:
    """Line and branch coverage of a mutant's changed lines over its observation (`verify.observe.reach`)."""
    from verify.observe import reach

    return reach.start(root, overrides)


def _collect_reach(cov: Any, root: Path, overrides: dict[str, str]) -> dict[str, Any]:
    """What of the changed lines the observation reached: plain JSON data (`verify.observe.reach.collect`)."""
    from verify.observe import reach

    return reach.collect(cov, root, overrides)


def _start(job: dict[str, Any], spec: dict[str, Any], pristine: Any, out: Path) -> int:
    (out / spec["id"]).mkdir()
    parent = os.getpid()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.setpgid(0, 0)
        _child(job, spec, pristine, out, parent)
    return pid


def _fail(out: Path, name: str, why: str) -> None:
    if not (out / name / RESULT).exists() and not (out / name / FAILURE).exists():
        (out / name / FAILURE).write_text(why)


def _run(job: dict[str, Any], specs: list[dict[str, Any]], pristine: Any, out: Path, jobs: int, limit_s: float) -> None:
    """Up to `jobs` children at once; a child past `limit_s`, its process ceiling or its memory ceiling
    (`verify.run.execution.ceilings`) is ended with everything beneath it, and whatever a child left behind ends when it
    does."""
    from verify.run.execution import ceilings
    from verify.sandbox import hardening, reaper

    processes_max = int(job.get("processes_max", 0))
    queue, running, limits, ticks = list(specs), dict[int, tuple[str, float]](), dict[int, hardening.Ceilings](), 0
    while queue or running:
        while queue and len(running) < jobs:
            spec = queue.pop(0)
            pid = _start(job, spec, pristine, out)
            running[pid] = (spec["id"], time.monotonic())
            limits[pid] = hardening.Ceilings(int(spec.get("memory_bytes", 0)), 0, processes_max)
        time.sleep(0.02)
        ticks += 1
        for pid, (name, started) in list(running.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done == 0:
                # The verify run's watch: a lone child's memory every tick, a tree's every 25th (costlier).
                kind, why = ceilings.check(pid, reaper.tree(pid), limits[pid], ticks % 25 == 0)
                if not kind and time.monotonic() - started <= limit_s:
                    continue
                if not kind:
                    reaper.end_tree(pid)
                    why = f"killed after {limit_s:.0f} s: the child outlived its budget"
                os.waitpid(pid, 0)
                _fail(out, name, f"{_KINDS.get(kind, '')}{why}")
            else:
                _fail(out, name, f"the child ended without a result (wait status {status})")
            del running[pid]
            if reaper.has_strays(running):
                reaper.end_children(keep=set(running), within_s=_LEFTOVERS_S)


def _read(out: Path, name: str) -> dict[str, Any]:
    data = json.loads((out / name / RESULT).read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{name}: a result must be an object")
    return data


def main(argv: list[str]) -> int:
    job = json.loads(Path(argv[0]).read_text())
    out = Path(job["out"])
    import torch

    import verify.mutation.apply  # noqa: F401
    import verify.observe.compare  # noqa: F401  (imported once here, shared by every child)
    from verify.observe import compare, reach, record

    if job.get("gates") is not None:
        import verify.observe.gate_record  # noqa: F401  (pytest with it: imported once, shared by every child)
    from verify.sandbox import reaper

    reaper.become_subreaper()  # what a child leaves behind comes back here, and is ended
    torch.set_num_threads(1)
    sys.path[:0] = [str(Path(job["root"]) / rel) for rel in job["import_paths"]]
    os.chdir(job["root"])
    twice = (PRISTINE, PRISTINE_AGAIN) if job["mutants"] else (PRISTINE,)
    share = int(job.get("memory_share_bytes", 0))
    runs = [{"id": name, "overrides": {}, "budget_s": job["pristine_budget_s"], "memory_bytes": share,
             "measure": name == PRISTINE} for name in twice]  # fmt: skip
    _run(job, runs, None, out, min(len(runs), max(1, job["jobs"])), job["limit_s"])
    if not all((out / name / RESULT).exists() for name in twice):
        return 3
    pristine = _read(out, PRISTINE)
    observation = record.from_data(pristine["observation"])
    every_gate = list(pristine.get("gate_ids", ()))
    if len(twice) == 2:
        again = record.from_data(_read(out, PRISTINE_AGAIN)["observation"])
        drift = compare.compare(observation, again, compare.Tolerance(*job["tolerance"]))
        unstable = {(d.workload, d.what) for d in drift.divergences if d.workload in every_gate}
        first = next((d for d in drift.divergences if d.workload not in every_gate), None)
        if first is not None:  # the observer's own workloads must repeat: every comparison would be noise
            (out / DRIFT).write_text(f"{first.place}: {first.what}: {first.amount}")
            return 3
        if unstable:  # a gate's value that differs run to run (a clock, an unseeded draw): compared nowhere
            job["ignore"] = sorted(unstable)
            observation = record.Observation(
                tuple(e for e in observation.entries if (e[0][0], e[0][3]) not in unstable)
            )
            (out / UNSTABLE).write_text(json.dumps(sorted(unstable)))
    slowest = max(pristine["seconds"].values(), default=1.0)
    budget = max(job["min_budget_s"], job["budget_factor"] * slowest)
    memory = share
    if job.get("memory_factor") and pristine.get("peak_bytes"):
        wanted = max(int(job["memory_min_bytes"]), int(job["memory_factor"] * pristine["peak_bytes"]))
        memory = min(share, wanted) if share else wanted
    gate_lines = pristine.get("gate_lines", {})
    if job.get("gates") is not None:
        job["gates"]["all"] = every_gate
    texts = {rel: (Path(job["root"]) / rel).read_text() for overrides in job["mutants"].values() for rel in overrides}
    specs = [{"id": job_id(index), "overrides": overrides, "budget_s": budget, "memory_bytes": memory,
              "gate_ids": reach.gates_reaching(gate_lines, texts, overrides, every_gate) if job.get("gates") else []}
             for index, overrides in enumerate(job["mutants"].values())]  # fmt: skip
    _run(job, specs, observation if job["mutants"] else None, out, job["jobs"], job["limit_s"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
