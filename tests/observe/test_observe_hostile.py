"""Hostile mutants explained, against the real CLI in a process of its own: the explanation's children live
under every child's regime. A survivor that, once observed, SIGKILLs the processes above it (the worker, then
`dflash verify` itself) cannot: the run ends with its own exit code and the explanation says the kill was
refused. One that writes into the user's project root is refused when confined; unconfined, the write is found
by the tree guard and `verify explain` exits 4 naming the file, never a silent success.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from verify.sandbox.confine import probe

# Acts only under the observer (its worker runs as `python -m verify.observe.worker`), so the gates let it
# survive the run and `dflash verify` explains it afterwards.
EVIL = '''"""What the hostile mutants call."""

import os
import signal
import sys
from pathlib import Path


def observed():
    return "observe" in sys.argv[0]


def kill_above():
    if observed():
        parent = os.getppid()
        grandparent = int(Path(f"/proc/{parent}/stat").read_text().rpartition(")")[2].split()[1])
        for pid in (grandparent, parent):
            os.kill(pid, signal.SIGKILL)


def plant(root):
    if observed():
        Path(root, "planted.txt").write_text("written by a mutant")
'''


# A weak gate, which both hostile mutants pass (they act only when observed).
GATE = """import pytest
import torch

from toy import engine


@pytest.mark.gate
def test_shape():
    assert engine.scale(torch.zeros(3)).shape == (3,)
"""


def _toy(toy: Path) -> Path:
    (toy / "toy" / "evil.py").write_text(EVIL)
    (toy / "tests" / "test_toy_gate.py").write_text(GATE)
    catalog = (toy / "toy_mutations.py").read_text().rstrip().removesuffix(")")
    catalog += (
        '    Mutation("kills-harness", "kills the processes above it", "toy/engine.py", "return x * 2.5",\n'
        "             \"return __import__('toy.evil').evil.kill_above() or x * 2.5\"),\n"
        '    Mutation("plants-file", "writes into the project root", "toy/engine.py", "return x * 2.5",\n'
        f"             \"return __import__('toy.evil').evil.plant({str(toy)!r}) or x * 2.5\"),\n)\n"
    )
    (toy / "toy_mutations.py").write_text(catalog)
    return toy


def _dflash(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "verify", *args]
    return subprocess.run(command, capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=600)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".dflash-cache" not in p.parts and "__pycache__" not in p.parts}  # fmt: skip


def test_observed_survivors_cannot_kill_the_harness_nor_write_the_users_tree(toy: Path, tmp_path: Path) -> None:
    assert probe().abi >= 6, "this machine's kernel scopes signals (Landlock ABI 6+): the kill must be refused"
    root = _toy(toy)
    before = _files(root)
    report = tmp_path / "r.json"
    names = ("-m", "kills-harness", "-m", "plants-file")
    done = _dflash("verify", "--project", str(root), *names, "--no-cache", "--json", str(report))
    output = done.stdout + done.stderr
    # Both survive the gates; explained afterwards, neither kills the CLI (exit -9) nor changes the tree: each
    # act was refused, and the refusal is what the explanation saw.
    assert done.returncode == 1, output
    explained = {m["name"]: m["explanation"] for m in json.loads(report.read_text())["mutations"]}
    for name in ("kills-harness", "plants-file"):
        assert "error" in explained[name] and "PermissionError" in explained[name], explained[name]
    assert _files(root) == before


def test_explain_of_an_unconfined_mutant_writing_the_users_tree_is_exit_4(toy: Path) -> None:
    root = _toy(toy)
    done = _dflash("verify", "explain", "plants-file", "--project", str(root), env={"DFLASH_CONFINE": "off"})
    assert done.returncode == 4, done.stdout + done.stderr
    assert "changed the user's files: planted.txt" in done.stderr, done.stderr


def test_an_observed_memory_hog_and_fork_bomb_are_ended_and_named_never_explained(toy: Path) -> None:
    from verify.config.settings import load_config
    from verify.observe.api import SessionOptions, explain_overrides

    pyproject = toy / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + "memory_factor = 1.0\nmemory_min_mb = 64\nprocesses_max = 8\n")
    source = (toy / "toy" / "engine.py").read_text()
    hog = "grown = []\n    while True:\n        grown.append(bytearray(32 << 20))"
    bomb = "import os, time\n    for _ in range(40):\n        if os.fork() == 0:\n            time.sleep(120)"
    mutants = {name: {"toy/engine.py": source.replace("return x * 2.5", body)}
               for name, body in (("hog", hog), ("bomb", bomb))}  # fmt: skip
    run = explain_overrides(load_config(toy), mutants, SessionOptions(jobs=2))
    assert not run.explanations  # no observation: never explained, never equivalent
    assert run.failures["hog"].startswith("memory: "), run.failures
    assert run.failures["bomb"].startswith("processes: "), run.failures
