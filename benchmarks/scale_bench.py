"""How verify's cost grows with the work: a generated engine and catalog of 10, 100 and 1,000 mutations over 50,
100 and 500 gates, gates so fast that the harness is all there is to measure.

The engine is `scaled/` (one small function a mutation, 50 to a file); gate j checks the functions i with
i % gates == j, and one more gate sums them all, so each mutation is reached by two gates. Each size runs as a
CI job matrix does: `dflash verify --shard 1/2` and `--shard 2/2` (`--no-cache --no-explain --jobs 2`), then
`dflash verify merge` writing the JSON and HTML reports; and once more with a single mutation, the fixed cost
(start-up, baseline, self-check, report) that the per-mutant figure subtracts. Per size:

- per-mutant overhead: the mutation phase's wall time (both shards', timed from the arrival of its progress
  lines) over the mutations; and the per-mutant run: the shards' wall time less twice the one-mutation run's
  (each shard pays the fixed cost once) over the mutations. A size under 200 mutations runs its two shards
  again, up to 5 rounds (10 mutations: 5 rounds, 100: 2), and both figures are the rounds' medians: ten
  mutations' phase lasts a few tenths of a second, and one round of it moved by a quarter between runs;
- the driver's peak memory (VmHWM of the `dflash` process itself, polled, its children not counted);
- the merge's wall time and the JSON and HTML reports' sizes;
- the HTML report opened in Chromium (when on PATH): until its `load` event, and until the matrix answers a
  click (the first mutation's row link followed).

The goal (issue 55): the per-mutant overhead at 1,000 mutations at most 1.1x that at 10; the HTML with 1,000
mutations interactive in at most 2 s. `BENCH_SCALE=10,100` picks the sizes (default all three).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

SIZES = {10: 50, 100: 100, 1000: 500}  # mutations: gates
PER_FILE = 50
_JOBS_MEASURED, _MAX_ROUNDS = 200, 5  # a size under 200 mutations runs again, at most 5 rounds in all
OVERHEAD_GOAL, HTML_GOAL_S = 1.1, 2.0
# "mutations: 10 to run", "mutations (3 decided without a child): 4/7 in 2s, about 1s left (last: m0003)"
_PHASE = re.compile(r"^([a-z][^:]*): (?:(\d+)/(\d+) in |\d+ to run)")
_NOTHING = '    assert importlib.import_module("scaled")\n'  # a gate with no function of its own (more gates than them)


def _rounds(mutations: int) -> int:
    """How many times a size's two shards run: enough that the mutation phases add up to about 200 jobs."""
    return max(1, min(_MAX_ROUNDS, round(_JOBS_MEASURED / mutations)))


def _function(i: int) -> str:
    return f"def f{i:04d}(x):\n    return x + {i + 1}  # m{i:04d}\n"


