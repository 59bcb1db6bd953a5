"""What a run writes in the project is its own, whatever the source roots: with `source_roots = ["."]` (what the
error for a package folder without `__init__.py` suggests) the cache, the reports and the private copies stay
out of the files the run checks and keys on, so a second run replays the first's verdicts; and a mutant that
really writes into the project is still an exit 4 naming the file, from the guard through the report to the
CLI's last lines."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from verify.config.project import CACHE_DIR, project_files, run_writes
from verify.config.settings import load_config
from verify.report.json_report import read_json
from verify.report.verdict import Status

CALC = """import os


def add(a, b):
    return a + b


def neg(x):
    return -x
"""
# Each run of a gate leaves a line in COUNT (a folder the project declares writable): the test counts gate runs.
GATES = """import os

import pytest

from calc.ops import add, neg


def _ran(name):
    with open(os.path.join(os.environ["GATE_RUNS"], "runs.txt"), "a") as runs:
        runs.write(name + "\\n")


@pytest.mark.gate
def test_add():
    _ran("add")
    assert add(2, 3) == 5


@pytest.mark.gate
def test_neg_is_a_number():
    _ran("neg")
    assert isinstance(neg(1), int)
"""
CATALOG = """import os

from verify.mutation import Mutation, register

register(
    Mutation("add-off-by-one", "off by one", "calc/ops.py", "return a + b", "return a + b + 1"),
    Mutation("neg-identity", "sign dropped", "calc/ops.py", "return -x", "return x"),
)
if os.environ.get("PLANT"):  # a mutant that writes into the user's project, by its absolute path
    register(Mutation("plants-a-file", "writes the project", "calc/ops.py", "return -x",
                      "__import__('pathlib').Path(os.environ['PLANT'], 'planted.txt').write_text('x')\\n    return -x"))
"""


def _project(tmp_path: Path) -> tuple[Path, Path]:
    """A project whose package folder has no __init__.py, verified with source_roots = ["."]; and the folder its
    gates count their runs in."""
    root, runs = tmp_path / "project", tmp_path / "runs"
    (root / "calc").mkdir(parents=True)
    (root / "calc" / "ops.py").write_text(CALC)
    (root / "tests" / "gates").mkdir(parents=True)
    (root / "tests" / "gates" / "test_calc.py").write_text(GATES)
    (root / "calc_mutations.py").write_text(CATALOG)
    runs.mkdir()
    (root / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nmarkers = ["gate: a gate"]\n\n'
        '[tool.dflash]\nmutation_modules = ["calc_mutations"]\n'
        f'gates = ["tests/gates"]\nsource_roots = ["."]\npreload = []\ntimeout_min_s = 5.0\njobs = 2\n'
        f"writable = {json.dumps([str(runs)])}\n"
    )
    return root, runs


def _gate_runs(runs: Path) -> int:
    return len((runs / "runs.txt").read_text().splitlines()) if (runs / "runs.txt").exists() else 0


def test_the_files_a_run_checks_leave_out_what_it_writes(tmp_path: Path, monkeypatch) -> None:
    root, _ = _project(tmp_path)
    own_temp = root / "tmp"
    own_temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(own_temp))  # the private copies inside the project
    monkeypatch.setattr("tempfile.tempdir", None)
    written = (f"{CACHE_DIR}/entry.json", "tmp/dflash-verify-x/pristine/calc/ops.py", "out/report.json")
    for rel in (*written, ".git/HEAD", ".venv/pyvenv.cfg", ".venv/lib/site.py", "calc/__pycache__/ops.pyc"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x")
    assert run_writes(root, [root / "out" / "report.json", tmp_path / "elsewhere.json"]) == {
        CACHE_DIR,
        "tmp",
        "out/report.json",
    }
    files = project_files(load_config(root), [root / "out" / "report.json"])
    assert files == ["calc/ops.py", "calc_mutations.py", "pyproject.toml", "tests/gates/test_calc.py"], files


def test_a_project_verified_from_its_root_runs_twice_and_the_second_run_replays_the_first(
    tmp_path: Path, cli, monkeypatch
) -> None:
    root, runs = _project(tmp_path)
    monkeypatch.setenv("GATE_RUNS", str(runs))
    report_path = root / "report.json"  # inside the source root "."
    # --no-explain: a survivor's explanation is not cached (it runs the reaching gates again on every run); what
    # is counted here is the verdicts' replay.
    first = cli("--project", str(root), "--jobs", "2", "--json", str(report_path), "--no-explain")
    assert first.exit_code == 1, first.output  # a survivor fails the run; no harness error (exit 4)
    report = read_json(report_path)[0]
    assert report.harness_errors == (), report.harness_errors
    assert {r.name: r.status for r in report.mutations} == {
        "add-off-by-one": Status.KILLED, "neg-identity": Status.SURVIVED
    }  # fmt: skip
    ran = _gate_runs(runs)
    assert ran > 0

    second = cli("--project", str(root), "--jobs", "2", "--json", str(report_path), "--no-explain")
    assert second.exit_code == 1, second.output
    report = read_json(report_path)[0]
    assert report.harness_errors == (), report.harness_errors
    assert all(r.cached for r in report.mutations), [(r.name, r.cached) for r in report.mutations]
    assert report.self_check == "cached"
    assert _gate_runs(runs) == ran  # no gate ran again: not the baseline, not a mutant


def test_a_mutant_that_writes_the_project_is_exit_4_naming_the_file_end_to_end(
    tmp_path: Path, cli, monkeypatch
) -> None:
    monkeypatch.setenv("DFLASH_CONFINE", "off")  # as on a kernel without Landlock: the write lands
    root, runs = _project(tmp_path)
    monkeypatch.setenv("GATE_RUNS", str(runs))
    monkeypatch.setenv("PLANT", str(root))
    report_path = root / "report.json"
    done = cli("--project", str(root), "--jobs", "2", "--json", str(report_path))
    assert (root / "planted.txt").exists()
    assert done.exit_code == 4, done.output
    report = read_json(report_path)[0]
    errors = " | ".join(report.harness_errors)
    # The guard's inventory (with --jobs 2 another mutant may have run at the same moment).
    assert re.search(r"user's files: planted\.txt \(new, while [^)]*mutant plants-a-file", errors), errors
    assert "the project's files changed during the run: planted.txt (new)" in errors, errors  # the tree it keyed on
    assert {r.name: r.status for r in report.mutations}["plants-a-file"] is Status.ERROR
    flat = " ".join(done.output.split())
    named = r"error: the run changed the user's files: planted\.txt \(new, while [^)]*plants-a-file"
    assert re.search(named, flat), flat
    assert "planted.txt" in flat[flat.rindex("harness error:") :], flat  # the verdict line, the last one


@pytest.mark.parametrize("num_files", [12])
def test_an_exit_4_names_every_changed_file_however_many(tmp_path: Path, num_files: int) -> None:
    from verify.sandbox.guard import TreeGuard

    root = tmp_path / "p"
    root.mkdir()
    with TreeGuard(root) as guard:
        for number in range(num_files):
            (root / f"f{number:02d}.txt").write_text("x")
    (error,) = guard.errors
    assert all(f"f{number:02d}.txt (new" in error for number in range(num_files)), error
    assert "more" not in error
