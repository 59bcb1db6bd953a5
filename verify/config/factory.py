"""Whether a `module:function` factory named in `[tool.dflash]` (the observer) can be made in a private copy,
told from the files alone: importlib's path finders locate the module, `ast` reads what it binds.

Never imports it: loading it would load the engine, torch and all, into every command that reads the
configuration. The private copy holds the source roots and the gates only, so a module of the project
elsewhere is not there; an installed (or editable) package is found as the parent finds it. Knows nothing
of the settings record: `verify.config.settings` asks with plain values and raises its own error.
"""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["factory_problem"]


def _installed(top: str) -> bool:
    """`top` imports without the project's folders: already loaded, or found by the interpreter's own finders
    (an installed or editable package), the current directory left out as a child never runs there."""
    if top in sys.modules:
        return True
    here = {"", ".", os.getcwd()}
    paths = [p for p in sys.path if p not in here]
    if importlib.machinery.PathFinder.find_spec(top, paths) is not None:
        return True
    others = [f for f in sys.meta_path if f is not importlib.machinery.PathFinder and hasattr(f, "find_spec")]
    return any(finder.find_spec(top, None) is not None for finder in others)


_DATA = (ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.JoinedStr, ast.ListComp, ast.DictComp)


def _binding(file: Path, name: str) -> str:
    """How the module's text binds `name` at its top level: "callable" (a def, a class, an import or any
    other expression), "data" (a literal: never a factory) or "" (not at all). Unreadable text: "callable",
    so the import itself reports what is wrong, with its traceback."""
    try:
        tree = ast.parse(file.read_text())
    except (SyntaxError, UnicodeDecodeError, OSError):
        return "callable"
    found = ""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name == name:
            found = "callable"
        elif isinstance(node, ast.Import | ast.ImportFrom) and any(
            (alias.asname or alias.name.partition(".")[0]) == name for alias in node.names
        ):
            found = "callable"
        elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                found = "data" if isinstance(node.value, _DATA) else "callable"
    return found  # the last binding wins, as it does when the module runs


def factory_problem(root: Path, import_paths: Sequence[str], copied: Sequence[str], spec_text: str) -> str:
    """Why the factory `spec_text` cannot be made in a private copy holding `copied` (paths relative to `root`,
    `import_paths` on sys.path), or "" when it can."""
    module, _, function = spec_text.partition(":")
    parts = module.split(".")
    project = [str((root / rel).resolve()) for rel in import_paths]
    spec = importlib.machinery.PathFinder.find_spec(parts[0], project)
    inside_copy = [(root / rel).resolve() for rel in copied]
    fix = "move it under a source root, or name an installed module"
    where = ", ".join(copied)
    if spec is None or spec.origin is None and not spec.submodule_search_locations:
        if not _installed(parts[0]):
            return f"module {parts[0]!r} does not import: it is neither in the copied folders ({where}) nor installed"
        spec = importlib.util.find_spec(parts[0])  # a top-level name: found, not imported
    else:
        location = Path(spec.origin or next(iter(spec.submodule_search_locations or ()))).resolve()
        inside = any(location == c or location.is_relative_to(c) for c in inside_copy)
        if not inside and not _installed(parts[0]):
            rel = location.relative_to(root) if location.is_relative_to(root) else location
            return (
                f"{rel} is outside the copied folders ({where}), so the private copies that are observed lack it: {fix}"
            )
    for depth in range(1, len(parts)):
        locations = list(spec.submodule_search_locations or ()) if spec is not None else []
        if not locations:
            return ""  # a module that is not a package, or not found as files: importing it will tell
        spec = importlib.machinery.PathFinder.find_spec(".".join(parts[: depth + 1]), locations)
        if spec is None:
            return f"module {'.'.join(parts[: depth + 1])!r} does not exist: {fix}"
    if spec is not None and spec.origin and spec.origin.endswith(".py"):
        binding = _binding(Path(spec.origin), function)
        if not binding:
            return f"{module} defines no {function!r}: name the function that returns your observer"
        if binding == "data":
            return f"{module}.{function} is a value, not callable: name the function that returns your observer"
    return ""
