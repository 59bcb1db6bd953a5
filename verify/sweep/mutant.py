"""A sweep's mutant process from the inside: what it does before its gates run, and what it leaves for the driver.

mutmut runs each mutant's gates in a process of its own (forked from its fork server, or from mutmut itself);
the sweep's pytest plugin calls `enter` there (pytest_configure), `crashed` for each gate's report and `leave`
at the end; each tells the driver what it is and what happened, on a pipe every process of the sweep inherits.
In a mutant's process `enter` does what `verify.sandbox.hardening` does for a verify child: `oom_score_adj`
raised, RLIMIT_FSIZE (a write past it fails with EFBIG) and an RLIMIT_DATA backstop of what the process holds
now plus its memory ceiling; then a Landlock layer of its own on top of the one mutmut runs
under (`verify.sandbox.confine`): the same writable folders less `/dev/shm`, which mutmut itself needs
(its pool's semaphores) and a mutant never gets. Its registration (pid, mutant) is how the driver finds the
processes to watch (`verify.sweep.watch`): the process count and resident memory of its tree, which only a
process outside it can police. A gate red by MemoryError or EFBIG is told too, so the sweep can say `crashed
(memory)` where mutmut says `killed`. The runs of the unmutated gates (mutmut's stats and clean runs) tell
their peak memory, from which the driver scales a mutant's ceiling as `dflash verify` scales it, and writes it
into its watch folder (which no mutant may write) for the backstop.

Loaded by its file path, never as `verify.sweep.mutant` (the private copy's own `verify`, when the project has
one, is first on the mutant's sys.path): it imports only the standard library and loads `confine` by path too.
What a mutant tells is a claim, which the driver checks (a pid must be of the sweep's tree; a registration, once
read, is kept; the ceiling is fixed when the first mutant registers), and what it told cannot be taken back.
"""

from __future__ import annotations

import contextlib
import errno
import importlib.util
import json
import os
import resource
import signal
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

SETTINGS = "DFLASH_SWEEP_MUTANT"  # the environment variable holding `settings` (JSON)
CEILING = "memory.json"  # in the driver's watch folder: the memory ceiling a mutant's backstop takes
_MUTANT_MARK = "__mutmut_"  # in every mutant's name (mutmut's MUTANT_UNDER_TEST); never in its own runs' names
_CONFINE = Path(__file__).parents[1] / "sandbox" / "confine.py"
_OOM_SCORE_ADJ = 1000


def settings(channel: int, watch: Path, writable: list[str], file_bytes: int) -> str:
    """What the driver hands each process mutmut runs gates in (the value of SETTINGS): the pipe it reports on,
    the driver's watch folder (read-only to it), the folders it may write and its file-size ceiling."""
    return json.dumps({"channel": channel, "watch": str(watch), "writable": writable, "file_bytes": file_bytes})


def memory_ceiling(share: int, minimum: int, factor: float, pristine_peak: int) -> int:
    """A mutant's memory ceiling, as `dflash verify` sets a mutant child's: `factor` times the unmutated gates'
    peak, at least `minimum`, at most the machine's `share`; the share until a peak is known; 0: none."""
    if not factor:
        return 0
    if not pristine_peak:
        return share
    wanted = max(minimum, int(factor * pristine_peak))
    return min(share, wanted) if share else wanted


def is_mutant(name: str) -> bool:
    return _MUTANT_MARK in name


class _Process:
    """This process's part: what it tells the driver, one JSON line per message on the inherited pipe (a write
    under PIPE_BUF lands whole, whoever else writes)."""

    def __init__(self, given: dict[str, Any]) -> None:
        self.pid = os.getpid()  # a process forked from this one (mutmut's fork server's mutants) is not it
        self.given = given
        self.mutant = os.environ.get("MUTANT_UNDER_TEST", "")

    def tell(self, **facts: object) -> None:
        line = json.dumps({"pid": self.pid, "mutant": self.mutant, **facts})[:3000] + "\n"
        with contextlib.suppress(OSError, ValueError):
            os.write(int(self.given["channel"]), line.encode())


_process: _Process | None = None


def _load_confine() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_dflash_sweep_confine", _CONFINE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def _vm_data() -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    return 0


def _harden(given: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):
        Path("/proc/self/oom_score_adj").write_text(str(_OOM_SCORE_ADJ))
    if file_bytes := int(given["file_bytes"]):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the ceiling fails with EFBIG, named
        with contextlib.suppress(OSError, ValueError):
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    memory = 0
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        memory = int(json.loads((Path(given["watch"]) / CEILING).read_text())["memory_bytes"])
    if memory:
        limit = _vm_data() + memory
        with contextlib.suppress(OSError, ValueError):
            resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def enter() -> None:
    """In a process mutmut runs gates in: register it; a mutant's also gets its ceilings and its confinement."""
    global _process
    text = os.environ.get(SETTINGS)
    if not text or (_process is not None and _process.pid == os.getpid()):
        return
    _process = process = _Process(json.loads(text))
    process.tell()
    if not is_mutant(process.mutant):
        return
    _harden(process.given)
    confine = _load_confine()  # where Landlock is off (no kernel support, DFLASH_CONFINE=off), it does nothing
    try:
        confine.confine([Path(p) for p in process.given["writable"]], shared_memory=False)
    except confine.ConfineError as error:  # never a verdict from a mutant with more rights than it should have
        process.tell(refused=f"the kernel refused the mutant's confinement ({error})")
        os._exit(3)  # mutmut: "pytest internal error", an error


def crashed(excinfo: Any) -> None:
    """A gate's exception, if it names a ceiling: told as this mutant's crash kind."""
    if _process is None or _process.pid != os.getpid() or not is_mutant(_process.mutant) or not excinfo:
        return
    error = excinfo.value
    if isinstance(error, MemoryError):
        kind = "memory"
    elif isinstance(error, OSError) and error.errno == errno.EFBIG:
        kind = "disk"
    else:
        return
    _process.tell(crash=kind, why=f"{type(error).__name__}: {error}"[:200])


def leave() -> None:
    """At pytest's end: this process's peak memory (an unmutated run's scales the mutants' ceiling)."""
    if _process is not None and _process.pid == os.getpid():
        _process.tell(peak=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
