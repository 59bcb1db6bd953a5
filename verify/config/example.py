"""Where `dflash init`'s example mutation goes and what it does there: a one-line `return <value>` in the
project's source made to return a wrong value of the kind the code shows (`Change`), chosen from the text and
`ast` of the files it is handed. Knows nothing of layouts, configuration or the tree's folders
(`verify.config.scaffold` walks them and writes what is chosen here).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from verify.compat import StrEnum

__all__ = ["Change", "Example", "find_example"]


class Change(StrEnum):
    """How the example mutation breaks its function's result. A wrong value of the kind the code shows (a number,
    a truth value) goes on through the callers to a gate's assertion: killed. None fails in the first caller that
    computes with it (a TypeError, an AttributeError: crashed), so it is the last resort."""

    NEGATED = "negated"  # a number or an array: -value
    INVERTED = "inverted"  # a truth value: not value
    NONE = "none"  # a value of no kind the code shows


@dataclass(frozen=True, slots=True)
class Example:
    """The example mutation: `anchor` in `path` (a line of `function`) becomes `replacement`."""

    path: Path
    function: str
    anchor: str
    replacement: str
    change: Change


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


# Operators whose result has its operands' type, negatable when that is a number or an array; calls that return a
# number or a truth value whatever their argument.
_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.MatMult, ast.USub, ast.UAdd)
_NUMBER_CALLS = {"int", "float", "len", "abs", "round", "sum"}
_TRUTH_CALLS = {"bool", "isinstance", "issubclass", "callable", "hasattr", "all", "any"}
_NOT_NUMBERS = {"str", "bytes", "list", "tuple", "dict", "set", "frozenset", "none"}


def _leaves(node: ast.expr) -> list[ast.expr]:
    """The operands of a chain of arithmetic: [a, b, c] for a * b + c."""
    if isinstance(node, ast.BinOp):
        return [*_leaves(node.left), *_leaves(node.right)]
    return _leaves(node.operand) if isinstance(node, ast.UnaryOp) else [node]


def _is_sequence_literal(node: ast.expr) -> bool:
    """A string or sequence written out, as in `"a" + b` or `[0] * n`: arithmetic on it is not on numbers."""
    literals = ast.JoinedStr | ast.List | ast.Tuple | ast.ListComp | ast.Dict | ast.Set
    return isinstance(node, literals) or (isinstance(node, ast.Constant) and isinstance(node.value, str | bytes))


def _annotated_change(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Change | None:
    """The kind the return annotation says (`-> int`, `-> bool`; Change.NONE for a string or a container), or
    None where it says nothing of one (no annotation, a tensor, a class of the project's)."""
    head = function.returns.value if isinstance(function.returns, ast.Subscript) else function.returns
    named = head.id if isinstance(head, ast.Name) else getattr(head, "attr", "")
    named = named or (str(head.value) if isinstance(head, ast.Constant) else "")  # `-> "int"`
    if named in ("int", "float"):
        return Change.NEGATED
    if named == "bool":
        return Change.INVERTED
    return Change.NONE if named.lower() in _NOT_NUMBERS else None


def _change_for(function: ast.FunctionDef | ast.AsyncFunctionDef, value: ast.expr) -> Change:
    """The kind of the returned `value` as the code shows it: the annotation first, else the expression's shape.
    A shape is given a kind only when it cannot be a string or a sequence (negation raises on them) nor an
    elementwise comparison of arrays (`not` raises on one): `a < b` has none, `a in b` is a truth value."""
    annotated = _annotated_change(function)
    if isinstance(value, ast.Constant):  # -0 is 0: a constant negated may be the same value
        return Change.INVERTED if annotated is Change.INVERTED else Change.NONE
    if annotated is not None:
        return annotated
    called = _called_name(value)
    membership = (ast.In, ast.NotIn, ast.Is, ast.IsNot)
    if (
        (isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not))
        or (isinstance(value, ast.Compare) and all(isinstance(op, membership) for op in value.ops))
        or called in _TRUTH_CALLS
    ):
        return Change.INVERTED
    arithmetic = isinstance(value, ast.BinOp | ast.UnaryOp) and isinstance(value.op, _ARITHMETIC)
    if called in _NUMBER_CALLS or (arithmetic and not any(_is_sequence_literal(leaf) for leaf in _leaves(value))):
        return Change.NEGATED
    return Change.NONE


def _replacement(change: Change, expression: str, value: ast.expr) -> str:
    """`return -x`, `return -(x * k)`, `return not (a in b)`, `return None`: parenthesised unless atomic."""
    if change is Change.NONE:
        return "return None"
    atomic = isinstance(value, ast.Name | ast.Attribute | ast.Subscript | ast.Call | ast.Constant)
    operand = expression if atomic else f"({expression})"
    return f"return -{operand}" if change is Change.NEGATED else f"return not {operand}"


def _example_return(path: Path, avoid: set[str] | None, kinded: bool) -> tuple[str, str, str, Change] | None:
    """(function, anchor, replacement, change) for the first single-line `return <value>` whose text occurs
    exactly once in the file, or None. With `avoid`, a function named there (its result is taken apart) and a
    return of a tuple (`return a, b`: a result made to be taken apart) are passed over; with `kinded`, so is a
    value of no kind the code shows (its example would return None)."""
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
            change = _change_for(node, statement.value)
            if kinded and change is Change.NONE:
                continue
            anchor = lines[statement.lineno - 1].strip()
            expression = ast.get_source_segment(text, statement.value) or ""
            if anchor.startswith("return ") and expression and text.count(anchor) == 1:
                return node.name, anchor, _replacement(change, expression, statement.value), change
    return None


def find_example(candidates: list[Path], project_files: list[Path]) -> Example | None:
    """The example in the first of `candidates` (the source files, most likely first) that has a site, or None.
    `project_files` (source and tests) say whose results are taken apart."""
    # A function whose result nobody takes apart, returning a value of a kind the code shows, first; then one
    # whose result nobody takes apart; failing that, any (the example must exist to be replaced).
    avoid = _taken_apart(project_files)
    for avoided, kinded in ((avoid, True), (avoid, False), (None, False)):
        for path in candidates:
            found = _example_return(path, avoided, kinded)
            if found is not None:
                return Example(path, *found)
    return None
