"""The mutation record and the registry that catalog modules fill.

A `Mutation` is one semantic bug: an exact snippet of runner source and what it becomes. This module
knows nothing of files on disk, pytest or the executor; it is a leaf that imports nothing internal,
so catalog modules (`from verify.mutation import Mutation, register`) pull in nothing else.

The package's map: this module (the record and its registry) and `apply` (matching a mutation's anchor, the
mutated text and its diff, and serving it to a child's imports), which run, observe, sweep and propose share
and which is never imported here, so a catalog stays light.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath

__all__ = [
    "EXPECTATIONS",
    "Mutation",
    "MutationError",
    "all_mutations",
    "get",
    "mutation",
    "register",
    "reset_registry",
    "unknown_names",
]

EXPECTATIONS = ("killed", "survives")
_KEBAB = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


class MutationError(ValueError):
    """A mutation record is malformed, or its name is registered twice or unknown."""


@dataclass(frozen=True, slots=True)
class Mutation:
    """One registered bug: replace `anchor` (which must occur exactly once in `file`) with `replacement`.

    `expect_killed_by` pins gate ids (pytest node ids or node-id prefixes) that must stay among the
    killers, so a refactor of the gates cannot silently move the catch elsewhere.
    """

    name: str
    bug_class: str  # one line: the bug class, and where such a bug was seen
    file: str  # posix path relative to the project root, e.g. "runner/draft.py"
    anchor: str
    replacement: str
    expect_killed_by: tuple[str, ...] = ()
    # "killed": a gate must catch it (the default). "survives": it is expected to survive, with `reason`
    # saying why (an equivalent mutant, or a known gap and the issue that tracks it); it is reported and
    # does not fail the run, and its being killed is reported as news.
    expect: str = "killed"
    reason: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _KEBAB.match(self.name):
            raise MutationError(f"mutation name {self.name!r} must be kebab-case, e.g. 'draft-skips-mask'")
        where = f"mutation {self.name!r}"
        if not isinstance(self.bug_class, str) or not self.bug_class.strip():
            raise MutationError(f"{where}: bug_class must be a non-empty line")
        if "\n" in self.bug_class.strip():
            raise MutationError(f"{where}: bug_class must be one line")
        path = PurePosixPath(self.file) if isinstance(self.file, str) else None
        if path is None or not self.file or path.is_absolute() or ".." in path.parts or "\\" in self.file:
            raise MutationError(f"{where}: file {self.file!r} must be a relative posix path inside the project")
        if path.suffix != ".py":
            raise MutationError(f"{where}: file {self.file!r} must be a Python source file")
        if not isinstance(self.anchor, str) or not self.anchor.strip():
            raise MutationError(f"{where}: anchor must be non-empty code")
        if not isinstance(self.replacement, str):
            raise MutationError(f"{where}: replacement must be a string")
        if self.anchor == self.replacement:
            raise MutationError(f"{where}: replacement equals the anchor, so the mutation changes nothing")
        if not isinstance(self.expect_killed_by, tuple) or not all(
            isinstance(gate_id, str) and gate_id for gate_id in self.expect_killed_by
        ):
            raise MutationError(f"{where}: expect_killed_by must be a tuple of non-empty gate ids")
        if self.expect not in EXPECTATIONS:
            raise MutationError(f"{where}: expect must be one of {', '.join(EXPECTATIONS)}, got {self.expect!r}")
        if not isinstance(self.reason, str) or (self.expect == "survives" and not self.reason.strip()):
            raise MutationError(f"{where}: expect='survives' needs a reason (equivalent, or the gap's issue)")
        if self.expect == "survives" and self.expect_killed_by:
            raise MutationError(f"{where}: a mutation expected to survive cannot pin killers")


_REGISTRY: dict[str, Mutation] = {}


def register(*mutations: Mutation) -> None:
    """Add mutations to the registry; a name registered twice is an error, not an override."""
    for item in mutations:
        if not isinstance(item, Mutation):
            raise MutationError(f"register() takes Mutation records, got {type(item).__name__}")
        if item.name in _REGISTRY:
            raise MutationError(f"mutation {item.name!r} is registered twice")
        _REGISTRY[item.name] = item


def mutation(factory: Callable[[], Mutation]) -> Callable[[], Mutation]:
    """Decorator: register the Mutation that a zero-argument function returns, and keep the function."""
    made = factory()
    if not isinstance(made, Mutation):
        raise MutationError(f"@mutation function {factory.__name__} must return a Mutation")
    register(made)
    return factory


def all_mutations() -> dict[str, Mutation]:
    """A copy of the registry, sorted by name so every consumer sees the same order."""
    return dict(sorted(_REGISTRY.items()))


def get(name: str) -> Mutation:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise MutationError(unknown_names([name], _REGISTRY)) from None


def unknown_names(names: Iterable[str], known: Iterable[str]) -> str:
    """The words for mutation names a catalog lacks: each with its closest registered names (a typo is the usual
    cause), then where the whole list is."""
    known = sorted(known)
    parts = []
    for name in names:
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        parts.append(f"{name} (did you mean {' or '.join(close)}?)" if close else name)
    return f"unknown mutation: {', '.join(parts)}; `dflash mutations list` names them all"


def reset_registry() -> None:
    """Forget every registration (tests call this between cases; catalog imports refill it)."""
    _REGISTRY.clear()
