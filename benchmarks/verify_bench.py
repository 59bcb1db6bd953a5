"""The verify tool's cost, like against like, all in one run: one plain pytest run of the gates (the median of
three spread over the bench), `dflash verify --first-kill --no-cache`, the full matrix (`dflash verify --no-cache`)
and each run's floor (`verify.run.phases.order.floor_s`: one run of the gates plus, for every mutation, the gates
it ran, each at its time in the plain runs, over the jobs), with the ratios of each run to the gates and to its
floor. Then
the naive way (a fresh pytest process over a private copy with the mutation written in, per mutation, the same
gates in the same order, stopping at the first failure with `-x`) against `--first-kill` at 1 and 2 workers,
the naive verdicts checked equal to verify's.

Each run also gives a gate inside a mutant's child against the same gate under plain pytest (`gate_in_child`), and
the `example` part does the same for examples/lookup-engine's gate-kit gates, like for like in control mutants' children
(brackets around an expression: the same work as plain pytest).

`BENCH_MUTATIONS=a,b` restricts the catalog (for trying the bench itself); `BENCH_VERIFY=first_kill,full,naive,
example` picks the parts (default all four; the gates always run, they are every ratio's denominator). The docs quote
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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_COPY_IGNORE = shutil.ignore_patterns(".git", ".venv", ".cache", "mutants", "reports", ".dflash-cache", "__pycache__")
_DETECTED = {"killed", "caught", "crashed", "timeout"}


VERIFY_PARTS = ("first_kill", "full", "naive", "example")


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
    if out is None:  # a report nobody reads again: written to a folder removed once it is read
        with tempfile.TemporaryDirectory() as tmp:
            return run_verify(jobs, first_kill, Path(tmp) / "verify.json")
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


def reruns_of(report_path: Path, gate_s: dict[str, float], first_kill: bool) -> float:
    """What the corroboration policy re-ran in the run that wrote `report_path`, at the plain runs' per-gate times
    over its jobs, as `floor_of` counts gates: the flake check's pristine re-runs of every gate the policy calls
    suspect (`Policy.flake_suspects`, times the mode's re-runs) and one more run of each gate a second child or
    seed corroborated. Cached results cost nothing and are left out. Not in the floor (no harness is in it);
    the floor plus this is what the run's own policy asks for, so the ratio over it is the harness's share."""
    from verify.config.settings import load_config
    from verify.report.json_report import read_report
    from verify.report.verdict import Corroboration
    from verify.run.phases.corroboration import Policy

    report, _, info = read_report(report_path)
    config = load_config(ROOT)
    fresh = [m for m in report.mutations if not m.cached]
    suspects = Policy.of(config).flake_suspects(fresh, seed_to_come=False)
    total = config.flake_reruns_for(first_kill) * sum(gate_s.get(gate_id, 0.0) for gate_id in suspects)
    again = {Corroboration.REPEATED, Corroboration.RESEEDED, Corroboration.UNCONFIRMED, Corroboration.CHANCE}
    total += sum(gate_s.get(o.gate_id, 0.0) for m in fresh for o in m.outcomes if o.corroboration in again)
    return total / max(1, int(info.settings.get("jobs") or 1))


def gate_in_child(
    report_path: Path, gate_s: dict[str, float], keep: Callable[[str], bool] = lambda name: True
) -> dict[str, float]:
    """A gate inside a mutant's child against the same gate under plain pytest (issue 55: at most 1.1x): over
    the gates that passed in some child of a mutation `keep` names (a red gate stops early or runs longer, so it
    is no like for like), each gate's median time in the children over its plain time; the median of those
    ratios, and the sum of the medians over the sum of the plain times (the slow gates weigh in)."""
    from verify.report.json_report import read_report

    report, _, _ = read_report(report_path)
    in_child: dict[str, list[float]] = {}
    for result in report.mutations:
        if result.cached or not keep(result.name):
            continue
        for outcome in result.outcomes:
            if str(outcome.outcome) == "passed" and outcome.gate_id in gate_s and gate_s[outcome.gate_id] > 0:
                in_child.setdefault(outcome.gate_id, []).append(outcome.duration_s)
    if not in_child:
        return {}
    medians = {gate: statistics.median(times) for gate, times in in_child.items()}
    ratios = [medians[gate] / gate_s[gate] for gate in medians]
    return {
        "gates_compared": float(len(medians)),
        "median_ratio": statistics.median(ratios),
        "sum_ratio": sum(medians.values()) / sum(gate_s[gate] for gate in medians),
    }


_EXAMPLE = ROOT / "examples" / "lookup-engine"
_EXAMPLE_SUITE = "tests/test_engine.py"
_EXAMPLE_PLAIN_RUNS = 3
# The example adopted as `dflash init` adopts it (tests/examples/test_lookup_example.py), with its own catalog.
_EXAMPLE_TABLE = f"""
[tool.dflash]
gates = ["tests"]
gate_marker = ""
source_roots = ["lookupspec"]
mutation_modules = ["engine_mutations"]
statistical_gates = ["{_EXAMPLE_SUITE}::test_acceptance_rule_has_speculative_samplings_law",
                     "{_EXAMPLE_SUITE}::test_first_token_follows_the_targets_law"]
jobs = 1
"""
# Control mutants, appended to the copy's catalog: each puts brackets around an expression, so its child runs the
# gates that reach that line doing exactly their plain work. A real mutant that survives may still change a
# gate's work (a drafter looking one token back lowers acceptance, and the greedy gate then verifies more
# blocks), so only the controls' children give "the same gate" of the goal. Three anchors reach all five gates
# between them; three rounds of each give every gate a median of three children.
_CONTROL_ANCHORS = (
    ("lookupspec/model.py", "self.keys[self.length : end] = keys", "self.keys[self.length : end] = (keys)"),
    ("lookupspec/accept.py", "ratio = p[i, x] / q[i, x]", "ratio = (p[i, x] / q[i, x])"),
    ("lookupspec/drafter.py", "context = tokens[-self.n :]", "context = (tokens[-self.n :])"),
)
_CONTROL_ROUNDS = 3
_CONTROL_PREFIX = "bench-control-"
_CONTROLS = (
    "\n\nfrom verify import Mutation as _BenchMutation  # noqa: E402\n\nregister(\n"
    + "".join(
        f"    _BenchMutation(name={_CONTROL_PREFIX + str(k) + '-' + str(n)!r}, bug_class='none: a control (brackets)', "
        f"file={file!r}, anchor={anchor!r}, replacement={replacement!r}),\n"
        for k, (file, anchor, replacement) in enumerate(_CONTROL_ANCHORS)
        for n in range(_CONTROL_ROUNDS)
    )
    + ")\n"
)


def bench_example_gate_in_child() -> dict:
    """The outside engine's gate-kit gates (examples/lookup-engine) in a mutant's child against plain pytest,
    one child at a time, both at the example's own one thread: what issue 55 found at 4-6x on an outside
    engine. The plain side is three runs of the example's suite, each gate at its median. The mutation run is
    `dflash verify --no-cache --no-explain` over the example's catalog."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "lookup-engine"
        shutil.copytree(_EXAMPLE, root, ignore=shutil.ignore_patterns("__pycache__", ".dflash-cache", "mutants"))
        pyproject = root / "pyproject.toml"
        pyproject.write_text(pyproject.read_text() + _EXAMPLE_TABLE)
        catalog = root / "engine_mutations.py"
        catalog.write_text(catalog.read_text() + _CONTROLS)
        # Three plain runs, each gate at its median (as the repository's gates are): one run's time of a
        # gate under a second is the noise of that moment, and it is every ratio's denominator.
        plain_runs, gate_s = [], []
        for k in range(_EXAMPLE_PLAIN_RUNS):
            times = Path(tmp) / f"gate_times_{k}.json"
            environment = {**os.environ, "BENCH_GATE_TIMES": str(times), "PYTHONPATH": str(ROOT)}
            command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "benchmarks.gate_times"]
            start = time.perf_counter()
            subprocess.run([*command, "tests"], cwd=root, capture_output=True, check=False, env=environment)
            plain_runs.append(time.perf_counter() - start)
            if times.is_file():
                gate_s.append(json.loads(times.read_text()))
        plain_s = statistics.median(plain_runs)
        out = Path(tmp) / "verify.json"
        command = [sys.executable, "-m", "verify", "verify", "--no-cache", "--no-explain", "--json", str(out)]
        start = time.perf_counter()
        subprocess.run(command, cwd=root, capture_output=True, check=False)
        verify_s = time.perf_counter() - start
        plain, compared = _median_times(gate_s), gate_s and out.is_file()
        control = gate_in_child(out, plain, lambda name: name.startswith(_CONTROL_PREFIX)) if compared else {}
        survivors = gate_in_child(out, plain, lambda name: not name.startswith(_CONTROL_PREFIX)) if compared else {}
    figures: dict = {"example_plain_suite_s": plain_s, "example_verify_s": verify_s}
    if control:
        figures["example_gate_in_child_gates"] = int(control["gates_compared"])
        figures["example_gate_in_child_over_plain_median"] = control["median_ratio"]
        figures["example_gate_in_child_over_plain_sum"] = control["sum_ratio"]
    if survivors:  # the real mutants' passing gates: the figure before the controls, work changes and all
        figures["example_gate_in_mutants_child_over_plain_median"] = survivors["median_ratio"]
        figures["example_gate_in_mutants_child_over_plain_sum"] = survivors["sum_ratio"]
    return figures


