"""Where `dflash init`'s example mutation goes: a one-line `return <value>` in the project's source, chosen
from the text and `ast` of the files it is handed. Knows nothing of layouts, configuration or the tree's
folders (`verify.config.scaffold` walks them and writes what is chosen here).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Example", "find_example"]


@dataclass(frozen=True, slots=True)
class Example:
    """The example mutation: `anchor` in `path` (a line of `function`) becomes `replacement`."""

    path: Path
    function: str
    anchor: str
    replacement: str


def _called_name(node: ast.AST) -> str:
    """`f` for f(...) and obj.f(...), through an `await`; "" for anything else."""
    node = node.value if isinstance(node, ast.Await) else node
    if not isinstance(node, ast.Call):
        return ""
    return node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")


def _taken_apart(files: list[Path]) -> set[str]:
    """The names of functions whose result some caller unpacks (`a, b = f(x)`) or iterates (`for x in f(x)`): an
    example that makes such a function return None would only crash its callers (a TypeError, reported crashed),
    never show a gate catching a wrong value."""
    names: set[str] = set()
    for path in files:
        try:
            tree = ast.parse(path.read_text(errors="replace"))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Tuple | ast.List) for t in node.targets):
                names.add(_called_name(node.value))
            elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
                names.add(_called_name(node.iter))
            elif isinstance(node, ast.Starred):
                names.add(_called_name(node.value))
    return names - {""}


def _example_return(path: Path, avoid: set[str] | None) -> tuple[str, str, str] | None:
    """(function, anchor, replacement) for the first single-line `return <value>` whose text occurs exactly once
    in the file, or None. With `avoid`, a function named there (its result is taken apart) and a return of a
    tuple (`return a, b`: a result made to be taken apart) are passed over."""
    text = path.read_text()
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    lines = text.splitlines()
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if avoid is not None and node.name in avoid:
            continue
        for statement in ast.walk(node):
            if not isinstance(statement, ast.Return) or statement.value is None:
                continue
            if isinstance(statement.value, ast.Constant) and statement.value.value is None:
                continue
            if avoid is not None and isinstance(statement.value, ast.Tuple):
                continue
            if statement.lineno != statement.end_lineno:
                continue
            anchor = lines[statement.lineno - 1].strip()
            if anchor.startswith("return ") and text.count(anchor) == 1:
                return node.name, anchor, "return None"
    return None


def find_example(candidates: list[Path], project_files: list[Path]) -> Example | None:
    """The example in the first of `candidates` (the source files, most likely first) that has a site, or None.
    `project_files` (source and tests) say whose results are taken apart."""
    # A function whose result nobody takes apart first; failing that, any (the example must exist to be replaced).
    avoid = _taken_apart(project_files)
    for avoided in (avoid, None):
        for path in candidates:
            found = _example_return(path, avoided)
            if found is not None:
                return Example(path, *found)
    return None
