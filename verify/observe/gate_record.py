"""The gates as workloads: an engine's own tests run under pytest in an observation child, with what its source
roots' functions return recorded in call order.

Where a project names no observer, `dflash verify explain` still needs values to compare. The gates that reach a
mutant's changed lines drive the engine, and a profile hook (`sys.setprofile`, whose "return" events carry the
returned value on every Python this project supports) records each return of a function whose code lies under
the source roots: the observable is the function's qualified name (`module.Class.method`), its step the number
of returns of that function before it in that gate (so an extra call of one helper shifts only that helper's
keys), its workload the gate's node id. Each gate starts from the same random state (random, numpy and torch
seeded with 0, the gate seed stream 0), so a gate run alone records what it records among the others, and the
gate's outcome is an observable too ("gate outcome").

The recording is bounded (`RecordLimits`): at most `calls_per_gate` returns per gate, tensors past
`tensor_elements` values kept as an evenly strided sample (their shape kept), sequences and mappings cut at
`items`, strings at `chars`, nesting at `depth`, and at most `elements_per_gate` values per gate: what was
left out is counted and said (`GateRecording.capped`), never silently dropped. Knows nothing of forking,
mutations or comparisons.
"""

from __future__ import annotations

import dataclasses
import os
import random
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch

from verify.observe.record import Observation, Recorder

__all__ = ["GATE_OUTCOME", "GateRecording", "RecordLimits", "record_gates"]

GATE_OUTCOME = "gate outcome"


@dataclass(frozen=True, slots=True)
class RecordLimits:
    """What one gate's recording may hold; past it, values are sampled or left out and counted."""

    calls_per_gate: int = 4000
    elements_per_gate: int = 400_000
    tensor_elements: int = 8192
    items: int = 64
    chars: int = 300
    depth: int = 3

    def __post_init__(self) -> None:
        for name in ("calls_per_gate", "elements_per_gate", "tensor_elements", "items", "chars", "depth"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"RecordLimits.{name} must be an integer >= 1, got {value!r}")


@dataclass(slots=True)
class GateRecording:
    """What `record_gates` saw: the observation, each gate's wall time, where each recorded function is defined
    (name -> "file:line"), and per gate what the limits left out (a phrase; absent when nothing was)."""

    observation: Observation
    seconds: dict[str, float] = field(default_factory=dict)
    functions: dict[str, str] = field(default_factory=dict)
    capped: dict[str, str] = field(default_factory=dict)


def _alarm(signum: int, frame: Any) -> None:
    from verify.observe.protocol import WorkloadTimeout

    raise WorkloadTimeout


def _fresh_state() -> None:
    """Every gate from the same random state, whichever gates ran before it in this process."""
    random.seed(0)
    torch.manual_seed(0)
    if (numpy_random := sys.modules.get("numpy.random")) is not None:
        numpy_random.seed(0)


