"""Applying a mutation: matching its anchor, the mutated text, its diff, and serving it to imports.

The working tree is never written. `apply_mutation` only reads; `MutantFinder` is installed in a
forked child and hands the importer the mutated text under the private copy's filename, so every
other child and the parent keep seeing the original files. This module knows nothing of pytest,
forking or verdicts.
"""

from __future__ import annotations

import difflib
import importlib.abc
import importlib.machinery
import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from verify.mutation import Mutation

__all__ = ["Applied", "MutantFinder", "Stale", "apply_mutation", "count_matches", "nearest", "unified_diff"]


@dataclass(frozen=True, slots=True)
class Applied:
    name: str
    file: str  # relative to the project root
    original: str
    mutated: str
    first_line: int  # 1-based lines of the anchor in the original file
    last_line: int

    @property
    def diff(self) -> str:
        return unified_diff(self.file, self.original, self.mutated)


@dataclass(frozen=True, slots=True)
class Stale:
    name: str
    reason: str


def count_matches(text: str, anchor: str) -> int:
    """Occurrences of anchor in text, overlapping ones included: 'aa' matches 'aaa' twice."""
    count, start = 0, text.find(anchor)
    while start != -1:
        count += 1
        start = text.find(anchor, start + 1)
    return count


def apply_mutation(mutation: Mutation, root: Path) -> Applied | Stale:
    """The mutated source of `mutation.file` under `root`, or why the mutation no longer applies."""
    path = Path(root) / mutation.file
    if not path.is_file():
        return Stale(mutation.name, f"file not found: {mutation.file}")
    original = path.read_text()
    matches = count_matches(original, mutation.anchor)
    if matches == 0:
        return Stale(mutation.name, f"anchor not found in {mutation.file}; {nearest(original, mutation.anchor)}")
    if matches > 1:
        return Stale(mutation.name, f"anchor matches {matches} times")
    start = original.index(mutation.anchor)
    mutated = original[:start] + mutation.replacement + original[start + len(mutation.anchor) :]
    try:
        compile(mutated, str(path), "exec", dont_inherit=True)
    except SyntaxError as error:
        return Stale(mutation.name, f"mutant does not compile: line {error.lineno}: {error.msg}")
    first_line = original.count("\n", 0, start) + 1
    last_line = first_line + mutation.anchor.rstrip("\n").count("\n")
    return Applied(mutation.name, mutation.file, original, mutated, first_line, last_line)


def _how(found: str, anchor: str) -> str:
    if "".join(found.split()) == "".join(anchor.split()):
        return "differs by whitespace"
    ops = [op for op in difflib.SequenceMatcher(None, anchor, found, autojunk=False).get_opcodes() if op[0] != "equal"]
    _, a0, a1, b0, b1 = ops[0]
    more = f" and {len(ops) - 1} more place{'s' if len(ops) > 2 else ''}" if len(ops) > 1 else ""
    return f"differs: the anchor has {anchor[a0:a1]!r} where the file has {found[b0:b1]!r}{more}"


def nearest(text: str, anchor: str) -> str:
    """The lines of `text` nearest to `anchor` (as many as it has), where they are and how they differ; said of a
    stale anchor, so its fix is a copy away."""
    want = anchor.strip("\n")
    size = want.count("\n") + 1
    rows = text.split("\n")
    best, best_ratio, best_line = "", 0.0, 0
    for start in range(max(1, len(rows) - size + 1)):
        window = "\n".join(rows[start : start + size])
        matcher = difflib.SequenceMatcher(None, want.strip(), window.strip(), autojunk=False)
        if matcher.real_quick_ratio() <= best_ratio or matcher.quick_ratio() <= best_ratio:
            continue
        if (ratio := matcher.ratio()) > best_ratio:
            best, best_ratio, best_line = window, ratio, start + 1
    if best_ratio < 0.5:
        return "no line of the file is near it"
    shown = best.strip() if size == 1 else best
    return f"nearest: line {best_line}: {shown!r} ({_how(best.strip(), want.strip())})"


def unified_diff(file: str, original: str, mutated: str) -> str:
    lines = difflib.unified_diff(
        original.splitlines(keepends=True), mutated.splitlines(keepends=True), f"a/{file}", f"b/{file}"
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


class _MutantLoader(importlib.abc.Loader):
    """Compiles the mutated text directly, so no stale bytecode of the original can be picked up."""

    def __init__(self, origin: str, source: str, finder: MutantFinder) -> None:
        self.origin, self.source, self.finder = origin, source, finder

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        code = compile(self.source, self.origin, "exec", dont_inherit=True)
        self.finder.loaded.add(self.origin)
        exec(code, module.__dict__)

    def get_source(self, fullname: str) -> str:
        return self.source  # tracebacks and inspect show the mutant, not the file on disk


class MutantFinder(importlib.abc.MetaPathFinder):
    """Resolves the project's packages inside the private copy only, serving mutated files' text.

    It claims every import under `package_names`, so an editable install's finder can never hand
    a child the user's working tree instead of the private copy.
    """

    def __init__(self, roots: Sequence[Path], package_names: Sequence[str], overrides: dict[str, str]) -> None:
        self.roots = [str(root) for root in roots]  # the private copy's import paths (flat, src/, several)
        self.package_names = frozenset(package_names)
        self.overrides = {str(Path(path).resolve()): text for path, text in overrides.items()}
        self.loaded: set[str] = set()

    def adopt(self, module: ModuleType, origin: str, source: str) -> None:
        """`module`, imported before `source` was to be served for it (a warm worker's), says from now on what a
        module this hook served says: the hook's loader and spec, and it counts as loaded."""
        loader = _MutantLoader(origin, source, self)
        old = module.__spec__
        search = old.submodule_search_locations if old is not None else None
        module.__spec__ = importlib.util.spec_from_file_location(
            module.__name__, origin, loader=loader, submodule_search_locations=search
        )
        module.__loader__ = loader
        self.loaded.add(origin)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.partition(".")[0] not in self.package_names:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, list(path) if path else self.roots)
        if spec is None:
            raise ModuleNotFoundError(f"No module named {fullname!r} in {', '.join(self.roots)}", name=fullname)
        origin = str(Path(spec.origin).resolve()) if spec.origin else ""
        if origin not in self.overrides:
            return spec
        loader = _MutantLoader(origin, self.overrides[origin], self)
        return importlib.util.spec_from_file_location(
            fullname, origin, loader=loader, submodule_search_locations=spec.submodule_search_locations
        )
