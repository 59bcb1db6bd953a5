"""What confinement and the tree check cost: the per-child price of Landlock, the per-run price of the two
inventories of the project, and one small verify run with confinement on and off (DFLASH_CONFINE=off), its
wall time divided by the children it ran.

The per-child figure is measured where it is paid: a forked child that confines itself and exits, against one
that only exits, the median of many; the end-to-end runs show that nothing else moved.
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
from pathlib import Path

from verify.sandbox.confine import confine, probe
from verify.sandbox.inventory import snapshot

ROOT = Path(__file__).resolve().parents[1]
TOY = ROOT / "tests" / "toy_project"


def _fork_s(body: bool, base: Path, rounds: int) -> tuple[float, float]:
    """Median wall time from fork to reaped child, and median time of `confine` inside the child (with `body`;
    the child confines itself to `base`, else it only exits)."""
    walls, inside = [], []
    for _ in range(rounds):
        read_end, write_end = os.pipe()
        start = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                began = time.perf_counter()
                if body:
                    confine([base])
                os.write(write_end, repr(time.perf_counter() - began).encode())
            except BaseException:
                code = 1
            os._exit(code)
        os.close(write_end)
        spent = os.read(read_end, 64)
        os.close(read_end)
        _, status = os.waitpid(pid, 0)
        walls.append(time.perf_counter() - start)
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError("confine() failed in the benchmark's child")
        inside.append(float(spent))
    return statistics.median(walls), statistics.median(inside)


def _toy_run(confined: bool) -> tuple[float, int]:
    """Wall time of `dflash verify --no-cache` on a copy of the toy project, and how many children it ran."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "toy"
        shutil.copytree(TOY, copy, ignore=shutil.ignore_patterns("__pycache__", ".dflash-cache"))
        env = {**os.environ, **({} if confined else {"DFLASH_CONFINE": "off"})}
        out = Path(tmp) / "r.json"
        start = time.perf_counter()
        command = [sys.executable, "-m", "verify", "verify", "--no-cache", "--project", str(copy), "--json", str(out)]
        subprocess.run(command, env=env, capture_output=True, check=False)
        elapsed = time.perf_counter() - start
        report = json.loads(out.read_text())
    # One child per mutant attempt; the baseline's, the self-check's and the flake re-runs' come on top, so the
    # per-child figure below is an upper bound.
    children = sum(m.get("attempts", 1) for m in report["mutations"] if m.get("ran"))
    return elapsed, children


def bench_confinement(rounds: int = 200, runs: int = 3) -> dict:
    figures: dict = {"confinement": probe().describe()}
    with tempfile.TemporaryDirectory() as tmp:
        (bare, _), (confined, inside) = _fork_s(False, Path(tmp), rounds), _fork_s(True, Path(tmp), rounds)
    figures["fork_exit_median_ms"] = bare * 1e3
    figures["fork_confine_exit_median_ms"] = confined * 1e3
    figures["confine_per_child_ms"] = (confined - bare) * 1e3  # what a child pays, copy-on-write faults included
    figures["confine_call_in_child_median_ms"] = inside * 1e3
    figures["load_per_core"] = os.getloadavg()[0] / (os.cpu_count() or 1)  # the figures above are noise past ~1
    start = time.perf_counter()
    entries = len(snapshot(ROOT).entries)
    figures["inventory_entries"] = entries
    figures["inventory_of_this_repo_ms"] = (time.perf_counter() - start) * 1e3  # paid twice per run, not per child
    on, off = [], []
    for _ in range(runs):  # interleaved, so a change in the machine's load hits both alike
        on.append(_toy_run(True))
        off.append(_toy_run(False))
    children = on[0][1]
    figures["toy_mutant_children_per_run"] = children
    figures["toy_verify_confined_median_s"] = statistics.median(s for s, _ in on)
    figures["toy_verify_unconfined_median_s"] = statistics.median(s for s, _ in off)
    figures["toy_per_child_difference_ms"] = (
        (figures["toy_verify_confined_median_s"] - figures["toy_verify_unconfined_median_s"]) / children * 1e3
    )
    return figures


if __name__ == "__main__":
    for key, value in bench_confinement().items():
        print(f"  {key:34s} {value:.3f}" if isinstance(value, float) else f"  {key:34s} {value}")
