"""Each job's streams are its own, against the real CLI and the fork executor's warm workers: a mutant that floods
stdout and stderr is `crashed (output)` at its output ceiling, the mutations beside it keep the verdicts a clean
run gives them, and nothing of the flood is left on disk or held open by a worker.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from verify.config.settings import ConfigError, load_config
from verify.mutation import Mutation
from verify.report.crashes import CrashKind
from verify.report.json_report import read_json
from verify.report.matrix import LEGEND, build_matrix
from verify.report.verdict import Status
from verify.run.execution.fork import Executor, Job

CORE = '''"""Code under test."""


def add(a, b):
    return a + b


def mul(a, b):
    return a * b


def sub(a, b):
    return a - b
'''

# Three gate files, so a worker serves many jobs of each kind, the flooders' among them.
GATES = {
    f"test_{name}.py": f"""import pytest
from hostile import core


@pytest.mark.gate
def test_{name}():
    print("a line of the gate's own")
    assert core.{name}({a}, {b}) == {want}
"""
    for name, a, b, want in (("add", 2, 3, 5), ("mul", 4, 3, 12), ("sub", 7, 2, 5))
}

# Writes `FLOOD_MIB` MiB to each stream, through Python's stream and the descriptor: the capture's file grows by both.
FLOOD = """import os
import sys

FLOOD_MIB = 150


def flood():
    chunk = "x" * (1 << 20)
    for _ in range(FLOOD_MIB):
        sys.stdout.write(chunk)
        os.write(2, chunk.encode())
    sys.stdout.flush()