def write_project(root: Path, mutations: int, gates: int) -> None:
    """The generated engine, its gates and its catalog under `root` (a fresh folder)."""
    package = root / "scaled"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    files = (mutations + PER_FILE - 1) // PER_FILE
    for k in range(files):
        body = "".join(_function(i) + "\n\n" for i in range(k * PER_FILE, min(mutations, (k + 1) * PER_FILE)))
        (package / f"part{k:02d}.py").write_text(f'"""Generated part {k}."""\n\n\n' + body)
    where = {i: f"scaled.part{i // PER_FILE:02d}" for i in range(mutations)}
    tests = root / "tests" / "gates"
    tests.mkdir(parents=True)
    per_file = max(1, gates // 10)
    for start in range(0, gates, per_file):
        lines = ["import importlib\n\nimport pytest\n\npytestmark = pytest.mark.gate\n\n"]
        for j in range(start, min(gates, start + per_file)):
            checks = [i for i in range(mutations) if i % gates == j]
            body = "".join(f"    assert importlib.import_module({where[i]!r}).f{i:04d}(1) == {i + 2}\n" for i in checks)
            lines.append(f"\ndef test_gate_{j:04d}():\n{body or _NOTHING}\n")
        (tests / f"test_part{start // per_file:02d}.py").write_text("".join(lines))
    total = sum(i + 2 for i in range(mutations))
    sums = "".join(f"    total += importlib.import_module({where[i]!r}).f{i:04d}(1)\n" for i in range(mutations))
    (tests / "test_sum.py").write_text(
        f"import importlib\n\nimport pytest\n\n\n@pytest.mark.gate\ndef test_sum():\n    total = 0\n{sums}"
        f"    assert total == {total}\n"
    )
    records = "".join(
        f"    Mutation('m{i:04d}', 'adds the wrong constant', 'scaled/part{i // PER_FILE:02d}.py', "
        f"'x + {i + 1}  # m{i:04d}', 'x - {i + 1}  # m{i:04d}'),\n"
        for i in range(mutations)
    )
    catalog = f"from verify.mutation import Mutation, register\n\nregister(\n{records})\n"
    (root / "scaled_mutations.py").write_text(catalog)
    (root / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nmarkers = ["gate: a gate"]\n\n[tool.dflash]\nmutation_modules = '
        '["scaled_mutations"]\ngates = ["tests/gates"]\nsource_roots = ["scaled"]\npreload = []\njobs = 2\n'
    )


def _dflash() -> list[str]:
    script = Path(sys.executable).with_name("dflash")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "verify"]


def _timed(args: list[str], cwd: Path) -> tuple[float, int, dict[str, float]]:
    """Wall seconds; the process's own peak resident bytes (VmHWM, polled: its children are not counted); and
    each phase's seconds, from the arrival of its first progress line ("mutations: 10 to run") to that of its
    last ("mutations: 10/10 in 3s"), read as they come (the progress' own figures are whole seconds)."""
    start = time.perf_counter()
    process = subprocess.Popen(
        [*_dflash(), *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "COLUMNS": "120"},
    )  # fmt: skip
    arrivals: list[tuple[float, str]] = []
    reader = threading.Thread(
        target=lambda: arrivals.extend((time.perf_counter(), line) for line in process.stdout or ()), daemon=True
    )
    reader.start()
    peak = 0
    status = Path(f"/proc/{process.pid}/status")
    while process.poll() is None:
        try:
            for line in status.read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]) * 1024)
        except OSError:
            pass
        time.sleep(0.05)
    reader.join()
    wall = time.perf_counter() - start
    if process.returncode not in (0, 1):
        output = "".join(line for _, line in arrivals)
        raise RuntimeError(f"dflash {' '.join(args)} exited {process.returncode}:\n{output[-3000:]}")
    phases: dict[str, float] = {}
    begun: dict[str, float] = {}
    for at, line in arrivals:
        if match := _PHASE.match(line):
            name = match.group(1).split(" (")[0]
            begun.setdefault(name, at)
            if match.group(2) is None or match.group(2) == match.group(3):  # "N to run" with nothing, or the last
                phases[name] = at - begun[name]
    return wall, peak, phases


def _html_timings(page_file: Path) -> dict[str, float]:
    """Seconds until the page's load event, and until a click on the first mutation's link is answered."""
    chromium = shutil.which("chromium")
    if chromium is None:
        return {}
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        start = time.perf_counter()
        page.goto(page_file.as_uri(), wait_until="load")
        loaded = time.perf_counter() - start
        link = page.locator("a[href^='#']").first
        link.click()
        page.evaluate("() => new Promise(requestAnimationFrame)")
        answered = time.perf_counter() - start
        browser.close()
    return {"html load (s)": loaded, "html interactive (s)": answered}


