"""A gate's own deadline inside a child: armed when the gate starts, ended by raising `GateTimeout` in it.

The deadline is the gate's idle-machine time (given by the parent) stretched by the load, measured when the
gate starts and again when the alarm rings; the mean of the two decides. It knows nothing of pytest's hooks:
the recorder arms, disarms and says when the gate's own code is running.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["GateDeadlines", "GateTimeout"]

# Where pytest itself runs between a gate's phases, a deadline that ran out is acted on this much later.
_RETRY_S = 0.05


class GateTimeout(BaseException):
    """Raised inside a gate that ran past its own deadline. A BaseException, so the code under test's `except
    Exception` cannot swallow it; one that swallows everything is ended by the executor's budget for the job."""


class GateDeadlines:
    """SIGALRM-driven deadlines, one gate at a time (a child runs its gates one after another)."""

    def __init__(self, deadlines: Mapping[str, float] | None, load_scale: Callable[[], float]) -> None:
        self.deadlines = dict(deadlines or {})  # gate id -> seconds on an idle machine
        self.load_scale = load_scale
        self.in_phase = False  # the recorder sets it inside a gate's setup, call or teardown
        self._gate = ""  # the gate whose deadline is armed
        self._started = 0.0
        self._scale = 1.0  # the load measured when it started

    def arm(self, gate_id: str) -> None:
        if gate_id not in self.deadlines:
            return  # a gate without one runs under the job's budget only
        self._gate, self._started, self._scale = gate_id, time.monotonic(), self.load_scale()
        signal.signal(signal.SIGALRM, self._on_alarm)
        signal.setitimer(signal.ITIMER_REAL, self.deadlines[gate_id] * self._scale)

    def disarm(self) -> None:
        if self._gate:
            signal.setitimer(signal.ITIMER_REAL, 0)
            self._gate = ""

    def _on_alarm(self, signum: int, frame: Any) -> None:
        if not self._gate:
            return
        # Stretched by the load, as the executor stretches a job's budget: the mean of the load at the gate's
        # start and now. Not run out yet (the load rose): wait for the rest.
        deadline = self.deadlines[self._gate]
        limit = deadline * (self._scale + self.load_scale()) / 2
        elapsed = time.monotonic() - self._started
        if elapsed < limit:
            signal.setitimer(signal.ITIMER_REAL, limit - elapsed)
            return
        if not self.in_phase:  # pytest's own bookkeeping between phases: act once the gate's code runs again
            signal.setitimer(signal.ITIMER_REAL, _RETRY_S)
            return
        # Its teardown (which may hang too) gets a deadline of its own from now.
        self._started, self._scale = time.monotonic(), self.load_scale()
        signal.setitimer(signal.ITIMER_REAL, deadline * self._scale)
        raise GateTimeout(f"still running after {elapsed:.1f}s (its deadline {deadline:.1f}s x load)")