class _Recorder:
    """The pytest plugin and the profile hook: one gate at a time."""

    def __init__(self, root: Path, source_roots: Sequence[str], recorder: Recorder, limits: RecordLimits,
                 budget_s: float | None, cov: Any) -> None:  # fmt: skip
        self.root = root.resolve()
        self.roots = tuple(str((root / rel).resolve()) for rel in source_roots)
        self.recorder, self.limits, self.budget_s, self.cov = recorder, limits, budget_s, cov
        self.names: dict[Any, str] = {}  # code object -> qualified name ("" for code not recorded)
        self.functions: dict[str, str] = {}
        self.seconds: dict[str, float] = {}
        self.capped: dict[str, str] = {}
        self.counts: dict[str, int] = {}
        self.calls = self.elements = self.dropped_calls = self.dropped_values = self.sampled = 0
        self.busy = False

    # ---- the profile hook -----------------------------------------------------------------------------
    def _name(self, frame: Any) -> str:
        code = frame.f_code
        if code.co_name.startswith("<") and code.co_name != "<lambda>":
            return ""  # a module body, a comprehension or a generator expression: their values show elsewhere
        try:
            path = str(Path(code.co_filename).resolve())
        except (OSError, ValueError):
            return ""
        if not any(path == root or path.startswith(root + "/") for root in self.roots):
            return ""
        qualname = getattr(code, "co_qualname", "")  # 3.11+; on 3.10 the class is read off `self`
        if not qualname:
            owner = frame.f_locals.get("self")
            qualname = f"{type(owner).__qualname__}.{code.co_name}" if owner is not None else code.co_name
        name = f"{frame.f_globals.get('__name__', '?')}.{qualname}"
        self.functions.setdefault(name, f"{Path(path).relative_to(self.root).as_posix()}:{code.co_firstlineno}")
        return name

    def profile(self, frame: Any, event: str, arg: Any) -> None:
        if event != "return" or self.busy:
            return
        code = frame.f_code
        name = self.names.get(code)
        if name is None:
            name = self.names[code] = self._name(frame)
        if not name:
            return
        if self.calls >= self.limits.calls_per_gate:
            self.dropped_calls += 1
            return
        self.busy = True  # a value's repr may call the engine's code: not recorded
        try:
            step = self.counts.get(name, 0)
            self.counts[name] = step + 1
            self.calls += 1
            try:
                value = self._bounded(arg, 0)
            except Exception as error:  # a value that cannot be read is recorded as such, the same in both runs
                value = f"<unreadable {type(arg).__name__}: {type(error).__name__}>"
            self.recorder.emit(step, -1, name, value)
        finally:
            self.busy = False

    def _count(self, n: int) -> bool:
        if self.elements + n > self.limits.elements_per_gate:
            self.dropped_values += 1
            return False
        self.elements += n
        return True

    def _bounded(self, value: Any, depth: int) -> Any:
        limits = self.limits
        if type(value).__module__ == "numpy" and hasattr(value, "__array__") and bool(getattr(value, "ndim", 0)):
            value = torch.as_tensor(value.copy())
        if isinstance(value, torch.Tensor):
            tensor = value.detach()
            if tensor.layout != torch.strided or tensor.device.type == "meta":
                return f"tensor{tuple(tensor.shape)} {tensor.dtype} {tensor.layout} {tensor.device.type}"
            numel = tensor.numel()
            if numel > limits.tensor_elements:
                self.sampled += 1
                index = torch.linspace(0, numel - 1, limits.tensor_elements).round().long()
                sample = tensor.reshape(-1)[index.to(tensor.device)]
                if not self._count(limits.tensor_elements):
                    return ("tensor", tuple(tensor.shape), str(tensor.dtype), "not recorded: past the size cap")
                return ("tensor sampled", tuple(tensor.shape), sample)
            if not self._count(numel):
                return ("tensor", tuple(tensor.shape), str(tensor.dtype), "not recorded: past the size cap")
            return tensor
        if value is None or isinstance(value, bool | int | float | complex):
            return value if not isinstance(value, complex) else repr(value)
        if isinstance(value, str | bytes):
            text = value if isinstance(value, str) else repr(value)
            return text if len(text) <= limits.chars else text[: limits.chars] + f"... ({len(text)} chars)"
        if depth >= limits.depth:
            return f"<{type(value).__qualname__}>"
        if isinstance(value, Mapping):
            pairs = list(value.items())
            mapped = {str(k): self._bounded(v, depth + 1) for k, v in pairs[: limits.items]}
            if len(pairs) > limits.items:
                mapped["..."] = f"{len(pairs) - limits.items} more"
            return mapped
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            fields = [(f.name, self._bounded(getattr(value, f.name), depth + 1)) for f in dataclasses.fields(value)]
            return (type(value).__qualname__, tuple(fields[: limits.items]))
        if isinstance(value, list | tuple | set | frozenset | range):
            items = sorted(value, key=repr) if isinstance(value, set | frozenset) else list(value)
            if not self._count(len(items[: limits.items])):
                return f"<{type(value).__name__} of {len(items)}: past the size cap>"
            kept = [self._bounded(item, depth + 1) for item in items[: limits.items]]
            if len(items) > limits.items:
                kept.append(f"... {len(items) - limits.items} more")
            return tuple(kept)
        if isinstance(value, torch.nn.Module):
            return f"<{type(value).__qualname__}>"  # its weights are not a return value's news
        if type(value).__repr__ is object.__repr__ and hasattr(value, "__dict__"):
            public = [(k, v) for k, v in vars(value).items() if not k.startswith("_")][: limits.items]
            return (type(value).__qualname__, tuple((k, self._bounded(v, depth + 1)) for k, v in public))
        text = repr(value)
        return text if len(text) <= limits.chars else text[: limits.chars] + "..."

    # ---- the pytest plugin ----------------------------------------------------------------------------
    def _begin(self, gate: str) -> None:
        self.recorder.workload = gate
        self.counts, self.calls, self.elements = {}, 0, 0
        self.dropped_calls = self.dropped_values = self.sampled = 0
        _fresh_state()
        if self.cov is not None:
            self.cov.switch_context(gate)

    def _end(self, gate: str) -> None:
        said = []
        if self.dropped_calls:
            said.append(f"{self.dropped_calls} returns past the first {self.limits.calls_per_gate} not recorded")
        if self.dropped_values:
            said.append(f"{self.dropped_values} values past {self.limits.elements_per_gate} elements left out")
        if self.sampled:
            said.append(f"{self.sampled} tensors over {self.limits.tensor_elements} values sampled")
        if said:
            self.capped[gate] = "; ".join(said)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: Any, nextitem: Any) -> Any:
        gate = item.nodeid
        self._begin(gate)
        started = time.monotonic()
        previous = signal.signal(signal.SIGALRM, _alarm) if self.budget_s else None
        if self.budget_s:
            signal.setitimer(signal.ITIMER_REAL, self.budget_s, 1.0)
        sys.setprofile(self.profile)
        try:
            yield
        finally:
            sys.setprofile(None)
            if self.budget_s:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
            self.seconds[gate] = time.monotonic() - started
            self._end(gate)

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.when != "call" and not report.failed:
            return
        from verify.observe.protocol import WorkloadTimeout

        self.busy = True
        try:
            excinfo = getattr(report, "longrepr", None)
            if report.failed and WorkloadTimeout.__name__ in str(excinfo):
                self.recorder.emit(-1, -1, "timeout", f"ran past {self.budget_s:g} s")
            else:
                self.recorder.emit(-1, -1, GATE_OUTCOME, f"{report.when}: {report.outcome}")
        finally:
            self.busy = False


def record_gates(
    root: Path,
    source_roots: Sequence[str],
    pytest_args: Sequence[str],
    scrub: Sequence[tuple[str, str]] = (),
    budget_s: float | None = None,
    limits: RecordLimits | None = None,
    cov: Any = None,
) -> GateRecording:
    """Run pytest on `pytest_args` (gate ids or paths, and the project's options) in this process, from `root`,
    recording the source roots' returns per gate. `cov`, a started coverage.py, is switched to each gate's node
    id as its context (which gates ran which lines, measured)."""
    from verify.seeds import GATE_SEED_ENV

    os.environ[GATE_SEED_ENV] = "0"  # the stream a plain pytest run draws from: the values the gates see there
    recorder = Recorder(tuple(scrub))
    plugin = _Recorder(Path(root), source_roots, recorder, limits or RecordLimits(), budget_s, cov)
    pytest.main([*pytest_args, "-p", "no:cacheprovider", "-q", "--rootdir", str(root)], plugins=[plugin])
    return GateRecording(recorder.observation(), plugin.seconds, plugin.functions, plugin.capped)
