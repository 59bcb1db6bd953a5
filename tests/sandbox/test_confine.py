"""Mutants that reach for what the user owns, against the real CLI: confined, every write outside the child's
own copy, temp dir and declared writable paths is refused (the gate goes red by the exception, as any crash);
unconfined (DFLASH_CONFINE=off), every change to the project, its git directory and the home's start-up
files is a harness error (exit 4) naming the file and the mutant. Either way a process a mutant left behind
is killed before the tree is checked, and nothing it meant to write later lands.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.run.test_verify_ceilings import alive_with
from verify.mutation import Mutation
from verify.report.json_report import read_json
from verify.report.verdict import Status
from verify.sandbox.confine import probe

CORE = '''"""Code under test."""


def add(a, b):
    return a + b
'''

GATES = """import pytest
from hostile import core


@pytest.mark.gate
def test_add():
    assert core.add(2, 3) == 5
"""


# A chain of 60 processes, each the parent of the next and waiting on it, in a session of its own: ending it
# from the top leaves each next one an orphan in turn. The deepest writes into the project a minute later.
CHAIN = """import os, sys, time
for _ in range(60):
    if os.fork():
        os.wait()
        os._exit(0)
open(sys.argv[1] + '/deep-pid.part', 'w').write(str(os.getpid()))
os.rename(sys.argv[1] + '/deep-pid.part', sys.argv[1] + '/deep-pid')
time.sleep(60)
open(sys.argv[2] + '/deep.txt', 'w').write('x')
"""


def _escapes(root: Path, home: Path, shared: Path) -> dict[str, str]:
    """name -> Python run inside the mutated `add` (before it returns a + b), by absolute paths it knows."""
    late = f"echo $$ > {shared}/pid; sleep 60; echo x > {root}/late.txt"
    chain = f"[__import__('sys').executable, '-c', {CHAIN!r}, {str(shared)!r}, {str(root)!r}]"
    pyc = importlib.util.cache_from_source(str(root / "hostile_mutations.py"))
    return {
        "writes-root": f"open({str(root / 'escaped.txt')!r}, 'w').write('x')",
        "writes-git": f"open({str(root / '.git' / 'HEAD')!r}, 'a').write('x')",
        "writes-home": f"open({str(home / '.bashrc')!r}, 'a').write('x')",
        "renames": f"os.rename({str(root / 'hostile' / 'core.py')!r}, {str(root / 'moved.py')!r})",
        "unlinks": f"os.unlink({str(root / 'pyproject.toml')!r})",
        "truncates": f"os.truncate({str(root / 'pyproject.toml')!r}, 0)",
        "symlinks": f"os.symlink({str(root / 'pyproject.toml')!r}, 'link'); open('link', 'a').write('x')",
        "hard-links": f"os.link({str(root / 'pyproject.toml')!r}, 'hard'); open('hard', 'a').write('x')",
        "via-proc": f"open('/proc/self/root' + {str(root / 'proc.txt')!r}, 'w').write('x')",
        "via-shell": f"subprocess.run(['sh', '-c', 'echo x > {root}/sh.txt'], check=True)",
        "chmods": f"os.chmod({str(root / 'pyproject.toml')!r}, 0o600)",
        "detaches": f"subprocess.Popen(['sh', '-c', {late!r}], start_new_session=True)",
        "deep-chain": f"subprocess.Popen({chain}, start_new_session=True); "
        f"[__import__('time').sleep(0.05) for _ in range(600) if not os.path.exists({str(shared / 'deep-pid')!r})]",
        # Bytecode for the catalog module the next run's parent imports (and would run, being unconfined).
        "plants-bytecode": f"os.makedirs(os.path.dirname({pyc!r}), exist_ok=True); open({pyc!r}, 'wb').write(b'x')",
        # A daemon that writes (where it may) 1 s on, while another job keeps the run going (3 s of a 5 s budget).
        "daemon-writes-later": f"subprocess.Popen(['sh', '-c', 'sleep 1; echo x > {shared}/daemon.txt'], "
        "start_new_session=True)",
        "keeps-the-run-going": "__import__('time').sleep(3)",
        # Its own copy (where the module lives) and its TMPDIR stay writable: this one must survive.
        "writes-own": "open(os.path.join(os.path.dirname(__file__), 'mine.txt'), 'w').write('x'); "
        "tempfile.NamedTemporaryFile().write(b'x'); open(os.path.join(tempfile.gettempdir(), 't'), 'w').write('x')",
    }


def _project(make, base: Path, names: list[str], jobs: int) -> tuple[Path, Path, Path]:
    project, home = make(base / "project"), base / "home"
    root, shared = project.root, project.shared
    home.mkdir()
    (home / ".bashrc").write_text("# the user's\n")
    escapes = _escapes(root, home, shared)
    project.write(
        core=CORE,
        gates={"test_core.py": GATES},
        mutations=[
            Mutation(
                name,
                f"escape: {name}",
                "hostile/core.py",
                "return a + b",
                "import os, subprocess, tempfile; " + escapes[name] + "\n    return a + b",
            )
            for name in names
        ],
        settings={"jobs": jobs, "timeout_factor": 5.0, "timeout_min_s": 5.0, "flake_reruns": 1, "preload": []},
    )
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root, home, shared


def _digest(*tops: Path) -> dict[str, tuple[int, str]]:
    """Mode and sha256 of every file under each top, .git included (the engine's own cache left out)."""
    found = {}
    for top in tops:
        for path in sorted(top.rglob("*")):
            if ".dflash-cache" not in path.parts and not path.is_dir():
                data = os.readlink(path).encode() if path.is_symlink() else path.read_bytes()
                found[str(path)] = (path.lstat().st_mode, hashlib.sha256(data).hexdigest())
    return found


def _assert_detached_killed(shared: Path, root: Path) -> None:
    for pid_file, late in (("pid", "late.txt"), ("deep-pid", "deep.txt")):
        assert (shared / pid_file).read_text()  # it started (its pid is its PID namespace's, meaningless here)
        assert not (root / late).exists()
    # Killed (and reaped) before the run's last check, not left to write later: none is left whose command line
    # names the shared folder (the detached shell's and the chain's do).
    assert alive_with(str(shared)) == []


REFUSED = ["writes-root", "writes-git", "writes-home", "renames", "unlinks", "truncates", "symlinks", "hard-links",
           "via-proc", "via-shell"]  # fmt: skip


def test_confined_mutants_cannot_write_outside_their_copy(tmp_path, cli, monkeypatch, hostile_project) -> None:
    assert probe().active, "this machine's kernel has Landlock (6.x with it enabled): confinement must be on"
    names = [*REFUSED, "detaches", "deep-chain", "writes-own"]
    root, home, shared = _project(hostile_project, tmp_path, names, jobs=2)
    monkeypatch.setenv("HOME", str(home))
    before = _digest(root, home)
    result = cli("--project", str(root), "--json", str(tmp_path / "r.json"))
    report = read_json(tmp_path / "r.json")[0]
    by_name = {r.name: r for r in report.mutations}
    for name in REFUSED:  # refused: the gate is red by the exception, confirmed by a second child like any crash
        assert by_name[name].status is Status.CRASHED, (name, by_name[name], result.output)
        assert by_name[name].attempts == 2
        assert by_name[name].outcomes[0].exc_type in ("PermissionError", "OSError", "CalledProcessError"), name
    assert by_name["writes-own"].status is Status.SURVIVED, by_name["writes-own"]
    assert by_name["detaches"].status is Status.SURVIVED and by_name["deep-chain"].status is Status.SURVIVED
    assert report.confinement.startswith("landlock"), report.confinement
    assert report.harness_errors == (), report.harness_errors
    assert result.exit_code == 1, result.output  # crashes and survivors fail the run; nothing is an error
    _assert_detached_killed(shared, root)
    assert _digest(root, home) == before  # byte for byte and mode for mode, .git and the home included


def test_unconfined_changes_are_harness_errors_naming_file_and_mutant(
    tmp_path, cli, monkeypatch, hostile_project
) -> None:
    monkeypatch.setenv("DFLASH_CONFINE", "off")
    names = ["writes-root", "writes-git", "writes-home", "chmods", "via-shell", "plants-bytecode", "detaches",
             "deep-chain"]  # fmt: skip
    root, home, shared = _project(hostile_project, tmp_path, names, jobs=1)
    monkeypatch.setenv("HOME", str(home))
    result = cli("--project", str(root), "--json", str(tmp_path / "r.json"))
    assert result.exit_code == 4, result.output
    report = read_json(tmp_path / "r.json")[0]
    assert report.confinement == "off: DFLASH_CONFINE=off; namespaces user, pid, mount, ipc, net"
    assert result.output.startswith("confinement off: DFLASH_CONFINE=off"), result.output[:300]
    (error,) = report.harness_errors
    for path, what, mutant in [
        ("escaped.txt", "new", "writes-root"),
        (".git/HEAD", "changed", "writes-git"),
        (f"{home}/.bashrc", "changed", "writes-home"),
        ("pyproject.toml", "mode changed", "chmods"),
        ("sh.txt", "new", "via-shell"),
        ("__pycache__", "new", "plants-bytecode"),
    ]:
        assert f"{path} ({what}, while mutant {mutant} ran)" in error, (path, error)
    assert "late.txt" not in error and "deep.txt" not in error
    # No verdict for a mutant that changed the user's files: an error, left out of the cache to be tried again.
    statuses = {r.name: r.status for r in report.mutations}
    left = {"detaches": Status.SURVIVED, "deep-chain": Status.SURVIVED}
    assert statuses == {**dict.fromkeys(names[:-2], Status.ERROR), **left}, statuses
    time.sleep(0.2)
    _assert_detached_killed(shared, root)


def test_what_a_job_started_ends_with_the_job_not_with_the_run(tmp_path, cli, monkeypatch, hostile_project) -> None:
    # The daemon's job ends at once; the other job runs 3 s more. Killed only at the run's end, the daemon would
    # write at 1 s, while the other job ran (and its change to the user's files be laid at that job's door).
    root, home, shared = _project(hostile_project, tmp_path, ["daemon-writes-later", "keeps-the-run-going"], jobs=2)
    monkeypatch.setenv("HOME", str(home))
    started = time.monotonic()
    result = cli("--project", str(root), "--json", str(tmp_path / "r.json"))
    assert time.monotonic() - started > 3, result.output
    assert not (shared / "daemon.txt").exists(), "the daemon outlived its job"
    statuses = {r.name: r.status for r in read_json(tmp_path / "r.json")[0].mutations}
    assert statuses == {"daemon-writes-later": Status.SURVIVED, "keeps-the-run-going": Status.SURVIVED}, result.output


@pytest.mark.parametrize(
    ("abi", "described"),
    [
        (7, "landlock ABI 7"),
        (6, "landlock ABI 6"),
        (5, "landlock ABI 5, partial: it does not govern signals to processes outside the child's own, the harness "
            "included, nor abstract unix sockets outside them (from ABI 6)"),
        (2, "landlock ABI 2, partial: it does not govern truncate by path (from ABI 3); nor signals to processes "
            "outside the child's own, the harness included, nor abstract unix sockets outside them (from ABI 6)"),
        (0, "off: no Landlock here"),
    ],
    ids=["abi-7", "abi-6", "abi-5-no-scoping", "abi-2-no-truncate", "none"],
)  # fmt: skip
def test_below_abi_6_confinement_is_partial_and_says_what_it_lacks(abi: int, described: str) -> None:
    from verify.sandbox.confine import Confinement

    assert Confinement(abi, "no Landlock here" if abi == 0 else "").describe() == described


def test_a_child_that_was_to_be_confined_and_is_not_runs_no_gate(toy_copy, monkeypatch) -> None:
    # The parent found Landlock; its child's own probe then finds none (the switch flipped under it, as a node's
    # kernel could refuse at run time): the child runs nothing, and says so, as harness trouble.
    from verify.config.settings import load_config
    from verify.report.verdict import Outcome
    from verify.run.execution.fork import Executor
    from verify.run.execution.jobs import Job

    assert probe().active, "this machine's kernel has Landlock (6.x with it enabled): confinement must be on"
    with Executor(load_config(toy_copy())) as executor:
        monkeypatch.setenv("DFLASH_CONFINE", "off")
        [result] = executor.run([Job("k", ("tests/gates/test_arith.py::test_add",), 60.0)], 1)
    assert result.state == "unconfined", result
    gate = "tests/gates/test_arith.py::test_add"
    assert [(o.gate_id, o.outcome) for o in result.outcomes] == [(gate, Outcome.NOT_RUN)]
    assert "not confined, so no gate ran: its parent found Landlock, this child got none (DFLASH_CONFINE=off)" in (
        result.reason
    )


def test_a_mutant_exiting_with_the_unconfined_code_is_a_crash_not_harness_trouble(toy_copy) -> None:
    # Only the child, before any of the mutant's code runs, can say it was confined: a mutant that exits with
    # the code an unconfined child uses is a child that died, judged like any crash.
    from verify.config.settings import load_config
    from verify.run.child.job import UNCONFINED_EXIT
    from verify.run.execution.fork import Executor
    from verify.run.execution.jobs import Job

    root = toy_copy()
    text = (root / "toy" / "arith.py").read_text()
    mutated = text.replace("return a + b", f"return __import__('os')._exit({UNCONFINED_EXIT})")
    assert mutated != text
    job = Job("k", ("tests/gates/test_arith.py::test_add",), 60.0, (("toy/arith.py", mutated),))
    with Executor(load_config(root)) as executor:
        [result] = executor.run([job], 1)
    assert result.state == "died" and result.reason.startswith(f"exited with code {UNCONFINED_EXIT}"), result