def bench_size(mutations: int, gates: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "project"
        write_project(root, mutations, gates)
        common = ["verify", "--no-cache", "--no-explain", "--jobs", "2"]
        one_s, _, _ = _timed([*common, "-m", "m0000", "--json", str(Path(tmp) / "one.json")], root)
        # A small size's mutation phase lasts a few tenths of a second, within one machine hiccup of its noise:
        # it is run `_rounds` times and each figure is the median over the rounds (the last round's reports kept).
        rounds = _rounds(mutations)
        walls, phases_s, peak = [], [], 0
        for _ in range(rounds):
            shards_s, phase = 0.0, 0.0
            for k in (1, 2):
                out = str(Path(tmp) / f"s{k}.json")
                wall, shard_peak, phases = _timed([*common, "--shard", f"{k}/2", "--json", out], root)
                shards_s, peak, phase = shards_s + wall, max(peak, shard_peak), phase + phases.get("mutations", 0.0)
            walls.append(shards_s)
            phases_s.append(phase)
        shards_s, phase = statistics.median(walls), statistics.median(phases_s)
        out_json, out_html = Path(tmp) / "all.json", Path(tmp) / "all.html"
        merge_s, _, _ = _timed(["verify", "merge", str(Path(tmp) / "s1.json"), str(Path(tmp) / "s2.json"),
                                "--json", str(out_json), "--html", str(out_html)], root)  # fmt: skip
        merged = json.loads(out_json.read_text())
        figures = {
            "mutations": float(mutations),
            "gates": float(gates + 1),
            "killed": float(sum(1 for m in merged["mutations"] if m["status"] == "killed")),
            "rounds": float(rounds),
            "one-mutation run (s)": one_s,
            "two shards (s)": shards_s,
            # The mutation phase's wall time a mutant (two children at once): what grows with the catalog.
            "per-mutant overhead (s)": phase / mutations,
            "per-mutant overhead, each round (s)": [p / mutations for p in phases_s],
            # The shards' wall time less the fixed cost each pays once, a mutant: the rest of the run included.
            "per-mutant run (s)": (shards_s - 2 * one_s) / mutations,
            "driver peak memory (MiB)": peak / 2**20,
            "merge (s)": merge_s,
            "json (KiB)": out_json.stat().st_size / 1024,
            "html (KiB)": out_html.stat().st_size / 1024,
        }
        figures.update(_html_timings(out_html))
        return figures


def bench_scale() -> dict:
    chosen = [int(s) for s in os.environ.get("BENCH_SCALE", ",".join(map(str, SIZES))).split(",") if s]
    if unknown := [s for s in chosen if s not in SIZES]:
        raise SystemExit(f"BENCH_SCALE: unknown size(s) {unknown}; known: {', '.join(map(str, SIZES))}")
    by_size = {size: bench_size(size, SIZES[size]) for size in chosen}
    result: dict = {"sizes": {str(size): figures for size, figures in by_size.items()}}
    for size, figures in by_size.items():
        result[f"{size} mutations: per-mutant overhead (s)"] = figures["per-mutant overhead (s)"]
        result[f"{size} mutations: driver peak (MiB)"] = figures["driver peak memory (MiB)"]
        result[f"{size} mutations: merge (s)"] = figures["merge (s)"]
        result[f"{size} mutations: html (KiB)"] = figures["html (KiB)"]
        if "html interactive (s)" in figures:
            result[f"{size} mutations: html interactive (s)"] = figures["html interactive (s)"]
    smallest, largest = min(by_size), max(by_size)
    if smallest != largest:
        ratio = by_size[largest]["per-mutant overhead (s)"] / by_size[smallest]["per-mutant overhead (s)"]
        result[f"per-mutant overhead {largest} / {smallest}"] = ratio
        result["per-mutant overhead goal"] = f"<= {OVERHEAD_GOAL} ({'met' if ratio <= OVERHEAD_GOAL else 'NOT met'})"
    if "html interactive (s)" in by_size[largest]:
        met = by_size[largest]["html interactive (s)"] <= HTML_GOAL_S
        result["html goal"] = f"<= {HTML_GOAL_S} s at {largest} ({'met' if met else 'NOT met'})"
    return result
