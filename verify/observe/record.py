"""The observation record: what one run of an observer saw, as an ordered list of named observables.

An observable is one value under a key (workload, step, row, what): `what` is the observable's name (the
drafted ids, the draft's block logits, the q handed to the acceptance rule, a row's store contents, a raised
error). Values are normalised as they are recorded, so two runs compare by value and never by identity:
integer and boolean tensors (and numpy arrays) become nested tuples of ints (their shape kept), float tensors
are kept as CPU tensors (compared within the stated tolerance), a dataclass becomes its type name and fields,
strings lose the run's private paths and memory addresses. An observation crosses a process boundary as
JSON (`to_data`, `from_data`), never pickled: what a mutant's process wrote is read as data, and nothing in it
runs. Knows nothing of the runner, of mutations or of how a run is started.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["Key", "Observation", "Recorder", "digest", "from_data", "normalise", "render_value", "to_data"]

# (workload, step, row, what): step and row are -1 where the observable belongs to no step or row.
Key = tuple[str, int, int, str]
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")


def normalise(value: Any, scrub: Sequence[tuple[str, str]] = ()) -> Any:
    """A value that compares by content: nested tuples of ints for integer tensors, CPU tensors for floats."""
    if type(value).__module__ == "numpy" and hasattr(value, "__array__"):
        value = torch.from_numpy(_numpy_array(value))
    if isinstance(value, torch.Tensor):
        tensor = value.detach().to("cpu")
        if tensor.is_floating_point() or tensor.is_complex():
            return tensor.clone().contiguous()
        return _nested(tensor.tolist())
    if isinstance(value, bool | int | None):
        return value
    if isinstance(value, float):
        return value
    if isinstance(value, str):
        for text, placeholder in scrub:
            value = value.replace(text, placeholder)
        return _ADDRESS.sub("0x...", value)
    if isinstance(value, Mapping):
        return tuple((normalise(k, scrub), normalise(v, scrub)) for k, v in value.items())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = tuple((f.name, normalise(getattr(value, f.name), scrub)) for f in dataclasses.fields(value))
        return (type(value).__name__, fields)
    if isinstance(value, Sequence | set | frozenset):
        items = sorted(value) if isinstance(value, set | frozenset) else value
        return tuple(normalise(item, scrub) for item in items)
    return normalise(repr(value), scrub)


def _numpy_array(value: Any) -> Any:
    import numpy

    return numpy.array(value, copy=True)  # writable and owned: torch shares its memory


def _nested(value: Any) -> Any:
    """`Tensor.tolist()` with tuples for lists: (2, 3) and (3, 2) stay apart; a 0-d tensor is its item."""
    return tuple(_nested(item) for item in value) if isinstance(value, list) else value


@dataclass(slots=True)
class Recorder:
    """Collects observables in the order an observer emits them; a key emitted twice keeps both (numbered)."""

    scrub: tuple[tuple[str, str], ...] = ()
    workload: str = ""
    entries: dict[Key, Any] = field(default_factory=dict)

    def emit(self, step: int, row: int, what: str, value: Any) -> None:
        key: Key = (self.workload, int(step), int(row), str(what))
        number = 1
        while key in self.entries:
            number += 1
            key = (self.workload, int(step), int(row), f"{what}#{number}")
        self.entries[key] = normalise(value, self.scrub)

    def observation(self) -> Observation:
        return Observation(tuple(self.entries.items()))


@dataclass(frozen=True, slots=True)
class Observation:
    """One run's observables in emission order (the workloads in the observer's order)."""

    entries: tuple[tuple[Key, Any], ...]

    @property
    def whats(self) -> tuple[str, ...]:
        """The observables' names, each once, in first-seen order (`what#2` counts as `what`)."""
        seen: dict[str, None] = {}
        for (_, _, _, what), _ in self.entries:
            seen.setdefault(what.partition("#")[0], None)
        return tuple(seen)

    @property
    def workloads(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for (workload, _, _, _), _ in self.entries:
            seen.setdefault(workload, None)
        return tuple(seen)


def _feed(hasher: Any, value: Any) -> None:
    if isinstance(value, torch.Tensor):
        hasher.update(f"T{value.dtype}{tuple(value.shape)}".encode())
        # The raw bytes, whatever the dtype (numpy has no bfloat16): bit for bit.
        hasher.update(value.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(value, tuple):
        hasher.update(f"({len(value)}".encode())
        for item in value:
            _feed(hasher, item)
    else:
        hasher.update(f"{type(value).__name__}:{value!r};".encode())


def digest(observation: Observation) -> str:
    """A content hash of every key and value: equal for identical observations, bit for bit."""
    hasher = hashlib.sha256()
    for key, value in observation.entries:
        hasher.update(repr(key).encode())
        _feed(hasher, value)
    return hasher.hexdigest()[:16]


def render_value(value: Any, limit: int = 100) -> str:
    """A short human form of a value: a tensor by its shape and a few numbers, a long tuple cut."""
    if isinstance(value, torch.Tensor):
        flat = value.flatten().tolist()
        head = ", ".join(f"{x:.4g}" if isinstance(x, float) and math.isfinite(x) else str(x) for x in flat[:4])
        more = ", ..." if len(flat) > 4 else ""
        return f"tensor{tuple(value.shape)}[{head}{more}]"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# A normalised value is None, a bool, int, float or str, a tuple of values, or a CPU tensor: tuples become JSON
# lists, a tensor an object holding its dtype, shape and raw bytes (base64). Nothing else needs a tag.
_DTYPES = {str(dtype): dtype for dtype in (
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128,
)}  # fmt: skip


def _value_to_data(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        raw = value.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        return {"dtype": str(value.dtype), "shape": list(value.shape), "bytes": base64.b64encode(raw).decode()}
    if isinstance(value, tuple):
        return [_value_to_data(item) for item in value]
    return value


def _value_from_data(data: Any) -> Any:
    if isinstance(data, list):
        return tuple(_value_from_data(item) for item in data)
    if isinstance(data, dict):
        dtype = _DTYPES.get(str(data.get("dtype")))
        if dtype is None:
            raise ValueError(f"an observation holds a tensor of an unknown dtype: {data.get('dtype')!r}")
        raw = bytearray(base64.b64decode(str(data["bytes"]), validate=True))
        flat = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
        return flat.reshape([int(n) for n in data["shape"]]).clone()
    if data is None or isinstance(data, bool | int | float | str):
        return data
    raise ValueError(f"an observation holds a value of type {type(data).__name__}")


def to_data(observation: Observation) -> list[Any]:
    """The observation as JSON-ready data: [[workload, step, row, what], value] per entry."""
    return [[list(key), _value_to_data(value)] for key, value in observation.entries]


def from_data(data: Any) -> Observation:
    """`to_data`'s inverse; raises ValueError on anything else (data a child wrote is never trusted)."""
    if not isinstance(data, list):
        raise ValueError("an observation must be a list of entries")
    entries = []
    for item in data:
        (workload, step, row, what), value = item
        key: Key = (str(workload), int(step), int(row), str(what))
        entries.append((key, _value_from_data(value)))
    return Observation(tuple(entries))
