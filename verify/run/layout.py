"""Where a project's modules live: which import name a source file has from the import paths, and whether an
import name resolves inside the project at all.

Pure paths and `importlib.util.find_spec` on top-level names (which imports nothing); knows nothing of
`[tool.dflash]`, pytest or forking. `verify.run.settings` uses it to refuse a catalog or a layout that would
otherwise turn into silent survivals.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

__all__ = ["imported_names", "is_project_file", "module_name", "resolves_inside"]


def is_project_file(path: Path, root: Path) -> bool:
    """A file of the user's tree: under `root` and not under the running interpreter's prefix (a virtualenv
    inside the project folder holds installed packages, not the project's code)."""
    path = path.resolve()
    return path.is_relative_to(root.resolve()) and not path.is_relative_to(Path(sys.prefix).resolve())


def resolves_inside(name: str, root: Path, search: Sequence[str]) -> tuple[bool, str]:
    """(whether the top-level package of `name` is found inside `root` with `search` first on sys.path, where
    it was found). Only the top-level name is looked up, so nothing is imported: `torch` or `json` named as a
    catalog is refused before it can be imported into the parent that forks every child."""
    top = name.partition(".")[0]
    if not top.isidentifier():
        return False, "not a module name"
    saved = list(sys.path)
    sys.path[:0] = list(search)
    loaded = sys.modules.pop(top, None)  # find_spec trusts sys.modules; look at what the search paths give
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError) as error:
        return False, str(error)
    finally:
        sys.path[:] = saved
        if loaded is not None:
            sys.modules[top] = loaded
    if spec is None:
        return False, "not found"
    places = [spec.origin] if spec.origin and spec.origin not in ("built-in", "frozen") else []
    places += list(spec.submodule_search_locations or [])
    if not places:
        return False, f"{spec.origin or 'built-in'} module"
    where = places[0]
    return all(is_project_file(Path(p), root) for p in places), where


def module_name(file: str, root: Path, import_paths: Sequence[str]) -> str | None:
    """The dotted name `file` (posix, relative to root) imports as from the deepest import path that holds it
    (`src/pkg/a.py` is `pkg.a` when `src` is an import path, even though the root is one too), or None when
    no import path does. A folder between them without `__init__.py` counts as a namespace package."""
    parts = PurePosixPath(file).with_suffix("").parts
    for rel in sorted(import_paths, key=lambda r: -len(PurePosixPath(r).parts) if r not in ("", ".") else 0):
        base = PurePosixPath(rel).parts if rel not in ("", ".") else ()
        if parts[: len(base)] != base or len(parts) == len(base):
            continue
        names = list(parts[len(base) :])
        if names[-1] == "__init__":
            names.pop()
        if names and all(n.isidentifier() for n in names):
            return ".".join(names)
    return None


def imported_names(files: Sequence[Path]) -> set[str]:
    """Top-level names the given Python files import absolutely (`import a.b`, `from a import b` give `a`)."""
    names: set[str] = set()
    for file in files:
        try:
            tree = ast.parse(file.read_text())
        except (OSError, SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name.partition(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.partition(".")[0])
    return names
