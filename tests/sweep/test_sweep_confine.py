"""A sweep keeps mutmut's mutants out of the user's files: Landlock confines mutmut and every mutant to the private
copy, its temp folder and `[tool.dflash] writable`; the project is inventoried before and after, and a change
voids every verdict (exit 4), confined or not.

The project here is built so that one of mutmut's own operator mutants escapes: `pick` returns the gate's own
temp folder, and its mutant (`True` -> `False`) returns the folder in ESCAPE_TO, the user's project, where the
gate then writes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verify.cli.sweep import sweep_app
from verify.report.verdict import Status
from verify.sandbox import launch
from verify.sandbox.confine import ConfineError, probe
from verify.sweep.driver import SweepConfig, run_sweep
from verify.sweep.result import SweepOutcome
from verify.sweep.verdicts import to_run_report

PICK = """def pick(own, outside):
    mine = True
    return own if mine else outside
"""
GATE = """import os
from pathlib import Path

from escaper.pick import pick


def test_writes_only_into_its_own_folder(tmp_path):
    folder = Path(pick(str(tmp_path), os.environ["ESCAPE_TO"]))
    (folder / "escaped.txt").write_text("written by a gate\\n")
    assert folder == tmp_path
"""
CATALOG = """from verify.mutation import Mutation, register

register(Mutation(name="pick-outside", bug_class="The folder picked is the other one.", file="escaper/pick.py",
                  anchor="mine = True", replacement="mine = False"))
"""
PYPROJECT = """[tool.pytest.ini_options]
addopts = "-q -p no:cacheprovider"

[tool.dflash]
source_roots = ["escaper"]
gates = ["tests"]
gate_marker = ""
mutation_modules = ["escaper_mutations"]
"""


def _project(root: Path) -> Path:
    (root / "escaper").mkdir(parents=True)
    (root / "escaper" / "__init__.py").write_text("")
    (root / "escaper" / "pick.py").write_text(PICK)
    (root / "tests").mkdir()
    (root / "tests" / "test_pick.py").write_text(GATE)
    (root / "escaper_mutations.py").write_text(CATALOG)
    (root / "pyproject.toml").write_text(PYPROJECT)
    return root


def _sweep(root: Path) -> SweepConfig:
    return SweepConfig(
        root=root, paths=("escaper",), jobs=1, gates=("tests",), gate_marker="", environ=(("ESCAPE_TO", str(root)),)
    )


@pytest.mark.skipif(not probe().active, reason="the kernel has no Landlock: only detection applies")
def test_confined_mutant_cannot_write_into_the_project(tmp_path: Path) -> None:
    root = _project(tmp_path / "project")
    result = run_sweep(_sweep(root))
    assert result.outcome is SweepOutcome.COMPLETE, result.message
    assert result.confinement.startswith("landlock ABI"), result.confinement
    assert not (root / "escaped.txt").exists()
    assert result.harness_errors == ()
    # The escaping mutants' writes were refused: their gate went red (PermissionError), so they are killed. The one
    # survivor still picks the gate's own folder (`mine or True`): an equivalent mutant, not an escape.
    survivors = [m.mutated for m in result.mutants if m.status is Status.SURVIVED]
    assert survivors == ["return own if (mine) or True else outside"], survivors
    assert sum(m.status is Status.KILLED for m in result.mutants) == len(result.mutants) - 1 >= 2


def test_a_change_to_the_project_voids_every_verdict_and_exits_4(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("DFLASH_CONFINE", "off")  # as on a kernel without Landlock: detection alone
    monkeypatch.setenv("ESCAPE_TO", str(tmp_path / "project"))
    root = _project(tmp_path / "project")
    result = run_sweep(_sweep(root))
    assert (root / "escaped.txt").exists()  # unconfined, the mutant wrote it
    assert result.confinement.startswith("off"), result.confinement
    assert len(result.harness_errors) == 1 and "escaped.txt" in result.harness_errors[0], result.harness_errors
    assert "the run changed the user's files" in result.harness_errors[0]
    # Every mutant that ran a gate loses its verdict: the sweep cannot tell which one wrote.
    assert len(result.mutants) >= 3 and {m.status for m in result.mutants} == {Status.ERROR}
    report, _ = to_run_report(result)
    assert report.harness_errors == result.harness_errors and report.confinement == result.confinement

    (root / "escaped.txt").unlink()
    args = ["--root", str(root), "--jobs", "1", "--state", str(tmp_path / "state.json")]
    done = CliRunner().invoke(sweep_app, args)
    assert done.exit_code == 4, done.output
    flat = " ".join(done.output.split())
    assert "harness error: the run changed the user's files: escaped.txt" in flat, flat


@pytest.mark.skipif(not probe().active, reason="the kernel has no Landlock")
def test_launcher_confines_the_command_it_becomes(tmp_path: Path) -> None:
    own, other = tmp_path / "own", tmp_path / "other"
    own.mkdir()
    other.mkdir()
    script = f"touch {own}/ok && (touch {other}/escaped 2>/dev/null && echo escaped || echo refused)"
    done = subprocess.run(
        [sys.executable, launch.__file__, "sh", "-c", script],
        env={**os.environ, launch.WRITABLE: str(own)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stdout.strip()) == (0, "refused"), done.stderr
    assert (own / "ok").exists() and not (other / "escaped").exists()


def test_launcher_refused_by_the_kernel_runs_nothing(monkeypatch, capsys) -> None:
    def refuse(folders):
        raise ConfineError("landlock_restrict_self: Operation not permitted")

    monkeypatch.setattr(launch, "confine", refuse)
    monkeypatch.setattr(launch.os, "execvp", lambda *a: pytest.fail("ran the command unconfined"))
    assert launch.main(["mutmut", "run"]) == launch.REFUSED
    assert f"{launch.REFUSAL} (landlock_restrict_self" in capsys.readouterr().err


def test_a_sweep_whose_confinement_is_refused_fails_and_runs_no_mutant(tmp_path: Path, monkeypatch) -> None:
    # The launcher as a kernel that refuses Landlock leaves it: its message, its exit code, mutmut never started.
    refusing = tmp_path / "refusing_launch.py"
    refusing.write_text(
        f"import sys\nprint({launch.REFUSAL!r} + ' (landlock_restrict_self: Operation not permitted); it was not "
        f"run', file=sys.stderr)\nsys.exit({launch.REFUSED})\n"
    )
    monkeypatch.setattr(launch, "__file__", str(refusing))  # the script the driver runs as the launcher
    root = _project(tmp_path / "project")
    result = run_sweep(_sweep(root))
    assert result.outcome is SweepOutcome.FAILED
    assert result.message == (
        "dflash sweep: the kernel refused to confine mutmut (landlock_restrict_self: Operation not permitted); no "
        "mutant was run"
    ), result.message
    assert {m.mutmut for m in result.mutants} <= {"not checked"}  # no verdict came from an unconfined mutant
