"""`make bench`: the runner's speed on the shipped fixture, its batch-1 time against the reference's on several
model sizes (benchmarks/runner_sizes.py), and the verify tool's speed
against one baseline run of its gates and against the naive way at equal parallelism (benchmarks/verify_bench.py),
and the Ray executor on a local two-node cluster against the fork executor (benchmarks/ray_bench.py), what
confining each child costs (benchmarks/confine_bench.py), and how verify's cost grows with the catalog (10 to
1,000 generated mutations: benchmarks/scale_bench.py), and a pull request's `--changed-since` run against its
gates (benchmarks/changed_bench.py).
Everything is measured in one run and printed as a table plus JSON (reports/bench.json).

`BENCH_SECTIONS=verify,runner` runs only those sections (default all: startup, runner, verify, confinement,
ray, scale, changed), for a quick run; see benchmarks/verify_bench.py for choosing the verify section's parts, and
`BENCH_SIZES=fixture,deep` picks the runner section's batch-1 sizes (default all). `BENCH_BUSY=2` keeps two
spinning processes running for the whole bench (the goals' busy machine), ended by pid at its end. The last block
printed, `[goals]`, is issue 55's goals, each with this run's figure and whether it is met.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from benchmarks.changed_bench import bench_changed
from benchmarks.confine_bench import bench_confinement
from benchmarks.matmul_floor import Replay, record
from benchmarks.ray_bench import bench_ray
from benchmarks.runner_sizes import SIZES, BenchSize, checkpoint
from benchmarks.runner_sizes import prompts as size_prompts
from benchmarks.scale_bench import bench_scale
from benchmarks.verify_bench import bench_verify
from runner import Engine, EngineConfig, SamplingParams
from verify.fixtures.catalog import FIXTURES_ROOT, read_manifest

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = FIXTURES_ROOT / "stride-dflash"
MAX_TOKENS = 64


def _prompts(count: int) -> list[list[int]]:
    base = read_manifest(FIXTURE)["audit_prompts"]
    return [base[i % len(base)] for i in range(count)]


DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # the runner and the reference on the same device


def _tokens_per_s(engine: Engine, prompts: list[list[int]], repeats: int = 10) -> tuple[float, list]:
    """Best throughput of `repeats` runs of the whole batch. A batch-16 run lasts ~0.1 s on the CPU, so a
    few runs are at the mercy of one scheduler hiccup; the warm-up runs the same batch, so its shapes and
    page allocation are not timed."""
    params = SamplingParams(max_tokens=MAX_TOKENS)
    engine.generate(prompts, params)  # warm-up
    best, outs = 0.0, []
    for _ in range(repeats):
        start = time.perf_counter()
        outs = engine.generate(prompts, params)
        elapsed = time.perf_counter() - start
        best = max(best, sum(len(o.token_ids) for o in outs) / elapsed)
    return best, outs


def _engine(folder: Path = FIXTURE, draft: bool = True) -> Engine:
    return Engine.from_pretrained(
        folder / "target", folder / "draft" if draft else None, device=DEVICE, config=EngineConfig(max_num_seqs=16)
    )


def bench_runner() -> dict:
    figures: dict = {"device": DEVICE}
    figures["plain_batch1_tok_s"], _ = _tokens_per_s(_engine(draft=False), _prompts(1))
    for batch in (1, 4, 16):
        figures[f"spec_batch{batch}_tok_s"], outs = _tokens_per_s(_engine(), _prompts(batch))
        if batch == 16:
            figures["mean_acceptance"] = statistics.fmean(a for o in outs for a in o.acceptance_lengths)
    figures.update(bench_reference())
    if "reference_batch1_tok_s" in figures:  # the fixture's size was measured (BENCH_SIZES may leave it out)
        ratio = figures["spec_batch16_tok_s"] / figures["reference_batch1_tok_s"]
        figures["batch16_over_reference_batch1"] = ratio
        figures["batch16_vs_reference"] = (
            f"{ratio:.2f}x ({figures['spec_batch16_tok_s']:.0f} tok/s batch 16 vs "
            f"{figures['reference_batch1_tok_s']:.0f} tok/s reference batch 1; goal >= 10)"
        )
    return figures


def bench_reference() -> dict:
    """Our batch-1 time against the reference's on every size of benchmarks/runner_sizes.py (`BENCH_SIZES=a,b`
    picks some), one line per size and the worst size last. The fixture's figures keep their old keys."""
    chosen = [s for s in os.environ.get("BENCH_SIZES", "").split(",") if s]
    known = {size.name: size for size in SIZES}
    if unknown := [s for s in chosen if s not in known]:
        raise SystemExit(f"BENCH_SIZES: unknown size(s) {', '.join(unknown)}; known: {', '.join(known)}")
    figures: dict = {}
    per_size: dict[str, dict] = {}
    for size in SIZES:
        if chosen and size.name not in chosen:
            continue
        result = bench_size(size)
        per_size[size.name] = result
        figures[f"batch1 {size.name}"] = result["line"]
        figures[f"batch1 {size.name} floor"] = result["floor_line"]
        print(f"batch1 {size.name}: {result['line']}", file=sys.stderr, flush=True)
        print(f"batch1 {size.name} floor: {result['floor_line']}", file=sys.stderr, flush=True)
    if "fixture" in per_size:
        fixture = per_size["fixture"]
        figures["batch1_vs_reference"] = fixture["line"]
        figures.update({key: fixture[key] for key in FIXTURE_KEYS})
    worst = max(per_size, key=lambda name: per_size[name]["ours_over_reference"])
    worst_ratio = per_size[worst]["ours_over_reference"]
    figures["batch1_worst_size"] = worst
    figures["batch1_worst_ratio"] = worst_ratio
    figures["batch1_worst"] = (
        f"{worst} at {worst_ratio:.3f} ({per_size[worst]['shape']}); goal <= {BATCH1_GOAL} on the "
        f"{len(per_size)} of {len(SIZES)} sizes measured: "
        f"{'met' if worst_ratio <= BATCH1_GOAL else 'not met'}"
    )
    floor_worst = max(per_size, key=lambda name: per_size[name]["floor_ratio"])
    floor_worst_ratio = per_size[floor_worst]["floor_ratio"]
    figures["batch1_floor_worst_size"] = floor_worst
    figures["batch1_floor_worst_ratio"] = floor_worst_ratio
    figures["batch1_floor_worst"] = (
        f"{floor_worst} at {floor_worst_ratio:.3f} of its matmul floor; goal <= {FLOOR_GOAL} on the "
        f"{len(per_size)} of {len(SIZES)} sizes measured: {'met' if floor_worst_ratio <= FLOOR_GOAL else 'not met'}"
    )
    figures["batch1_all_same_tokens"] = all(r["reference_same_tokens"] for r in per_size.values())
    figures["batch1_sizes"] = per_size
    return figures


