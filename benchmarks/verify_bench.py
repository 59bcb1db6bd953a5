"""The verify tool's cost, like against like, all in one run: one plain pytest run of the gates (the median of
three spread over the bench), `dflash verify --first-kill --no-cache`, the full matrix (`dflash verify --no-cache`)
and each run's floor (`verify.run.phases.order.floor_s`: one run of the gates plus, for every mutation, the gates
it ran, each at its time in the plain runs, over the jobs), with the ratios of each run to the gates and to its
floor. Then
the naive way (a fresh pytest process over a private copy with the mutation written in, per mutation, the same
gates in the same order, stopping at the first failure with `-x`) against `--first-kill` at 1 and 2 workers,
the naive verdicts checked equal to verify's.

`BENCH_MUTATIONS=a,b` restricts the catalog (for trying the bench itself); `BENCH_VERIFY=first_kill,full,naive`
picks the parts (default all three; the gates always run, they are every ratio's denominator). The docs quote
full runs only.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_COPY_IGNORE = shutil.ignore_patterns(".git", ".venv", ".cache", "mutants", "reports", ".dflash-cache", "__pycache__")
_DETECTED = {"killed", "caught", "crashed", "timeout"}


VERIFY_PARTS = ("first_kill", "full", "naive")


def _names() -> list[str]:
    chosen = os.environ.get("BENCH_MUTATIONS", "")
    return [n for n in chosen.split(",") if n]


def _parts() -> set[str]:
    chosen = {p for p in os.environ.get("BENCH_VERIFY", ",".join(VERIFY_PARTS)).split(",") if p}
    if unknown := chosen - set(VERIFY_PARTS):
        raise SystemExit(
            f"BENCH_VERIFY: unknown part(s) {', '.join(sorted(unknown))}; known: {', '.join(VERIFY_PARTS)}"
        )
    return chosen


def baseline_gates_s(gate_s: list[dict[str, float]] | None = None) -> float:
    """One plain pytest run of every gate on the unmutated tree (a fresh process, as a user's CI runs them): the
    cost a verify run is measured against. Each gate's own time in it is appended to `gate_s` (the floor's unit:
    untraced, where the baseline's times carry coverage tracing)."""
    with tempfile.TemporaryDirectory() as tmp:
        times = Path(tmp) / "gate_times.json"
        start = time.perf_counter()
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "benchmarks.gate_times"]
        environment = {**os.environ, "BENCH_GATE_TIMES": str(times)}
        command += ["-m", "gate", "tests/gates"]
        subprocess.run(command, cwd=ROOT, capture_output=True, check=False, env=environment)
        elapsed = time.perf_counter() - start
        if gate_s is not None and times.is_file():
            gate_s.append(json.loads(times.read_text()))
    return elapsed


def run_verify(jobs: int, first_kill: bool = True, out: Path | None = None) -> tuple[float, dict]:
    out = out or Path(tempfile.mkdtemp()) / "verify.json"
    command = [sys.executable, "-m", "verify", "verify", "--no-cache", "--jobs", str(jobs), "--json", str(out)]
    command += ["--first-kill"] if first_kill else []
    for name in _names():
        command += ["-m", name]
    start = time.perf_counter()
    subprocess.run(command, cwd=ROOT, capture_output=True, check=False)
    return time.perf_counter() - start, json.loads(out.read_text())


def _naive_one(mutation: object, gates: list[str]) -> bool:
    """True when the gates went red on this mutant (any non-zero pytest exit but 'no tests')."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "p"
        shutil.copytree(ROOT, copy, ignore=_COPY_IGNORE)
        path = copy / mutation.file  # type: ignore[attr-defined]
        path.write_text(path.read_text().replace(mutation.anchor, mutation.replacement, 1))  # type: ignore[attr-defined]
        done = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *gates],
                              cwd=copy, capture_output=True, check=False)  # fmt: skip
        return done.returncode not in (0, 5)


def run_naive(report: dict, workers: int) -> tuple[float, dict[str, bool]]:
    """The same mutations against the same gates verify ran for each, in its order, `workers` fresh pytest
    processes at once."""
    from verify.config.catalog import load_mutations
    from verify.config.settings import load_config

    mutations = load_mutations(load_config(ROOT))
    ran = {m["name"]: m["ran"] for m in report["mutations"] if m["ran"]}
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {name: pool.submit(_naive_one, mutations[name], gates) for name, gates in sorted(ran.items())}
        red = {name: future.result() for name, future in futures.items()}
    return time.perf_counter() - start, red


def floor_of(report_path: Path, gate_s: dict[str, float]) -> float:
    """The floor of the run that wrote `report_path`: the plain runs' per-gate times (`gate_s`) for one run of
    every gate and for the gates each mutant ran (`ran`: in the full matrix, the selection the coverage map
    made; with --first-kill, its pins and the gates up to its first kill), over the jobs it held; cached
    results cost nothing and are left out."""
    from verify.report.json_report import read_report
    from verify.run.phases.order import floor_s

    report, _, info = read_report(report_path)
    fresh = [m.ran for m in report.mutations if m.ran and not m.cached]
    return floor_s(gate_s, fresh, int(info.settings.get("jobs") or 1))


def _median_times(runs: list[dict[str, float]]) -> dict[str, float]:
    """Each gate's median time over the plain runs that timed it."""
    gates = {gate_id for run in runs for gate_id in run}
    return {g: statistics.median(run[g] for run in runs if g in run) for g in gates}


