"""SIGINT and SIGTERM as interrupts of the parent: where it stands, so it can end its children and keep what
finished, and which of the two it was (exit 130 or 143). Knows nothing of children or verdicts.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from typing import Any

__all__ = ["interrupt_signal", "signals_as_interrupts"]


class _Interrupt(KeyboardInterrupt):
    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


# The signal that raised the last interrupt: a blocking call in C (Ray's `ray.wait`) turns the handler's
# exception into a plain KeyboardInterrupt, so the exception alone cannot always say which signal it was.
_RECEIVED: list[int] = []


@contextlib.contextmanager
def signals_as_interrupts() -> Iterator[None]:
    """SIGTERM (like SIGINT) interrupts the parent where it is, so it can kill children and clean up."""

    def raise_interrupt(signum: int, frame: Any) -> None:
        _RECEIVED[:] = [signum]
        raise _Interrupt(signum)

    _RECEIVED.clear()
    previous = {s: signal.signal(s, raise_interrupt) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def interrupt_signal(error: BaseException) -> str:
    if isinstance(error, _Interrupt):
        return signal.Signals(error.signum).name
    return signal.Signals(_RECEIVED[0]).name if _RECEIVED else "SIGINT"
