"""The parent's deadline over a child's current gate: the one a mutant cannot block, and the job's own budget.

A gate's deadline is kept inside the child by SIGALRM (`verify.run.child.deadline`), which a mutant that
blocks or ignores every catchable signal defeats. So the parent watches too: `GateClock` reads the child's
journal as it grows (`verify.run.child.journal`) and times the gate it names as started, from the moment the
parent saw it, against the deadline the parent itself gave that gate (the job's `deadlines`: a number the
child writes is not trusted). A gate's finished line starts a clock of the same length for what follows it
(its teardown, pytest's bookkeeping up to the next gate). Past `limit_s` (the deadline stretched by the load, as
the child stretches it, plus a margin that leaves the child's own alarm room to act first) `overdue` says why,
and the executor ends the child's whole process group with SIGKILL, which no process can block: the gate is
`timeout`, the verdict the child's own alarm gives. A hang before any gate starts (at import, in collection)
is ended by the job's budget, which `job_budget` caps at `[tool.dflash] max_job_s`.

Each gate may restart the clock twice (its start and its end), whatever the journal says after that: a
mutant that writes lines to keep it running buys at most its gates' deadlines, then the job's budget ends it.
Knows nothing of pytest or verdicts.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

from verify.run.child.journal import Reader

__all__ = ["GateClock", "job_budget", "limit_s"]

_MARGIN_S = 2.0  # the least margin past a gate's stretched deadline: the child's own alarm acts within it
_MARGIN_SHARE = 0.25  # and a quarter of the stretched deadline: the child measures the load its own way
_RESTARTS = 2  # lines that may restart one gate's clock: its start and its end


def limit_s(deadline_s: float, scale: float) -> float:
    """How long the parent lets a gate run, its deadline on an idle machine being `deadline_s` and the load
    `scale`, before it ends the child."""
    stretched = deadline_s * max(1.0, scale)
    return stretched + max(_MARGIN_S, _MARGIN_SHARE * stretched)


def job_budget(timeout_s: float, scale: float, max_job_s: float) -> float:
    """A job's budget: `timeout_s` on an idle machine stretched by the load, at most `max_job_s` (0: no cap)."""
    budget = timeout_s * max(1.0, scale)
    return min(budget, max_job_s) if max_job_s > 0 else budget


class GateClock:
    """One running child's current gate, as its journal tells it, and how long the parent has seen it run."""

    def __init__(self, journal: Path, deadlines: Mapping[str, float], key: bytes = b"") -> None:
        self.reader = Reader(journal, key)
        self.deadlines = dict(deadlines)
        self.gate = ""  # the gate the last line named ("" before any)
        self.since = 0.0  # when the parent saw that line (time.monotonic)
        self._restarts: dict[str, int] = {}

    def watch(self, now: float | None = None) -> None:
        """Read what the journal gained; a line about a gate with a deadline restarts its clock."""
        now = time.monotonic() if now is None else now
        for record in self.reader.feed():
            gate = record.get("started", record.get("gate_id"))
            if not isinstance(gate, str) or gate not in self.deadlines:
                continue
            count = self._restarts.get(gate, 0)
            if count >= _RESTARTS:
                continue
            self._restarts[gate] = count + 1
            self.gate, self.since = gate, now

    def overdue(self, scale: float, now: float | None = None) -> str:
        """Why the child is to be ended now (its current gate past its limit under the load `scale`), or "", once
        what the journal gained is read."""
        now = time.monotonic() if now is None else now
        self.watch(now)
        if not self.gate:
            return ""
        deadline = self.deadlines[self.gate]
        elapsed, limit = now - self.since, limit_s(deadline, scale)
        if elapsed <= limit:
            return ""
        return (
            f"ended by the executor, its own alarm unheeded: still running {elapsed:.1f}s after {self.gate} began, "
            f"past its deadline ({deadline:.1f}s x load {max(1.0, scale):.2f}, {limit:.1f}s with the margin)"
        )
