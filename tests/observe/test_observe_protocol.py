"""Running an observer: a workload past its budget ends as the observable "timeout", even when the engine or the
observer swallows exceptions (an `except Exception` recording a refusal, or an `except BaseException`), and the
next workload still runs."""

from __future__ import annotations

import time
from typing import Any

from verify.observe.protocol import observe


class _Looping:
    """Two workloads: the first loops forever and swallows every Exception; the second records one value."""

    workloads = ("loops", "after")

    def run(self, workload: str, emit: Any) -> None:
        if workload == "after":
            emit(0, 0, "value", 1)
            return
        emit(0, 0, "started", True)
        while True:
            try:
                self.wait()
            except Exception:  # what an engine's own refusal handling might do
                continue

    def wait(self) -> None:
        time.sleep(0.01)


class _SwallowsTwice(_Looping):
    """Swallows the alarm itself twice (an `except BaseException` in a retry loop), then lets it through."""

    def __init__(self) -> None:
        self.swallowed = 0

    def wait(self) -> None:
        try:
            time.sleep(0.01)
        except BaseException:
            self.swallowed += 1
            if self.swallowed >= 3:
                raise


def _run(observer: _Looping) -> list[tuple[str, str, object]]:
    started = time.monotonic()
    observation, _ = observe(observer, budget_s=0.3)
    assert time.monotonic() - started < 10
    return [(key[0], key[3], value) for key, value in observation.entries]


def test_a_loop_that_swallows_every_exception_still_ends_as_a_timeout() -> None:
    assert _run(_Looping()) == [("loops", "started", True), ("loops", "timeout", "ran past 0.3 s"),
                                ("after", "value", 1)]  # fmt: skip


def test_the_alarm_repeats_until_a_loop_lets_it_through() -> None:
    observer = _SwallowsTwice()
    assert _run(observer)[1:] == [("loops", "timeout", "ran past 0.3 s"), ("after", "value", 1)]
    assert observer.swallowed == 3
