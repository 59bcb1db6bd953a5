"""A sweep's mutants live under the regime of `dflash verify`'s children: ceilings on memory, processes and file
size per mutant (a mutant past one is `crashed` of that kind, whatever mutmut made of it), no write to /dev/shm,
and no process of the sweep outliving its driver, however the driver ends.

Each hostile act below is guarded by a flag mutmut mutates (`bad = False` becomes `bad = True`), so the
unmutated gates are harmless and one mutant of each function does the act. The ceilings are set low in the
project so that no test takes more than a few hundred MiB of the machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from verify.report.verdict import Status
from verify.run.execution.ceilings import load_scale
from verify.sandbox import reaper
from verify.sandbox.confine import probe
from verify.sweep.driver import SweepConfig, run_sweep
from verify.sweep.mutant import memory_ceiling
from verify.sweep.result import SweepOutcome
from verify.sweep.watch import MutantWatch

ACTS = """def hog():
    bad = False
    return bad


def bomb():
    bad = False
    return bad


def shm():
    bad = False
    return bad


def big():
    bad = False
    return bad
"""
GATES = """import os
import time
from pathlib import Path

from hostile.acts import big, bomb, hog, shm


def test_hog():
    if hog():
        held = []
        for _ in range(48):  # 768 MiB in 16 MiB steps, far past the ceiling of 192 MiB
            held.append(b"x" * (16 << 20))
            time.sleep(0.02)


def test_bomb():
    if bomb():
        children = []
        for _ in range(24):  # past the ceiling of 8 processes
            pid = os.fork()
            if pid == 0:
                time.sleep(60)
                os._exit(0)
            children.append(pid)
        for pid in children:
            os.waitpid(pid, 0)


def test_shm():
    if shm():
        Path(os.environ["SHM_FILE"]).write_text("a mutant's file in shared memory")


def test_big(tmp_path):
    if big():
        (tmp_path / "big.bin").write_bytes(b"x" * (2 << 20))  # past the file ceiling of 1 MiB
"""
CATALOG = """from verify.mutation import Mutation, register

register(Mutation(name="flag-on", bug_class="The flag is on.", file="hostile/acts.py", anchor="bad = False",
                  replacement="bad = True"))
"""
SPAWN = """def spawn():
    bad = False
    return bad
"""
SPAWN_GATE = """import subprocess
import time

from hostile.acts import spawn


def test_spawn():
    if spawn():
        for _ in range(4):  # daemons of their own session, and a fork that sleeps too
            subprocess.Popen(["sleep", "300"], start_new_session=True)
        time.sleep(300)
"""


def _project(root: Path, acts: str, gates: str, settings: str = "") -> Path:
    (root / "hostile").mkdir(parents=True)
    (root / "hostile" / "__init__.py").write_text("")
    (root / "hostile" / "acts.py").write_text(acts)
    (root / "tests" / "gates").mkdir(parents=True)
    (root / "tests" / "gates" / "test_acts.py").write_text(gates)
    (root / "hostile_mutations.py").write_text(CATALOG)
    (root / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\naddopts = "-q -p no:cacheprovider"\n\n[tool.dflash]\nsource_roots = ["hostile"]\n'
        f'gates = ["tests/gates"]\ngate_marker = ""\nmutation_modules = ["hostile_mutations"]\n{settings}'
    )
    return root


def _flagged(mutants, generated: dict[str, str], function: str):
    """The one mutant of `function` that turns its flag on (`bad = True`), found in mutmut's generated source."""
    keys = {key for key, text in generated.items() if f".x_{function}__mutmut_" in key and "bad = True" in text}
    (found,) = [m for m in mutants if m.key in keys]
    return found


@pytest.mark.skipif(not probe().active, reason="the kernel has no Landlock: /dev/shm cannot be refused")
def test_mutants_past_their_ceilings_are_crashed_and_none_writes_shared_memory(tmp_path: Path) -> None:
    shm_file = Path("/dev/shm") / f"dflash-sweep-test-{uuid.uuid4().hex}"
    root = _project(tmp_path / "project", ACTS, GATES)
    work = tmp_path / "work"
    config = SweepConfig(root=root, paths=("hostile",), jobs=2, gates=("tests/gates",), gate_marker="",
                         workdir=work, environ=(("SHM_FILE", str(shm_file)),), memory_factor=1.0,
                         memory_min_mb=192, processes_max=8, file_max_mb=1)  # fmt: skip
    try:
        result = run_sweep(config)
    finally:
        leftover = shm_file.exists()
        shm_file.unlink(missing_ok=True)
    assert result.outcome is SweepOutcome.COMPLETE, result.message
    assert not leftover, "a sweep mutant wrote /dev/shm"
    generated = _generated(work)
    hog, bomb, shm, big = (_flagged(result.mutants, generated, name) for name in ("hog", "bomb", "shm", "big"))
    assert (hog.status, hog.crash_kind) == (Status.CRASHED, "memory"), hog
    assert "memory" in hog.reason.lower() or "MemoryError" in hog.reason, hog.reason
    assert (bomb.status, bomb.crash_kind) == (Status.CRASHED, "processes"), bomb
    assert "past its ceiling of 8" in bomb.reason, bomb.reason
    # The write to /dev/shm was refused: its gate went red (PermissionError), which mutmut counts as a kill.
    assert shm.status is Status.KILLED and shm.crash_kind == "", shm
    # The file past its ceiling failed with EFBIG in the mutant's own gate: mutmut says killed, the sweep crashed.
    assert (big.status, big.crash_kind, big.mutmut) == (Status.CRASHED, "disk", "killed"), big
    assert "File too large" in big.reason, big.reason
    # The unflagged mutants (`bad = None`, ...) are untouched by any of it.
    others = [m for m in result.mutants if m not in (hog, bomb, shm, big)]
    assert others and all(m.crash_kind == "" for m in others), others


