"""The sweep driver's watch over mutmut's mutant processes: each mutant's ceilings, policed from outside it.

Every process mutmut runs gates in registers itself (`verify.sweep.mutant`). The driver calls `poll` between
reads of mutmut's output: for each registered mutant process still running (and of the sweep's own tree: a
registration is the mutant's claim), its tree's size and resident memory are checked against its ceilings
(`verify.run.execution.ceilings.check`, as a verify child's parent checks them), and a tree past one is ended
at once. mutmut then records the mutant as killed by SIGKILL; `judge` turns that, and a gate the mutant itself
saw fail with MemoryError or EFBIG, into `crashed` of the named kind, with why. The memory ceiling is scaled from
the unmutated gates' peak as `dflash verify` scales it, fixed when the first mutant registers. Knows nothing of
mutmut's files or reports.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path

from verify.report.crashes import CrashKind
from verify.report.verdict import Status
from verify.run.execution import ceilings
from verify.run.sandbox import hardening, reaper
from verify.sweep import mutant as sweep_mutant
from verify.sweep.result import SweepMutant

__all__ = ["MutantWatch"]

_KINDS = {"MemoryCeiling": CrashKind.MEMORY, "ProcessCeiling": CrashKind.PROCESSES}
_SELDOM = 5  # a tree's memory (its processes' proportional sets, costlier) is read every this many polls


class MutantWatch:
    """`breaches` maps each mutant that went past a ceiling to (its crash kind, why)."""

    def __init__(self, registry: Path, memory: tuple[int, int, float], processes: int) -> None:
        """`memory`: (the machine's share per mutant, the least ceiling, the factor over the unmutated peak)."""
        self.registry = registry
        self.memory = memory
        self.processes = processes
        self.keeper = 0  # the launcher's pid: every process of the sweep is beneath it
        self.limits: hardening.Ceilings | None = None  # fixed at the first mutant
        self.breaches: dict[str, tuple[str, str]] = {}
        self._polls = 0

    def _fix(self, entries: dict[int, dict]) -> hardening.Ceilings:
        if self.limits is None:
            share, minimum, factor = self.memory
            peak = sweep_mutant.pristine_peak(entries)
            memory = sweep_mutant.memory_ceiling(share, minimum, factor, peak)
            self.limits = hardening.Ceilings(memory, 0, self.processes)
        return self.limits

    def poll(self) -> None:
        """Check every running mutant's tree once; end those past a ceiling."""
        self._polls += 1
        entries = sweep_mutant.read_registry(self.registry)
        mutants = {pid: e["mutant"] for pid, e in entries.items() if sweep_mutant.is_mutant(e.get("mutant", ""))}
        if not mutants or not self.keeper:
            return
        limits = self._fix(entries)
        sweep = set(reaper.tree(self.keeper))
        for pid, name in mutants.items():
            processes = reaper.tree(pid)
            if not processes or pid not in sweep or name in self.breaches:
                continue
            exc_type, why = ceilings.check(pid, processes, limits, seldom=self._polls % _SELDOM == 0)
            if exc_type:
                self.breaches[name] = (_KINDS[exc_type], why)

    def judge(self, mutants: Iterable[SweepMutant]) -> tuple[SweepMutant, ...]:
        """The mutants, each that went past a ceiling (ended here, or a gate of its own red by MemoryError or
        EFBIG) `crashed` of that kind, whatever mutmut made of it, with why."""
        seen = dict(self.breaches)
        for entry in sweep_mutant.read_registry(self.registry).values():
            if sweep_mutant.is_mutant(name := entry.get("mutant", "")) and name not in seen:
                if entry.get("crash") in (CrashKind.MEMORY, CrashKind.DISK):
                    seen[name] = (entry["crash"], str(entry.get("why", "")))
                elif entry.get("refused"):
                    seen[name] = ("", str(entry["refused"]))
        judged = []
        for mutant in mutants:
            if mutant.key in seen:
                kind, why = seen[mutant.key]
                said = f"; mutmut: {mutant.mutmut}" if mutant.mutmut else ""
                status = Status.CRASHED if kind else Status.ERROR
                mutant = dataclasses.replace(mutant, status=status, crash_kind=kind, reason=f"{why}{said}")
            judged.append(mutant)
        return tuple(judged)
