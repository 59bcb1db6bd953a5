"""Python source text parsed with a way back from a syntax node to its characters: what the scanner reads a
file through and what a template reads an anchor through (a few lines, a block header, or the arguments on a
continuation line such as `position_ids=positions,`).

Knows source text and `ast`; nothing of files on disk, bug classes or the mutation record.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

__all__ = ["Source", "SourceError", "parse_anchor", "parse_file"]

# Nodes that bind tighter than any operator written around them: their text needs no parentheses.
_TIGHT = (ast.Name, ast.Attribute, ast.Subscript, ast.Call, ast.Constant)


class SourceError(ValueError):
    """The text does not parse as Python statements, a block header or call arguments."""


@dataclass(frozen=True, slots=True)
class Source:
    """Text parsed as Python. `lines_before`: lines parsed ahead of the text (an `if True:` that lets an indented
    anchor parse, or the `_(` that lets a continuation line of arguments parse)."""

    text: str
    tree: ast.Module
    line_starts: tuple[int, ...]
    lines_before: int = 0
    is_arguments: bool = False  # parsed as the arguments of a call: `a=b,` is a keyword, not a tuple assignment

    def offset(self, line: int, column: int) -> int:
        """The character offset of an ast (line, column); ast columns count UTF-8 bytes."""
        start = self.line_starts[line - 1 - self.lines_before]
        row = self.text[start:].split("\n", 1)[0]
        return start + len(row.encode()[:column].decode())

    def span(self, node: ast.AST) -> tuple[int, int]:
        end_line, end_col = getattr(node, "end_lineno", None), getattr(node, "end_col_offset", None)
        assert end_line is not None and end_col is not None
        return self.offset(node.lineno, node.col_offset), self.offset(end_line, end_col)  # type: ignore[attr-defined]

    def line(self, node: ast.AST) -> int:
        """The node's first line, counted in the text (1-based)."""
        return int(node.lineno) - self.lines_before  # type: ignore[attr-defined]

    def end_line(self, node: ast.AST) -> int:
        return int(node.end_lineno) - self.lines_before  # type: ignore[attr-defined]

    def source(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.text[start:end]

    def atom(self, node: ast.AST) -> str:
        """The node's text, parenthesised unless it binds tighter than any operator around it."""
        text = self.source(node)
        return text if isinstance(node, _TIGHT) else f"({text})"

    def replace(self, node: ast.AST, text: str) -> str:
        start, end = self.span(node)
        return self.text[:start] + text + self.text[end:]

    def nodes(self, kind: type | tuple[type, ...]) -> list:
        return [n for n in ast.walk(self.tree) if isinstance(n, kind)]


def _starts(text: str) -> tuple[int, ...]:
    starts, total = [], 0
    for line in text.split("\n"):
        starts.append(total)
        total += len(line) + 1
    return tuple(starts)


def parse_file(text: str, filename: str = "<source>") -> Source:
    """A whole module; a SyntaxError propagates (the caller says which file)."""
    return Source(text, ast.parse(text, filename=filename), _starts(text))


def parse_anchor(anchor: str) -> Source:
    """An anchor copied from a file: whole statements, a block header (`if d != t:`), either with or without the
    first line's indentation, or a continuation line of call arguments (it ends with a comma)."""
    if not isinstance(anchor, str) or not anchor.strip():
        raise SourceError("the anchor must be non-empty code")
    lead = anchor[: len(anchor) - len(anchor.lstrip(" \t"))]
    wraps = [("", ""), ("", f"\n{lead}    pass"), ("if True:\n", ""), ("if True:\n", f"\n{lead}    pass")]
    # `position_ids=positions,` parses as a statement too (a one-tuple assignment): a line that ends with a comma
    # sits inside brackets, so its arguments' reading comes first.
    arguments = ("_(\n", "\n)")
    ordered = [arguments, *wraps] if anchor.split("#")[0].rstrip().endswith(",") else [*wraps, arguments]
    for before, after in ordered:
        try:
            tree = ast.parse(before + anchor + after)
        except SyntaxError:
            continue
        return Source(anchor, tree, _starts(anchor), before.count("\n"), (before, after) == arguments)
    raise SourceError(
        f"the anchor {anchor!r} does not parse as Python statements, a block header or call arguments; "
        "copy whole lines from the file"
    )
