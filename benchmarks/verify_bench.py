"""The verify tool's speed, like against like: `dflash verify --first-kill` and the naive way (a fresh pytest
process over a private copy with the mutation written in, per mutation, the same gates in the same order,
stopping at the first failure with `-x`) at the same parallelism (1 and 2 workers), the naive verdicts checked
equal to verify's, and both set against the median of three plain runs of the gates, all in one run. The full matrix
(`dflash verify` without `--first-kill`) is timed once, at 2 workers, against the same baseline.

`BENCH_MUTATIONS=a,b` restricts the catalog (for trying the bench itself); the README quotes full runs only.
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


def _names() -> list[str]:
    chosen = os.environ.get("BENCH_MUTATIONS", "")
    return [n for n in chosen.split(",") if n]


def baseline_gates_s() -> float:
    """One plain pytest run of every gate on the unmutated tree (a fresh process, as a user's CI runs them): the
    cost a verify run is measured against."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gate", "tests/gates"],
                   cwd=ROOT, capture_output=True, check=False)  # fmt: skip
    return time.perf_counter() - start


def run_verify(jobs: int, first_kill: bool = True) -> tuple[float, dict]:
    out = Path(tempfile.mkdtemp()) / "verify.json"
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
    from verify.run.config.catalog import load_mutations
    from verify.run.config.settings import load_config

    mutations = load_mutations(load_config(ROOT))
    ran = {m["name"]: m["ran"] for m in report["mutations"] if m["ran"]}
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {name: pool.submit(_naive_one, mutations[name], gates) for name, gates in sorted(ran.items())}
        red = {name: future.result() for name, future in futures.items()}
    return time.perf_counter() - start, red


def bench_verify() -> dict:
    # The denominator of every ratio: the median of three plain runs of the gates, spread over the bench (one
    # before each first-kill verify run, one at the end), so one noisy moment moves neither it nor a ratio much.
    gate_runs = [baseline_gates_s()]
    figures: dict = {}
    for workers in (1, 2):
        if workers > 1:
            gate_runs.append(baseline_gates_s())
        verify_s, report = run_verify(workers)
        naive_s, naive_red = run_naive(report, workers)
        verify_red = {m["name"]: m["status"] in _DETECTED for m in report["mutations"] if m["ran"]}
        figures[f"verify_jobs{workers}_s"] = verify_s
        figures[f"naive_jobs{workers}_s"] = naive_s
        figures[f"naive_over_verify_jobs{workers}"] = naive_s / verify_s
        figures[f"verdicts_equal_jobs{workers}"] = verify_red == naive_red
        figures[f"verdicts_differ_jobs{workers}"] = sorted(n for n in verify_red if verify_red[n] != naive_red.get(n))
        figures["num_mutations"] = len(report["mutations"])
        figures["score"] = report["score"]
    full_s, full = run_verify(2, first_kill=False)
    gate_runs.append(baseline_gates_s())
    gates_s = figures["baseline_gates_s"] = statistics.median(gate_runs)
    figures["baseline_gates_runs_s"] = [round(s, 2) for s in gate_runs]
    for workers in (1, 2):
        figures[f"verify_over_baseline_jobs{workers}"] = figures[f"verify_jobs{workers}_s"] / gates_s
    figures["verify_full_matrix_jobs2_s"] = full_s
    figures["verify_full_matrix_over_baseline_jobs2"] = full_s / gates_s
    statuses = {m["name"]: m["status"] for m in full["mutations"]}
    figures["full_matrix_statuses_equal_first_kill"] = statuses == {m["name"]: m["status"] for m in report["mutations"]}
    return figures