FIXTURE_KEYS = ("ours_batch1_s", "reference_batch1_s", "ours_over_reference", "ours_over_reference_min_over_min",
                "reference_batch1_tok_s", "reference_same_tokens")  # fmt: skip
BATCH1_GOAL = 0.75
FLOOR_GOAL = 1.15  # our batch-1 decode over the time of its own matmuls alone (benchmarks/matmul_floor.py)


def bench_size(size: BenchSize) -> dict:
    """Our batch-1 time against dflash_generate's on one size's weights, prompts and device (float32), in
    `size.rounds` alternating rounds (ours, then the reference's). The headline ratio is the median of the
    rounds' own ratios: a round compares two runs seconds apart, so a noisy neighbour slows both alike, where a
    ratio of two minima rewards whichever side drew the one quiet moment. Both minima are kept beside it."""
    ref_path = os.environ.get("DFLASH_REFERENCE_PATH", str(ROOT / ".cache" / "ref"))
    if ref_path not in sys.path:
        sys.path.insert(0, ref_path)
    import dflash.model as ref  # the optional oracle, installed beside the venv
    from transformers import Qwen3ForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # two "Loading weights" bars a size would bury the per-size lines
    if DEVICE == "cpu":
        ref._cuda_time = time.perf_counter  # the reference synchronises CUDA when timing
    folder = checkpoint(size)
    target = Qwen3ForCausalLM.from_pretrained(folder / "target", dtype=torch.float32).to(DEVICE).eval()
    draft = ref.DFlashDraftModel.from_pretrained(folder / "draft", dtype=torch.float32).to(DEVICE).eval()
    ours = _engine(folder)
    prompts = size_prompts(size, folder)
    params = SamplingParams(max_tokens=MAX_TOKENS)
    lengths: list[int] = []

    def run_ours() -> list[list[int]]:
        outs = [ours.generate([p], params)[0] for p in prompts]
        lengths[:] = [n for o in outs for n in o.acceptance_lengths]
        return [list(o.token_ids) for o in outs]

    def run_reference() -> list[list[int]]:
        return [
            ref.dflash_generate(draft, target, torch.tensor([p], device=DEVICE), MAX_TOKENS, None)[0, len(p) :].tolist()
            for p in prompts
        ]

    def timed(fn: Callable[[], list[list[int]]]) -> tuple[float, list[list[int]]]:
        if DEVICE == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        out = fn()
        if DEVICE == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start, out

    run_ours(), run_reference()  # warm-up
    floor = Replay(record(run_ours))  # a warm decode's matmuls, replayed in every round below
    floor.run()  # warm-up
    rounds = size.rounds
    ours_times, ref_times, floor_times, ours_ids, ref_ids = [], [], [], [], []
    for _ in range(rounds):
        elapsed, ours_ids = timed(run_ours)
        ours_times.append(elapsed)
        elapsed, ref_ids = timed(run_reference)
        ref_times.append(elapsed)
        floor_times.append(floor.timed())
    ratio = statistics.median(a / b for a, b in zip(ours_times, ref_times, strict=True))
    ours_s, ref_s = statistics.median(ours_times), statistics.median(ref_times)
    # The same paired method against the floor: each round's decode over that round's replay, a second apart.
    floor_ratio = statistics.median(a / b for a, b in zip(ours_times, floor_times, strict=True))
    floor_s = statistics.median(floor_times)
    num_tokens = sum(len(ids) for ids in ref_ids)
    same = ours_ids == ref_ids
    min_over_min = min(ours_times) / min(ref_times)
    return {
        "shape": size.describe(),
        "prompts": len(prompts),
        "rounds": rounds,
        "mean_acceptance": statistics.fmean(lengths),
        "ours_batch1_s": ours_s,
        "reference_batch1_s": ref_s,
        "ours_over_reference": ratio,
        "ours_over_reference_min_over_min": min_over_min,
        # Best against best, as the batched figures are (each the best of its runs).
        "reference_batch1_tok_s": num_tokens / min(ref_times),
        "reference_same_tokens": same,
        "floor_s": floor_s,
        "floor_matmuls": floor.num_calls,
        "floor_ratio": floor_ratio,
        "floor_line": (
            f"{floor_ratio:.3f} (median of {rounds} paired rounds; medians decode {ours_s:.3f} s vs matmul floor "
            f"{floor_s:.3f} s, {floor.num_calls} matmuls replayed; goal <= {FLOOR_GOAL})"
        ),
        "line": (
            f"{ratio:.3f} (median of {rounds} paired rounds of {len(prompts)} prompts; medians ours {ours_s:.3f} s "
            f"vs reference {ref_s:.3f} s; min/min {min_over_min:.3f}; acceptance {statistics.fmean(lengths):.2f}; "
            f"same tokens: {'yes' if same else 'NO'}; goal <= {BATCH1_GOAL})"
        ),
    }


