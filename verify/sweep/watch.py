"""The sweep driver's watch over mutmut's mutant processes: each mutant's ceilings, policed from outside it.

Every process mutmut runs gates in tells the driver what it is on a pipe they all inherit
(`verify.sweep.mutant`). The driver calls `poll` between reads of mutmut's output: it reads what was told, and
for each registered mutant process still running (of the sweep's own tree: a registration is the mutant's
claim), checks its tree's size and resident memory against its ceilings (`verify.run.execution.ceilings.check`,
as a verify child's parent checks them) and ends a tree past one at once. mutmut then records the mutant as
killed by SIGKILL; `judge` turns that, and a gate the mutant itself saw fail with MemoryError or EFBIG, into
`crashed` of the named kind, with why. The memory ceiling is scaled from the unmutated gates' peak as `dflash
verify` scales it, written into the watch folder for the mutants' own backstop, and fixed when the first mutant
registers. Polling is the fallback a kernel ceiling would replace (a group of `verify.sandbox.cgroups` per
mutant, as `dflash verify`'s children get one, made here and joined by the mutant's process in `enter` before
its Landlock layer; not done yet): a tree that grows faster than a poll holds more until the next one. Knows
nothing of mutmut's files or reports.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from verify.report.crashes import CrashKind
from verify.report.verdict import Status
from verify.run.execution import ceilings
from verify.sandbox import hardening, reaper
from verify.sweep import mutant as sweep_mutant
from verify.sweep.result import SweepMutant

__all__ = ["MutantWatch"]

_KINDS = {"MemoryCeiling": CrashKind.MEMORY, "ProcessCeiling": CrashKind.PROCESSES}
_SELDOM = 5  # a tree's memory (its processes' proportional sets, costlier) is read every this many polls


class MutantWatch:
    """`breaches` maps each mutant that went past a ceiling to (its crash kind, why); `channel` is the pipe's
    write end every process of the sweep inherits, `folder` the watch folder they may read and not write."""

    def __init__(self, folder: Path, memory: tuple[int, int, float], processes: int) -> None:
        """`memory`: (the machine's share per mutant, the least ceiling, the factor over the unmutated peak)."""
        self.folder = folder
        self.memory = memory
        self.processes = processes
        self.keeper = 0  # the launcher's pid: every process of the sweep is beneath it
        self.limits: hardening.Ceilings | None = None  # fixed at the first mutant
        self.breaches: dict[str, tuple[str, str]] = {}
        self._read, self.channel = os.pipe()
        os.set_blocking(self._read, False)
        self._pending = b""
        self._mutants: dict[int, str] = {}  # pid -> mutant, as registered
        self._told: dict[str, dict[str, Any]] = {}  # mutant -> what it told (a crash kind, a refusal)
        self._peak = 0  # the unmutated runs' largest peak
        self._polls = 0
        self._write_ceiling()

    def _ceiling(self) -> int:
        return sweep_mutant.memory_ceiling(*self.memory, self._peak)

    def _write_ceiling(self) -> None:
        aside = self.folder / f".{sweep_mutant.CEILING}"
        aside.write_text(json.dumps({"memory_bytes": self._ceiling()}))
        aside.replace(self.folder / sweep_mutant.CEILING)

    def _hear(self) -> None:
        """Read every whole line told since the last poll."""
        while True:
            try:
                chunk = os.read(self._read, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            self._pending += chunk
        *lines, self._pending = self._pending.split(b"\n")
        for line in lines:
            with contextlib.suppress(ValueError, TypeError, KeyError, AttributeError):
                said = json.loads(line)
                pid, name = int(said["pid"]), str(said["mutant"])
                if not sweep_mutant.is_mutant(name):
                    if self.limits is None and (peak := int(said.get("peak", 0))) > self._peak:
                        self._peak = peak
                        self._write_ceiling()
                    continue
                if self.limits is None:  # the first mutant: the ceiling is fixed from now on
                    self.limits = hardening.Ceilings(self._ceiling(), 0, self.processes)
                self._mutants.setdefault(pid, name)
                if said.get("crash") in (CrashKind.MEMORY, CrashKind.DISK) or said.get("refused"):
                    self._told.setdefault(name, said)

    def poll(self) -> None:
        """Hear what was told, then check every running mutant's tree once; end those past a ceiling."""
        self._polls += 1
        self._hear()
        if self.limits is None or not self.keeper:
            return
        sweep = set(reaper.tree(self.keeper))
        for pid, name in list(self._mutants.items()):
            processes = reaper.tree(pid)
            if not processes or pid not in sweep:
                del self._mutants[pid]  # ended (a pid reused later is not this mutant's)
                continue
            if name in self.breaches:
                continue
            exc_type, why = ceilings.check(pid, processes, self.limits, seldom=self._polls % _SELDOM == 0)
            if exc_type:
                self.breaches[name] = (_KINDS[exc_type], why)

    def judge(self, mutants: Iterable[SweepMutant]) -> tuple[SweepMutant, ...]:
        """The mutants, each that went past a ceiling (ended here, or a gate of its own red by MemoryError or
        EFBIG) `crashed` of that kind, whatever mutmut made of it, with why; one whose confinement the kernel
        refused an `error`. Call it once the watch is closed (all that was told heard)."""
        seen = dict(self.breaches)
        for name, said in self._told.items():
            if name not in seen:
                seen[name] = (said["crash"], str(said.get("why", ""))) if said.get("crash") else ("", said["refused"])
        judged = []
        for mutant in mutants:
            if mutant.key in seen:
                kind, why = seen[mutant.key]
                word = f"; mutmut: {mutant.mutmut}" if mutant.mutmut else ""
                status = Status.CRASHED if kind else Status.ERROR
                mutant = dataclasses.replace(mutant, status=status, crash_kind=kind, reason=f"{why}{word}")
            judged.append(mutant)
        return tuple(judged)

    def __enter__(self) -> MutantWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self._hear()  # the last words: mutmut has ended, every writer with it
        for fd in (self._read, self.channel):
            with contextlib.suppress(OSError):
                os.close(fd)
