"""The run's watch over what the user owns: which confinement its children get, an inventory of the project
before and after, who was running when something changed, and no process of the run outliving it.

Before the first child the project is inventoried (`verify.sandbox.inventory`); the executor is wrapped so that
each finished job leaves its wall-clock window (its key and when it ran). When the run ends, every process a
child left behind that escaped its process group (a daemon that called setsid) is killed (the parent is
their subreaper for the run's length, so they come back to it), and only then is the project inventoried
again: a late write cannot land after the check. Any difference is a harness error naming every file and
the jobs that were running when it changed (its ctime); those jobs' verdicts are then void. Left out: the
tool's cache, the run's own report files and a temp dir inside the project. The parent writes no bytecode
while the guard holds (a module it imports late, such as a report module of a project that is this tool,
would otherwise leave a .pyc in the tree), so a .pyc that appears is always someone else's: a planted one
would run in the next run's parent. Of the home only the start-up and credential files are
inventoried (`verify.sandbox.inventory.HOME_FILES`); confinement keeps children out of the rest. Knows nothing
of mutations, verdicts or how the executor starts its children.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

from verify.sandbox import reaper
from verify.sandbox.confine import Confinement, probe
from verify.sandbox.inventory import Change, Snapshot, diff, home_paths, snapshot, snapshot_aside

__all__ = ["TreeGuard"]

E = TypeVar("E")
_SLACK_NS = 20_000_000  # file-system clocks are coarse (a tick or so): past every window, widen them by this
_LEFTOVERS_S = 10.0  # to end every process a child left behind, however deep its chain of forks


@dataclass(frozen=True, slots=True)
class _Window:
    key: str
    start_ns: int
    end_ns: int


class _Watched:
    """An executor that records each finished job's window; everything else is the wrapped executor's."""

    def __init__(self, inner: Any, windows: list[_Window]) -> None:
        self._inner = inner
        self._windows = windows

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def run(self, jobs: Sequence[Any], num_jobs: int, on_done: Callable[[Any], None] | None = None) -> list[Any]:
        def record(result: Any) -> None:
            end = time.time_ns()
            self._windows.append(_Window(result.key, end - int(result.duration_s * 1e9), end))
            if on_done is not None:
                on_done(result)

        results: list[Any] = self._inner.run(jobs, num_jobs, record)
        return results


def _who(keys: list[str]) -> str:
    named = [f"mutant {k}" if not k.startswith("_") else f"the {k.lstrip('_')} child" for k in dict.fromkeys(keys)]
    if not named:
        return "while no child ran (a process a child left behind, or someone else)"
    return "while " + " or ".join(named) + (" ran" if len(named) == 1 else " ran at once")


class TreeGuard:
    """Use as a context manager around the executor's `with` block; `errors` holds the findings after it."""

    def __init__(
        self, root: Path, outputs: Iterable[Path] = (), cache_dir: str = ".dflash-cache", aside: bool = False
    ) -> None:
        """`aside`: the first inventory is taken by a helper process while the caller goes on, and the caller
        must call `watch` before any child of its starts (`watch` waits for it)."""
        self.root = Path(root).resolve()
        self.confinement: Confinement = probe()
        skip = {cache_dir}
        for path in outputs:
            resolved = Path(path).resolve()
            if resolved.is_relative_to(self.root):
                skip.add(resolved.relative_to(self.root).as_posix())
        # A temp dir inside the project (TMPDIR=./tmp) holds the executor's copies, which come and go.
        temp = Path(tempfile.gettempdir()).resolve()
        if temp.is_relative_to(self.root) and temp != self.root:
            skip.add(temp.relative_to(self.root).as_posix())
        self._skip = skip
        self._windows: list[_Window] = []
        # Resolved now: the home the children see is the one in this process's environment when the run starts.
        self._home = Path(os.path.expanduser("~"))
        self._home_files = home_paths(self._home)
        if aside:  # taken while the executor starts (torch's import), waited for before the first child
            self._before: Callable[[], Snapshot] = snapshot_aside(self.root, skip, self._home_files)
        else:
            before = snapshot(self.root, skip, self._home_files)
            self._before = lambda: before
        self._children: set[int] = set()
        self._was_subreaper = False
        self._wrote_bytecode = sys.dont_write_bytecode
        self.errors: tuple[str, ...] = ()
        self.culprits: dict[str, list[str]] = {}  # job key -> the files that changed while it ran

    def watch(self, executor: E) -> E:
        """The executor, recording each job's window (an executor in all but type, so the cast is exact). Call
        it before the executor runs any job: it waits for the inventory taken before the run."""
        self._before()
        return cast(E, _Watched(executor, self._windows))

    def record(self, key: str, start_ns: int, end_ns: int) -> None:
        """A window run outside an executor (the sweep's mutmut): a change within it names `key` ("_x": the x
        child)."""
        self._windows.append(_Window(key, start_ns, end_ns))

    def __enter__(self) -> TreeGuard:
        self._children = reaper.children()
        self._was_subreaper = reaper.is_subreaper()
        reaper.become_subreaper()
        self._wrote_bytecode = sys.dont_write_bytecode
        sys.dont_write_bytecode = True
        return self

    def __exit__(self, *exc: object) -> None:
        # What the run's children left running outside their process groups, each with everything under it.
        survivors = reaper.end_children(keep=self._children, within_s=_LEFTOVERS_S)
        reaper.become_subreaper(self._was_subreaper)
        home = sorted({*self._home_files, *home_paths(self._home)})  # a .pth file made during the run too
        after = snapshot(self.root, self._skip, home)
        sys.dont_write_bytecode = self._wrote_bytecode
        errors = []
        if survivors:
            errors.append(
                f"processes the run's children started could not be ended within {_LEFTOVERS_S:g} s (pids "
                f"{', '.join(map(str, survivors))}): they may still change the user's files after this check"
            )
        if changes := diff(self._before(), after):
            errors.append(self._describe(changes))
        self.errors = tuple(errors)

    def _describe(self, changes: list[Change]) -> str:
        parts = []  # every file, however many: the user must be able to check each one
        for change in changes:
            keys = [w.key for w in self._windows if w.start_ns <= change.when_ns <= w.end_ns] or [
                w.key for w in self._windows if w.start_ns - _SLACK_NS <= change.when_ns <= w.end_ns + _SLACK_NS
            ]
            when = _who(keys) if change.when_ns else "when, unknown"
            for key in keys:
                self.culprits.setdefault(key, []).append(change.path)
            parts.append(f"{change.path or '.'} ({change.what}, {when})")
        how = (
            f"{self.confinement.describe()} was on: it does not govern chmod, utime or xattrs"
            if self.confinement.active
            else f"confinement {self.confinement.describe()}"
        )
        return f"the run changed the user's files: {'; '.join(parts)} ({how})"
