"""Where a project's modules live: which import name a source file has from the import paths, and whether an
import name resolves inside the project at all.

Pure paths and `importlib.util.find_spec` on top-level names (which imports nothing); knows nothing of
`[tool.dflash]`, pytest or forking. `verify.config.settings` uses it to refuse a catalog or a layout that would
otherwise turn into silent survivals.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Protocol

__all__ = [
    "imported_names",
    "is_project_file",
    "module_name",
    "mutation_file_problem",
    "namespace_root_problem",
    "resolves_inside",
]


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


class _Layout(Protocol):
    """What the mutation-file check reads of a project's settings (a ProjectConfig)."""

    @property
    def root(self) -> Path: ...
    @property
    def source_roots(self) -> tuple[str, ...]: ...
    @property
    def import_paths(self) -> tuple[str, ...]: ...
    @property
    def source_packages(self) -> tuple[str, ...]: ...


def namespace_root_problem(root: Path, gates: Sequence[str], source_roots: Sequence[str]) -> str | None:
    """A source root folder without __init__.py is a folder of import roots (`src`); if the gates import it by
    its own name, it is a namespace package and its modules would be imported past the import hook."""
    gate_files = [f for rel in gates for f in ([root / rel] if rel.endswith(".py") else
                  sorted((root / rel).rglob("*.py")))]  # fmt: skip
    imported = imported_names(gate_files)
    for rel in source_roots:
        path = root / rel
        if path.is_dir() and not (path / "__init__.py").is_file() and path.name in imported:
            return (
                f"[tool.dflash] source_roots names {rel!r}, a folder without __init__.py that the gates import as "
                f"`{path.name}`: add {rel}/__init__.py, or name the folder that holds it "
                f"(source_roots = [{str(Path(rel).parent.as_posix())!r}] with the package alone in it)"
            )
    return None


def mutation_file_problem(layout: _Layout, name: str, file: str) -> str | None:
    """Why mutation `name`'s `file` could never reach a gate (outside the source roots, or not importable from
    them under a name they serve), or None. A missing file is left to the run, which reports it stale."""
    path, packages, roots = PurePosixPath(file), set(layout.source_packages), ", ".join(layout.source_roots)
    if not any(path == PurePosixPath(r) or path.is_relative_to(PurePosixPath(r)) for r in layout.source_roots):
        return (
            f"mutation {name!r} mutates {file}, outside [tool.dflash] source_roots ({roots}): "
            "only files under the source roots are copied and served to the gates"
        )
    if not (layout.root / file).is_file():
        return None
    imported_as = module_name(file, layout.root, layout.import_paths)
    if imported_as is None or imported_as.partition(".")[0] not in packages:
        return (
            f"mutation {name!r}: {file} does not import from the source roots ({roots}) as a "
            f"module of {', '.join(sorted(packages)) or 'any package'}: name the folder that holds your "
            "top-level packages (`src` in a src/ layout) or the package itself in source_roots"
        )
    return None
