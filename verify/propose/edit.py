"""What a rule finds in a syntax tree: an `Edit` (one node's text and what it becomes) or a `Refusal` (a construct of
the bug class that no rewrite of it would make a correct mutant of, with the reason), and the small text helpers
the rules share. Knows `ast` and source text; nothing of files, imports or the mutation record.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from verify.compat import StrEnum
from verify.propose.source import Source

__all__ = [
    "BugClass",
    "Edit",
    "Found",
    "Refusal",
    "called",
    "header_text",
    "is_negative",
    "minus_one",
    "name_parts",
    "plus_one",
    "refuse_plus_one",
    "statement_of",
]


class BugClass(StrEnum):
    """The bug classes of speculative decoding the scanner looks for; each value is a proposal's name prefix."""

    RATIO = "ratio-inverted"
    RESIDUAL = "residual-wrong"
    ACCEPTANCE = "acceptance-past-rejection"
    BONUS = "bonus-off-by-one"
    POSITIONS = "position-offset"
    CACHE = "cache-slice-off-by-one"
    MASK = "mask-wrong"
    SOFTMAX = "softmax-wrong-dim"
    TEMPERATURE = "temperature-wrong"
    FILTERS = "filter-one-model-only"


@dataclass(frozen=True, slots=True)
class Edit:
    """Replace `node`'s text with `text`; `what` says the bug in a line (the proposal's bug_class)."""

    bug_class: BugClass
    node: ast.AST
    text: str
    what: str


@dataclass(frozen=True, slots=True)
class Refusal:
    """A construct of the class that the rule will not rewrite, and why (a mutant that could only crash, or one
    that would be a different bug than the class says)."""

    bug_class: BugClass
    node: ast.AST
    reason: str


Found = Edit | Refusal

# Literals and expressions `+ 1` cannot be added to without a crash or a different bug.
_NOT_NUMBERS = (ast.Tuple, ast.List, ast.Set, ast.Dict, ast.JoinedStr, ast.Compare, ast.BoolOp, ast.Lambda,
                ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Starred)  # fmt: skip


def refuse_plus_one(node: ast.AST) -> str:
    """Why `node + 1` could only crash or mean something else, or "" when it is a number's expression."""
    if isinstance(node, ast.Tuple):
        return "the value is a tuple: a tuple plus one can only crash"
    if isinstance(node, _NOT_NUMBERS):
        return f"the value is a {type(node).__name__.lower()}, not a number: adding one can only crash"
    if isinstance(node, ast.BinOp) and any(isinstance(side, _NOT_NUMBERS) for side in (node.left, node.right)):
        return "the value is built from a sequence literal ([None] * n), not a number: adding one can only crash"
    if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, str | bytes | bool)):
        return f"the value is {node.value!r}, not a number: adding one can only crash or change a flag"
    return ""


def plus_one(src: Source, node: ast.AST | None) -> str:
    if node is None:
        return "1"
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return str(node.value + 1)
    return f"{src.atom(node)} + 1"


def minus_one(src: Source, node: ast.AST) -> str:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return str(node.value - 1)
    return f"{src.atom(node)} - 1"


def name_parts(text: str) -> set[str]:
    """The lower-case words of the identifiers in `text`: `self.rows.pending_positions[row]` gives self, rows,
    pending, positions, row."""
    return {word for word in re.split(r"[^a-z0-9]+", text.lower()) if word}


def is_negative(node: ast.AST) -> bool:
    """`-k`, or a negative integer: a slice end counted from the back."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return True
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value < 0


def called(node: ast.Call) -> str:
    """The called name: `torch.cumprod` and `x.cumprod` give cumprod."""
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def statement_of(tree: ast.AST) -> dict[ast.AST, ast.stmt]:
    """Each node's innermost enclosing statement (a rule reads a statement's names for context)."""
    owner: dict[ast.AST, ast.stmt] = {}

    def visit(node: ast.AST, statement: ast.stmt | None) -> None:
        here = node if isinstance(node, ast.stmt) else statement
        if here is not None:
            owner[node] = here
        for child in ast.iter_child_nodes(node):
            visit(child, here)

    visit(tree, None)
    return owner


def header_text(src: Source, statement: ast.stmt) -> str:
    """A statement's own text: a simple statement whole, a compound one up to its body (`for ...:`, `if ...:`)."""
    body = getattr(statement, "body", None)
    if not body or not isinstance(body, list):
        return src.source(statement)
    first, last = src.line(statement), src.line(body[0]) - 1
    rows = src.text.split("\n")
    return "\n".join(rows[first - 1 : max(first, last)])