def _generated(work: Path) -> dict[str, str]:
    """mutmut's generated mutant functions in the copy, by key: the text of each (to tell which sets the flag)."""
    source = (work / "mutants" / "hostile" / "acts.py").read_text()
    found = {}
    for block in source.split("\ndef ")[1:]:
        name = block.partition("(")[0]
        if "__mutmut_" in name and not name.endswith("__mutmut_orig"):
            found[f"hostile.acts.{name}"] = block
    return found


def _tagged(tag: str) -> list[int]:
    """Every live process whose environment holds `tag` (every process of the sweep inherits it)."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        with contextlib.suppress(OSError):
            if tag.encode() in environ.read_bytes():
                found.append(int(environ.parent.name))
    return found


def test_a_sweep_whose_driver_is_killed_leaves_no_process_behind(tmp_path: Path) -> None:
    root = _project(tmp_path / "project", SPAWN, SPAWN_GATE)
    tag = f"DFLASH_SWEEP_TEST_TAG=x{uuid.uuid4().hex}"
    name, _, value = tag.partition("=")
    env = {**os.environ, name: value, "TMPDIR": str(tmp_path)}  # the copies a killed driver leaves, cleaned here
    args = ["--root", str(root), "--jobs", "1", "--state", str(tmp_path / "state.json"), "--no-explain"]
    driver = subprocess.Popen([sys.executable, "-m", "verify", "sweep", *args], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 180 * load_scale()
        sleepers: list[int] = []
        while len(sleepers) < 4 and time.monotonic() < deadline and driver.poll() is None:
            time.sleep(0.2)
            sleepers = [pid for pid in _tagged(tag) if _command(pid) == "sleep"]
        assert len(sleepers) >= 4, "the spawning mutant never ran"
        assert len(_tagged(tag)) > len(sleepers) + 3  # the driver, the launcher, mutmut, its fork server, the mutant
        driver.kill()
        driver.wait()
        deadline = time.monotonic() + 10 * load_scale()
        while (alive := _tagged(tag)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert alive == [], [(pid, _command(pid)) for pid in alive]
    finally:
        for pid in _tagged(tag):  # the test's own cleanup, should the sweep's fail
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if driver.poll() is None:
            driver.kill()
            driver.wait()


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


@pytest.mark.parametrize(
    ("share", "minimum", "factor", "peak", "expected"),
    [(1000, 100, 4.0, 0, 1000), (1000, 100, 4.0, 10, 100), (1000, 100, 4.0, 50, 200), (1000, 100, 4.0, 900, 1000),
     (0, 100, 4.0, 50, 200), (1000, 100, 0.0, 50, 0)],
    ids=["no-peak-yet", "at-least-the-minimum", "factor-times-peak", "at-most-the-share", "no-share", "no-ceiling"],
)  # fmt: skip
def test_a_mutants_memory_ceiling_is_scaled_as_verify_scales_it(share, minimum, factor, peak, expected) -> None:
    assert memory_ceiling(share, minimum, factor, peak) == expected


def test_the_watch_polices_a_registered_mutant_of_the_sweep_and_no_other_process(tmp_path: Path) -> None:
    sweep = subprocess.Popen(["sh", "-c", "sleep 30 & sleep 30 & wait"])  # stands for mutmut: a tree of three
    bystander = subprocess.Popen(["sh", "-c", "sleep 30 & sleep 30 & wait"])  # not of the sweep
    try:
        deadline = time.monotonic() + 10 * load_scale()
        while (len(reaper.tree(sweep.pid)) < 3 or len(reaper.tree(bystander.pid)) < 3) and time.monotonic() < deadline:
            time.sleep(0.05)
        with MutantWatch(tmp_path, (0, 0, 0.0), processes=2) as watch:
            watch.keeper = sweep.pid
            for pid, name in ((bystander.pid, "m.x_f__mutmut_1"), (sweep.pid, "m.x_f__mutmut_2")):
                os.write(watch.channel, json.dumps({"pid": pid, "mutant": name}).encode() + b"\n")
            watch.poll()
        assert set(watch.breaches) == {"m.x_f__mutmut_2"}, watch.breaches
        assert watch.breaches["m.x_f__mutmut_2"][0] == "processes"
        assert sweep.wait(timeout=10 * load_scale()) == -signal.SIGKILL
        assert bystander.poll() is None  # a claim about a process outside the sweep is ignored
        assert json.loads((tmp_path / "memory.json").read_text()) == {"memory_bytes": 0}
    finally:
        for process in (sweep, bystander):
            reaper.end_tree(process.pid)  # the sleeps under it too
            process.wait()