# --- CLI start-up (issue 12): every `--help` answers in under 0.5 s, median of 5 runs. ---------------------
STARTUP_COMMANDS = (("--help",), ("verify", "--help"), ("sweep", "--help"), ("mutations", "show", "--help"))


def bench_startup(runs: int = 5) -> dict:
    """Median wall time of `dflash ... --help` through the installed console script, a fresh process each run,
    and its median CPU time (user + system), which a busy machine inflates far less than the wall time."""
    import resource

    script = Path(sys.executable).with_name("dflash")
    command = [str(script)] if script.is_file() else [sys.executable, "-m", "verify"]
    figures = {}
    for args in STARTUP_COMMANDS:
        walls, cpus = [], []
        for _ in range(runs):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run([*command, *args], cwd=ROOT, capture_output=True, check=True)
            walls.append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        figures[f"dflash {' '.join(args)} wall (median s)"] = statistics.median(walls)
        figures[f"dflash {' '.join(args)} cpu (median s)"] = statistics.median(cpus)
    return figures


SECTIONS: dict[str, Callable[[], dict]] = {
    "startup": bench_startup,
    "runner": bench_runner,
    "verify": bench_verify,
    "confinement": bench_confinement,
    "ray": bench_ray,
    "scale": bench_scale,
    "changed": bench_changed,
}


