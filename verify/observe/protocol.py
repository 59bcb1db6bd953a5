"""The observer protocol: how an engine lets dflash see what a bug changes, step by step.

A project names a factory in `[tool.dflash] observe = "mypkg.observe:make_observer"`. `make_observer()`
returns an object with

- `workloads`: the workload names, in a fixed order (each drives the engine on fixed inputs and seeds);
- `run(workload, emit)`: runs one, calling `emit(step, row, what, value)` for each observable it sees
  (`step`/`row` -1 where none applies; `what` a short name such as "drafted" or "draft store"; `value` an
  int, float, str, bool, None, a tensor, or a list/tuple/dict of those);
- optionally `gates`: a mapping from an observable's name to the kind of gate that would compare it.

The factory is imported after the mutant is served, so everything it imports from the project is the mutated
code. An exception escaping `run` ends that workload and is itself an observable ("error"); a workload running
past its budget ends as one ("timeout"). This module runs an observer and knows nothing of forking,
mutations or comparisons.
"""

from __future__ import annotations

import importlib
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from verify.observe.record import Observation, Recorder

__all__ = ["Emit", "Observer", "ObserverError", "WorkloadTimeout", "load_factory", "observe"]


class ObserverError(Exception):
    """The observer factory cannot be imported, or what it returns does not follow the protocol."""


class WorkloadTimeout(BaseException):
    """A workload ran past its budget (a mutant that loops): recorded as the observable "timeout". Not an
    Exception, so the `except Exception` an engine or an observer keeps (recording a refusal) cannot swallow it;
    and the alarm repeats every second until the workload ends, in case something swallows it anyway."""


class Emit(Protocol):
    def __call__(self, step: int, row: int, what: str, value: Any) -> None: ...


@runtime_checkable
class Observer(Protocol):
    workloads: Sequence[str]

    def run(self, workload: str, emit: Emit) -> None: ...


def load_factory(spec: str) -> Callable[[], Any]:
    """`module:function` -> the function (imported now: call it only where the mutant is served)."""
    module_name, _, function = spec.partition(":")
    if not module_name or not function:
        raise ObserverError(f"observe = {spec!r}: want 'module:function', e.g. 'mypkg.observe:make_observer'")
    try:
        module = importlib.import_module(module_name)
    except Exception as error:
        raise ObserverError(
            f"observe = {spec!r}: cannot import {module_name}: {type(error).__name__}: {error}"
        ) from None
    factory = getattr(module, function, None)
    if not callable(factory):
        raise ObserverError(f"observe = {spec!r}: {module_name} has no function {function!r}")
    return factory


def make(spec: str) -> Observer:
    observer = load_factory(spec)()
    if not isinstance(observer, Observer) or isinstance(observer.workloads, str) or not observer.workloads:
        raise ObserverError(f"observe = {spec!r} returned {type(observer).__name__}: it needs `workloads` (names) "
                            "and `run(workload, emit)`")  # fmt: skip
    return observer


def gates_of(observer: Any) -> Mapping[str, str]:
    gates = getattr(observer, "gates", None)
    return dict(gates) if isinstance(gates, Mapping) else {}


def _alarm(signum: int, frame: Any) -> None:
    raise WorkloadTimeout


def observe(
    observer: Observer,
    scrub: Sequence[tuple[str, str]] = (),
    budget_s: float | None = None,
    stop: Callable[[Observation], bool] | None = None,
) -> tuple[Observation, dict[str, float]]:
    """Run every workload in order; an exception or a timeout ends its workload as an observable. `stop`, asked
    after each workload with the observation so far, ends the run early. Returns the observation and each
    workload's wall time."""
    recorder = Recorder(tuple(scrub))
    last_step = {"step": -1}

    def emit(step: int, row: int, what: str, value: Any) -> None:
        last_step["step"] = max(last_step["step"], int(step))
        recorder.emit(step, row, what, value)

    seconds: dict[str, float] = {}
    previous = signal.signal(signal.SIGALRM, _alarm) if budget_s else None
    try:
        for workload in observer.workloads:
            recorder.workload, last_step["step"] = str(workload), -1
            started = time.monotonic()
            if budget_s:
                signal.setitimer(signal.ITIMER_REAL, budget_s, 1.0)
            try:
                observer.run(workload, emit)
            except WorkloadTimeout:
                recorder.emit(last_step["step"], -1, "timeout", f"ran past {budget_s:g} s")
            except ObserverError:  # the observer itself broke (its hooks no longer fit the engine): harness trouble
                raise
            except (Exception, SystemExit) as error:  # the mutant's exception is an observable, not our failure
                recorder.emit(last_step["step"], -1, "error", f"{type(error).__name__}: {error}")
            finally:
                if budget_s:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                seconds[str(workload)] = time.monotonic() - started
            if stop is not None and stop(recorder.observation()):
                break
    finally:
        if previous is not None:
            signal.signal(signal.SIGALRM, previous)
    return recorder.observation(), seconds