def bench_verify() -> dict:
    """The cost block (gates, first-kill, full matrix, floor, ratios), then the naive comparison."""
    parts, load_at_start = _parts(), _loadavg()
    # The denominator of every ratio: the median of three plain runs of the gates spread over the bench (one
    # before each verify run, one at the end), so one noisy moment moves neither it nor a ratio much.
    gate_s: list[dict[str, float]] = []
    gate_runs = [baseline_gates_s(gate_s)]
    figures: dict = {}
    first_kill: tuple[float, dict] | None = None
    first_kill_out = Path(tempfile.mkdtemp()) / "first_kill.json"
    if "first_kill" in parts:
        first_kill = run_verify(2, out=first_kill_out)
        figures["first_kill_jobs2_s"], report = first_kill
        figures["num_mutations"], figures["score"] = len(report["mutations"]), report["score"]
        gate_runs.append(baseline_gates_s(gate_s))
    if "full" in parts:
        out = Path(tempfile.mkdtemp()) / "full.json"
        full_s, full = run_verify(2, first_kill=False, out=out)
        figures["full_matrix_jobs2_s"] = full_s
        full_out = out
        if first_kill is not None:
            statuses = {m["name"]: m["status"] for m in full["mutations"]}
            figures["full_matrix_statuses_equal_first_kill"] = statuses == {
                m["name"]: m["status"] for m in first_kill[1]["mutations"]
            }
        gate_runs.append(baseline_gates_s(gate_s))
    gates_s = figures["gates_s"] = statistics.median(gate_runs)
    figures["gates_runs_s"] = [round(s, 2) for s in gate_runs]
    # After the last plain run, so each floor's per-gate times are the median of all three.
    if "first_kill" in parts:
        figures["first_kill_floor_s"] = floor_of(first_kill_out, _median_times(gate_s))
    if "full" in parts:
        figures["full_matrix_floor_s"] = floor_of(full_out, _median_times(gate_s))
    if "first_kill_jobs2_s" in figures:
        figures["first_kill_over_gates"] = figures["first_kill_jobs2_s"] / gates_s
        figures["first_kill_over_floor"] = figures["first_kill_jobs2_s"] / figures["first_kill_floor_s"]
    if "full_matrix_jobs2_s" in figures:
        figures["full_matrix_over_gates"] = figures["full_matrix_jobs2_s"] / gates_s
        figures["full_matrix_over_floor"] = figures["full_matrix_jobs2_s"] / figures["full_matrix_floor_s"]
    if "naive" in parts:
        figures.update(bench_naive(first_kill))
    figures["loadavg_start_end"] = f"{load_at_start} / {_loadavg()}"
    return figures


def bench_naive(first_kill_jobs2: tuple[float, dict] | None) -> dict:
    """`--first-kill` against the naive way at 1 and 2 workers, same gates, same order, verdicts compared (the
    cost block's first-kill run stands for 2 workers when it ran)."""
    figures: dict = {}
    for workers in (1, 2):
        verify_s, report = first_kill_jobs2 if workers == 2 and first_kill_jobs2 else run_verify(workers)
        naive_s, naive_red = run_naive(report, workers)
        verify_red = {m["name"]: m["status"] in _DETECTED for m in report["mutations"] if m["ran"]}
        figures[f"verify_jobs{workers}_s"] = verify_s
        figures[f"naive_jobs{workers}_s"] = naive_s
        figures[f"naive_over_verify_jobs{workers}"] = naive_s / verify_s
        figures[f"verdicts_equal_jobs{workers}"] = verify_red == naive_red
        figures[f"verdicts_differ_jobs{workers}"] = sorted(n for n in verify_red if verify_red[n] != naive_red.get(n))
    return figures


def _loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"