def _median_times(runs: list[dict[str, float]]) -> dict[str, float]:
    """Each gate's median time over the plain runs that timed it."""
    gates = {gate_id for run in runs for gate_id in run}
    return {g: statistics.median(run[g] for run in runs if g in run) for g in gates}


def bench_verify() -> dict:
    """The cost block (gates, first-kill, full matrix, floor, ratios), then the naive comparison; the runs'
    reports in a scratch folder removed at the end."""
    with tempfile.TemporaryDirectory() as tmp:
        return _bench_verify(Path(tmp))


def _bench_verify(scratch: Path) -> dict:
    parts, load_at_start = _parts(), _loadavg()
    # The denominator of every ratio: the median of three plain runs of the gates spread over the bench (one
    # before each verify run, one at the end), so one noisy moment moves neither it nor a ratio much.
    gate_s: list[dict[str, float]] = []
    gate_runs = [baseline_gates_s(gate_s)]
    figures: dict = {}
    first_kill: tuple[float, dict] | None = None
    first_kill_out = scratch / "first_kill.json"
    if "first_kill" in parts:
        first_kill = run_verify(2, out=first_kill_out)
        figures["first_kill_jobs2_s"], report = first_kill
        figures["num_mutations"], figures["score"] = len(report["mutations"]), report["score"]
        gate_runs.append(baseline_gates_s(gate_s))
    if "full" in parts:
        out = scratch / "full.json"
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
    # Each floor, and the same with the policy's re-runs (flake check, second children and seeds) added: what
    # is above the second is the harness's own (start-up, coverage tracing, forks, confinement, idle workers).
    if "first_kill" in parts:
        figures["first_kill_floor_s"] = floor_of(first_kill_out, _median_times(gate_s))
        figures["first_kill_reruns_s"] = reruns_of(first_kill_out, _median_times(gate_s), first_kill=True)
    if "full" in parts:
        figures["full_matrix_floor_s"] = floor_of(full_out, _median_times(gate_s))
        figures["full_matrix_reruns_s"] = reruns_of(full_out, _median_times(gate_s), first_kill=False)
    # A gate in a child against the same gate under plain pytest, from the fullest run made.
    compared = full_out if "full" in parts else first_kill_out if "first_kill" in parts else None
    if compared is not None and (child := gate_in_child(compared, _median_times(gate_s))):
        figures["gate_in_child_gates"] = int(child["gates_compared"])
        figures["gate_in_child_over_plain_median"] = child["median_ratio"]
        figures["gate_in_child_over_plain_sum"] = child["sum_ratio"]
    if "first_kill_jobs2_s" in figures:
        figures["first_kill_over_gates"] = figures["first_kill_jobs2_s"] / gates_s
        figures["first_kill_over_floor"] = figures["first_kill_jobs2_s"] / figures["first_kill_floor_s"]
        with_reruns = figures["first_kill_floor_s"] + figures["first_kill_reruns_s"]
        figures["first_kill_over_floor_and_reruns"] = figures["first_kill_jobs2_s"] / with_reruns
    if "full_matrix_jobs2_s" in figures:
        figures["full_matrix_over_gates"] = figures["full_matrix_jobs2_s"] / gates_s
        figures["full_matrix_over_floor"] = figures["full_matrix_jobs2_s"] / figures["full_matrix_floor_s"]
        with_reruns = figures["full_matrix_floor_s"] + figures["full_matrix_reruns_s"]
        figures["full_matrix_over_floor_and_reruns"] = figures["full_matrix_jobs2_s"] / with_reruns
    if "naive" in parts:
        figures.update(bench_naive(first_kill))
    if "example" in parts:
        figures.update(bench_example_gate_in_child())
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
