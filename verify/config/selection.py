"""Which mutations a run owns: the name filter, the shard slice, and the run's options.

Knows nothing of processes or verdicts; bad selections are `SelectionError` (CLI exit code 2).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from verify.config.settings import ProjectConfig
from verify.mutation import Mutation, unknown_names

__all__ = ["RunOptions", "SelectionError", "Shard", "select"]


class SelectionError(Exception):
    """An unknown mutation name, a malformed shard or an empty catalog (CLI exit code 2)."""


@dataclass(frozen=True, slots=True)
class Shard:
    index: int  # 1-based: shard K of N
    count: int

    def __post_init__(self) -> None:
        if not 1 <= self.index <= self.count:
            raise SelectionError(f"shard {self.index}/{self.count}: need 1 <= K <= N")

    @classmethod
    def parse(cls, text: str) -> Shard:
        index, sep, count = text.partition("/")
        if not sep or not index.isdigit() or not count.isdigit():
            raise SelectionError(f"shard {text!r} must look like K/N, e.g. 2/4")
        return cls(int(index), int(count))

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True, slots=True)
class RunOptions:
    jobs: int = 0  # 0: the config's jobs
    all_gates: bool = False  # run every gate for every mutation, not only those reaching its lines
    changed_since: str | None = None
    shard: Shard | None = None
    names: tuple[str, ...] = ()  # only these mutations; () means all
    use_cache: bool = True
    # Stop each mutant's gates at its first kill, once its pinned gates have run (PIT's and Stryker's
    # default); the matrix then shows only the gates that ran. False: every reaching gate, the full matrix.
    first_kill: bool = False
    ray_address: str | None = None  # `--executor ray`: the cluster (None: RAY_ADDRESS, else one started for the run)
    # The report files the run writes: left out of the check of the user's tree and of the files the cache keys
    # on (a report inside a source root would otherwise make every next run miss the cache).
    outputs: tuple[Path, ...] = ()


def select(mutations: Mapping[str, Mutation], options: RunOptions, config: ProjectConfig) -> list[Mutation]:
    """The mutations this run owns: the name filter, then the shard slice over the sorted names."""
    if not mutations:
        modules = ", ".join(config.mutation_modules)
        raise SelectionError(
            f"the catalog is empty: {modules} registered no mutation (an empty catalog proves nothing)"
        )
    unknown = sorted(set(options.names) - set(mutations))
    if unknown:
        raise SelectionError(unknown_names(unknown, mutations))
    unknown_required = sorted(set(config.required or ()) - set(mutations))
    if unknown_required:
        raise SelectionError(f"[tool.dflash] required names {unknown_names(unknown_required, mutations)}")
    names = sorted(options.names or mutations)
    if options.shard is not None:
        names = [n for i, n in enumerate(names) if i % options.shard.count == options.shard.index - 1]
    return [mutations[n] for n in names]
