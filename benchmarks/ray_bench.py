"""`--executor ray` against the fork executor, like against like: the whole catalog with `--first-kill` at the same
parallelism (2 jobs), the fork executor on this machine and the Ray executor on a local two-node cluster of one
CPU a node (benchmarks/ray_cluster.py, in namespaces of its own), verdicts checked equal. Both absolute times are
kept beside their ratio, and the Ray executor's overhead per mutation is the difference over the catalog's size.

`BENCH_MUTATIONS=a,b` restricts the catalog (for trying the bench itself); the docs quote full runs only.
`python -m benchmarks.ray_bench` runs this part alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.ray_cluster import ADDRESS, LocalCluster

ROOT = Path(__file__).resolve().parents[1]
JOBS = 2


def _names() -> list[str]:
    return [n for n in os.environ.get("BENCH_MUTATIONS", "").split(",") if n]


def _verify(prefix: list[str], extra: list[str]) -> tuple[float, dict, str]:
    with tempfile.TemporaryDirectory() as tmp:
        return _verify_into(Path(tmp) / "verify.json", prefix, extra)


def _verify_into(out: Path, prefix: list[str], extra: list[str]) -> tuple[float, dict, str]:
    command = [*prefix, sys.executable, "-m", "verify", "verify", "--no-cache", "--first-kill", "--jobs", str(JOBS)]
    command += ["--json", str(out), *extra, *(arg for name in _names() for arg in ("-m", name))]
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False, env=environment)
    elapsed = time.perf_counter() - start
    if not out.is_file():
        raise RuntimeError(
            f"verify wrote no report (exit {done.returncode}): {done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    summary = "\n".join(done.stdout.strip().splitlines()[-5:])  # the summary and the verdict line
    return elapsed, json.loads(out.read_text()), summary


def bench_ray() -> dict:
    fork_s, fork, fork_line = _verify([], [])
    with LocalCluster() as cluster:
        ray_s, ray, ray_line = _verify(cluster.command([]), ["--executor", "ray", "--ray-address", ADDRESS])
    statuses = {m["name"]: m["status"] for m in fork["mutations"]}
    num = len(fork["mutations"])
    return {
        "num_mutations": num,
        "jobs": JOBS,
        "fork_s": fork_s,
        "ray_s": ray_s,
        "ray_over_fork": ray_s / fork_s,
        "ray_overhead_per_mutation_s": (ray_s - fork_s) / max(1, num),
        "verdicts_equal": statuses == {m["name"]: m["status"] for m in ray["mutations"]},
        "verdicts_differ": sorted(
            n for n, s in statuses.items() if {m["name"]: m["status"] for m in ray["mutations"]}.get(n) != s
        ),  # fmt: skip
        "fork_summary": fork_line,
        "ray_summary": ray_line,
    }


if __name__ == "__main__":
    figures = bench_ray()
    for key, value in figures.items():
        print(f"  {key:34s} {value:.3f}" if isinstance(value, float) else f"  {key:34s} {value}")