"""

_FLOOD = "return __import__('hostile.noise').noise.flood() or a {} b"
CONTROLS = {
    "add-kill": ("return a + b", "return a + b + 1"),
    "mul-kill": ("return a * b", "return a * b + 1"),
    "mul-same": ("return a * b", "return b * a"),
    "sub-crash": ("return a - b", "raise RuntimeError('boom')"),
    "sub-same": ("return a - b", "return -(b - a)"),
}
FLOODERS = {
    "floods-add": ("return a + b", _FLOOD.format("+")),
    "floods-mul": ("return a * b", _FLOOD.format("*")),
}
SETTINGS = {
    "jobs": 2, "timeout_factor": 5.0, "timeout_min_s": 30.0, "flake_reruns": 1, "preload": [],
    "memory_factor": 1.0, "memory_min_mb": 256, "output_max_mb": 8,
}  # fmt: skip


def _project(make, root: Path) -> Path:
    edits = {**CONTROLS, **FLOODERS}
    mutations = [Mutation(name, f"streams: {name}", "hostile/core.py", *edit) for name, edit in edits.items()]
    project = make(root).write(core=CORE, gates=GATES, modules={"noise.py": FLOOD}, mutations=mutations,
                               settings=SETTINGS)  # fmt: skip
    return project.root


def _statuses(cli, root: Path, report: Path, names: list[str]) -> dict[str, object]:
    args = ["--project", str(root), "--jobs", "2", "--no-cache", "--no-explain", "--json", str(report)]
    result = cli(*args, *(a for name in names for a in ("--mutation", name)))
    assert result.exit_code in (0, 1), result.output
    return {r.name: r for r in read_json(report)[0].mutations}


def test_a_flooding_mutant_is_crashed_by_its_output_and_leaves_the_other_verdicts_as_a_clean_run_gives_them(
    tmp_path, cli, hostile_project, monkeypatch
) -> None:
    root = _project(hostile_project, tmp_path / "p")
    run_tmp = tmp_path / "run-tmp"  # where the executor keeps its copies and the jobs' folders
    run_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(run_tmp))
    clean = _statuses(cli, root, tmp_path / "clean.json", list(CONTROLS))
    assert {name: clean[name].status for name in CONTROLS} == {
        "add-kill": Status.KILLED, "mul-kill": Status.KILLED, "mul-same": Status.SURVIVED,
        "sub-crash": Status.CRASHED, "sub-same": Status.SURVIVED,
    }  # fmt: skip
    flooded = _statuses(cli, root, tmp_path / "flooded.json", [*CONTROLS, *FLOODERS])
    assert {name: flooded[name].status for name in CONTROLS} == {name: clean[name].status for name in CONTROLS}
    assert {name: flooded[name].killed_by for name in CONTROLS} == {name: clean[name].killed_by for name in CONTROLS}
    for name in FLOODERS:
        crashed = flooded[name]
        assert (crashed.status, crashed.crash_kind) == (Status.CRASHED, CrashKind.OUTPUT), crashed
        assert crashed.attempts == 2 and crashed.reason.startswith("output: "), crashed
        assert "output_max_mb" in crashed.reason, crashed
    report = read_json(tmp_path / "flooded.json")[0]
    cells = {row.name: row.cells for row in build_matrix(report).rows}
    assert "O" in cells["floods-add"] and "O" in cells["floods-mul"], cells
    assert "O output" in LEGEND
    # Nothing of the floods is left: every job's folder, capture files and log went with the run.
    assert not list(run_tmp.iterdir())


def _flood_job(root: Path, key: str) -> Job:
    source = (root / "hostile" / "core.py").read_text()
    return Job(key, ("tests/gates/test_add.py::test_add",), 60.0,
               (("hostile/core.py", source.replace(*FLOODERS["floods-add"])),))  # fmt: skip


def _held_deleted(pid: int) -> list[tuple[str, int]]:
    """(target, size) of each deleted file process `pid` still holds open."""
    held = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.endswith(" (deleted)"):
                held.append((target, os.stat(f"/proc/{pid}/fd/{fd}").st_size))
        except OSError:
            continue
    return held


def test_a_warm_workers_jobs_share_no_capture_file_and_its_worker_holds_nothing_a_job_wrote(
    tmp_path, hostile_project
) -> None:
    root = _project(hostile_project, tmp_path / "p")
    config = load_config(root)
    source = (root / "hostile" / "core.py").read_text()
    control = Job("control", ("tests/gates/test_add.py::test_add",), 60.0,
                  (("hostile/core.py", source.replace("return a + b", "return b + a")),))  # fmt: skip
    with Executor(config) as executor:
        executor.run([Job("warm-up", ("tests/gates/test_add.py::test_add",), 60.0)], 1)  # starts the worker
        assert executor.warm.ready(60.0) == 1
        # One child at a time, so one worker serves the flood and then the control.
        flooded, after = executor.run([_flood_job(root, "flood"), control], 1)
        assert executor.warm.served == 2, executor.warm.why_cold
        workers = executor.warm.pids()
        assert workers
        held = [(target, size) for pid in workers for target, size in _held_deleted(pid)]
    assert flooded.state == "died" and "output ceiling of 8 MiB" in flooded.reason, flooded
    assert flooded.outcomes[0].exc_type == "OutputCeiling", flooded
    assert after.state == "done" and [o.outcome.value for o in after.outcomes] == ["passed"], after
    assert all(size < (1 << 20) for _, size in held), held


def test_the_output_ceiling_is_a_named_setting(tmp_path, hostile_project) -> None:
    root = _project(hostile_project, tmp_path / "p")
    assert load_config(root).output_max_mb == 8
    text = (root / "pyproject.toml").read_text().replace("output_max_mb = 8", "output_max_mb = -1")
    (root / "pyproject.toml").write_text(text)
    with pytest.raises(ConfigError, match="output_max_mb must be a finite number >= 0"):
        load_config(root)


def test_a_childs_output_is_counted_over_its_whole_job_though_pytest_truncates_each_capture(tmp_path) -> None:
    from verify.run.child.streams import OUTPUT_EXIT, JobStreams
    from verify.run.execution.ceilings import output
    from verify.sandbox.hardening import Ceilings

    log, out, err = (tmp_path / name for name in ("child.log", "stdout", "stderr"))
    mib = 1 << 20
    log.write_bytes(bytes(mib))
    pid = os.fork()
    if pid == 0:  # as pytest does: each phase's capture is read back and truncated after the check
        streams = JobStreams((log, out, err), 2 * mib)
        for size in (mib // 2, mib // 2, mib // 2):  # 1 MiB of log, then 1.5 MiB captured in three phases
            out.write_bytes(bytes(size))
            streams.check()
            out.write_bytes(b"")
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == OUTPUT_EXIT  # at the third phase: 2.5 MiB, none held at once
    ceilings = Ceilings(output_bytes=2 * mib)
    assert output((log, out, err), ceilings) == ("", "")  # what is on disk now is under the ceiling...
    exc_type, why = output((log, out, err), ceilings, OUTPUT_EXIT)  # ...the child's own count is not
    assert exc_type == "OutputCeiling" and "output ceiling of 2 MiB ([tool.dflash] output_max_mb)" in why