# Issue 55's goals: (name, section, figure, at most). Each figure is a ratio measured within one run.
GOALS = (
    ("a gate in a child / plain pytest (median)", "verify", "gate_in_child_over_plain_median", 1.1),
    ("an outside engine's gate in a child / plain", "verify", "example_gate_in_child_over_plain_median", 1.1),
    ("per-mutant overhead, 1,000 / 10 mutations", "scale", "per-mutant overhead 1000 / 10", 1.1),
    ("HTML report of 1,000 mutations interactive (s)", "scale", "1000 mutations: html interactive (s)", 2.0),
    ("--changed-since on one function / its gates", "changed", "ratio", 1.5),
    ("--first-kill / the gates", "verify", "first_kill_over_gates", 1.3),
    ("the full matrix / its floor", "verify", "full_matrix_over_floor", 1.05),
    ("batch 1 / its matmul floor, worst size", "runner", "batch1_floor_worst_ratio", 1.15),
)


def goals(figures: dict[str, dict]) -> dict[str, str]:
    """Each goal whose figure this run measured: its value, its limit, met or not."""
    found = {}
    for name, section, key, limit in GOALS:
        value = figures.get(section, {}).get(key)
        if isinstance(value, int | float):
            found[name] = f"{value:.3f} (goal <= {limit}: {'met' if value <= limit else 'NOT met'})"
    return found


def _busy(count: int) -> list[subprocess.Popen]:
    """`count` processes that spin for the whole bench (`BENCH_BUSY`): the busy machine of the goals' second run."""
    spin = [sys.executable, "-c", "while True: pass"]
    return [subprocess.Popen(spin, stdin=subprocess.DEVNULL) for _ in range(count)]


def main() -> None:
    torch.set_num_threads(1)
    chosen = [s for s in os.environ.get("BENCH_SECTIONS", ",".join(SECTIONS)).split(",") if s]
    if unknown := [s for s in chosen if s not in SECTIONS]:
        raise SystemExit(f"BENCH_SECTIONS: unknown section(s) {', '.join(unknown)}; known: {', '.join(SECTIONS)}")
    busy = int(os.environ.get("BENCH_BUSY", "0") or 0)
    loadavg = " ".join(f"{x:.2f}" for x in os.getloadavg())
    machine = {"commit": _commit(), "loadavg_at_start": loadavg, "cores": os.cpu_count(), "busy_loops": busy}
    figures: dict[str, dict] = {"machine": machine}
    spinners = _busy(busy)
    try:
        figures.update({name: SECTIONS[name]() for name in SECTIONS if name in chosen})
    finally:
        for spinner in spinners:  # ended by pid, whatever a section raised
            spinner.kill()
            spinner.wait()
    machine["loadavg_at_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    figures["goals"] = goals(figures)
    Path(ROOT / "reports").mkdir(exist_ok=True)
    (ROOT / "reports" / "bench.json").write_text(json.dumps(figures, indent=2) + "\n")
    for section, values in figures.items():
        print(f"[{section}]")
        for key, value in values.items():
            if isinstance(value, dict):  # nested detail (per-size figures): in the JSON only
                continue
            print(f"  {key:34s} {value:.3f}" if isinstance(value, float) else f"  {key:34s} {value}")


def _commit() -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                           text=True, check=False).stdout.strip()  # fmt: skip
    return done.stdout.strip() + (" (with uncommitted changes)" if dirty else "")


if __name__ == "__main__":
    main()
