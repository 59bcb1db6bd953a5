"""Runner source as a sweep sees it: the functions mutmut mutates, the decorated ones it skips, and one
mutant's change expressed against the original file (a unified diff and an anchor/replacement pair).

Pure text and `ast`; knows nothing of mutmut's process, its files or the registered catalog.
"""

from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass

from verify.sweep.result import DecoratedFunction

# mutmut 3 trampolines a function with no decorator or exactly one of these; every other decorated
# function is left unmutated (file_mutation.py, `_skip_node_and_children`).
_MUTATED_DECORATORS = frozenset({"staticmethod", "classmethod"})


@dataclass(frozen=True, slots=True)
class FunctionSpan:
    """A top-level function or a method of a top-level class: the places mutmut puts mutants."""

    function: str  # "func" or "Class.method"
    start: int  # first line, decorators included (1-based)
    def_line: int
    end: int
    decorators: tuple[str, ...]

    @property
    def is_skipped_by_mutmut(self) -> bool:
        return bool(self.decorators) and not (len(self.decorators) == 1 and self.decorators[0] in _MUTATED_DECORATORS)


def functions(source: str) -> tuple[FunctionSpan, ...]:
    def span(node: ast.FunctionDef | ast.AsyncFunctionDef, prefix: str) -> FunctionSpan:
        start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        decorators = tuple(ast.unparse(d) for d in node.decorator_list)
        return FunctionSpan(prefix + node.name, start, node.lineno, node.end_lineno or node.lineno, decorators)

    spans = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            spans.append(span(node, ""))
        elif isinstance(node, ast.ClassDef):
            for child in node.body:
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                    spans.append(span(child, f"{node.name}."))
    return tuple(spans)


def function_at(spans: tuple[FunctionSpan, ...], line: int) -> FunctionSpan | None:
    return next((span for span in spans if span.start <= line <= span.end), None)


def decorated(module: str, source: str) -> tuple[DecoratedFunction, ...]:
    return tuple(
        DecoratedFunction(module, span.function, span.decorators)
        for span in functions(source)
        if span.is_skipped_by_mutmut
    )


@dataclass(frozen=True, slots=True)
class Change:
    line: int
    diff: str
    original: str  # the changed lines alone, stripped
    mutated: str
    anchor: str  # the changed lines plus context, occurring exactly once in the file
    replacement: str


def change(module: str, source: str, function: str, orig_code: str, mutant_code: str) -> Change | None:
    """Place a mutant (mutmut renders the function dedented and on its own) back into `source`.

    Returns None when the function or the changed lines cannot be found in `source` any more.
    """
    span = next((s for s in functions(source) if s.function == function), None)
    if span is None:
        return None
    orig, mutant = orig_code.strip("\n").splitlines(), mutant_code.strip("\n").splitlines()
    opcodes = [
        op for op in difflib.SequenceMatcher(None, orig, mutant, autojunk=False).get_opcodes() if op[0] != "equal"
    ]
    if not opcodes:
        return None
    i1, i2, j1, j2 = opcodes[0][1], opcodes[-1][2], opcodes[0][3], opcodes[-1][4]
    lines = source.splitlines(keepends=True)
    def_index = next((i for i, text in enumerate(orig) if text.lstrip().startswith(("def ", "async def "))), 0)
    start = span.def_line - 1 - def_index  # file index of orig[0]
    if [text.strip() for text in lines[start + i1 : start + i2]] != [text.strip() for text in orig[i1:i2]]:
        return None
    def_text = lines[span.def_line - 1]
    indent = def_text[: len(def_text) - len(def_text.lstrip())]
    mutant_lines = [(indent + text if text.strip() else text) + "\n" for text in mutant[j1:j2]]
    mutated_lines = lines[: start + i1] + mutant_lines + lines[start + i2 :]
    diff = "".join(difflib.unified_diff(lines, mutated_lines, f"a/{module}", f"b/{module}", n=2))
    first, last, new_last = start + i1, start + i2, start + i1 + len(mutant_lines)
    anchor, replacement = "", ""
    grow_above = True
    while True:
        anchor = "".join(lines[first:last]).removesuffix("\n")
        replacement = "".join(mutated_lines[first:new_last]).removesuffix("\n")
        if anchor.strip() and source.count(anchor) == 1:
            break
        # Alternate context above and below until the anchor is unique (or the file runs out).
        if (grow_above or last >= len(lines)) and first > 0:
            first -= 1
        elif last < len(lines):
            last, new_last = last + 1, new_last + 1
        else:
            break
        grow_above = not grow_above
    return Change(
        line=start + i1 + 1,
        diff=diff,
        original="\n".join(text.strip() for text in orig[i1:i2]),
        mutated="\n".join(text.strip() for text in mutant[j1:j2]),
        anchor=anchor,
        replacement=replacement,
    )
