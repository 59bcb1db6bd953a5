"""Bug-class templates: a user names a file and an anchor in their engine, a template derives the replacement
and returns a `Mutation` ready to register.

    from verify import templates
    from verify.mutation import register

    register(templates.ratio_inverted(file="myengine/accept.py", anchor="ratio = p[i, x] / q[i, x]"))

Each template reads the anchor as Python (whole statements, or a block header such as `if x:`), finds the one
construct its bug class changes and rewrites only that span, so the rest of the anchor keeps its spelling. An
anchor without that construct, or with more than one, is a `TemplateError` that names the template and what
it looks for. `TEMPLATES` lists them with the gate kit check (verify.gatekit) that kills each.
Knows source text and the mutation record; nothing of files on disk or of how a mutation is applied.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from verify.mutation import Mutation, MutationError

__all__ = [
    "TEMPLATES",
    "Template",
    "TemplateError",
    "acceptance_past_first_mismatch",
    "bonus_off_by_one",
    "cache_crop_off_by_one",
    "cache_write_shifted",
    "position_offset",
    "ratio_inverted",
    "residual_not_subtracting_draft",
]


class TemplateError(MutationError):
    """The anchor does not fit the template: it lacks the construct the template rewrites, or has several."""


@dataclass(frozen=True, slots=True)
class _Anchor:
    """An anchor parsed as Python, with a way back from a node to its characters."""

    text: str
    tree: ast.Module
    line_starts: tuple[int, ...]
    lines_before: int  # lines parsed ahead of the anchor (an `if True:` that makes an indented anchor parse)

    def span(self, node: ast.expr) -> tuple[int, int]:
        def offset(line: int, column: int) -> int:  # ast columns count UTF-8 bytes
            start = self.line_starts[line - 1 - self.lines_before]
            row = self.text[start:].split("\n", 1)[0]
            return start + len(row.encode()[:column].decode())

        assert node.end_lineno is not None and node.end_col_offset is not None
        return offset(node.lineno, node.col_offset), offset(node.end_lineno, node.end_col_offset)

    def source(self, node: ast.expr) -> str:
        start, end = self.span(node)
        return self.text[start:end]

    def atom(self, node: ast.expr) -> str:
        """The node's text, parenthesised unless it binds tighter than any operator around it."""
        text = self.source(node)
        tight = (ast.Name, ast.Attribute, ast.Subscript, ast.Call, ast.Constant)
        return text if isinstance(node, tight) else f"({text})"

    def replace(self, node: ast.expr, text: str) -> str:
        start, end = self.span(node)
        return self.text[:start] + text + self.text[end:]

    def nodes(self, kind: type | tuple[type, ...]) -> list:
        return [n for n in ast.walk(self.tree) if isinstance(n, kind)]


def _parse(template: str, anchor: str) -> _Anchor:
    if not isinstance(anchor, str) or not anchor.strip():
        raise TemplateError(f"template {template}: the anchor must be non-empty code")
    lead = anchor[: len(anchor) - len(anchor.lstrip(" \t"))]
    starts, total = [], 0
    for line in anchor.split("\n"):
        starts.append(total)
        total += len(line) + 1
    # Whole statements, or a block header (`if d != t:`), copied with or without the first line's indentation.
    for before, after in (("", ""), ("", f"\n{lead}    pass"), ("if True:\n", ""), ("if True:\n", f"\n{lead}    pass")):
        try:
            tree = ast.parse(before + anchor + after)
        except SyntaxError:
            continue
        return _Anchor(anchor, tree, tuple(starts), before.count("\n"))
    raise TemplateError(
        f"template {template}: the anchor {anchor!r} does not parse as Python statements or a block header; "
        "copy whole lines from the file"
    )


def _one(template: str, found: list, what: str, anchor: str) -> Any:  # the one node found, of the kind asked
    if len(found) != 1:
        count = "no" if not found else str(len(found))
        raise TemplateError(f"template {template}: the anchor {anchor!r} has {count} {what}; it needs exactly one")
    return found[0]


def _binop(op: type) -> Callable[[ast.AST], bool]:
    return lambda node: isinstance(node, ast.BinOp) and isinstance(node.op, op)


def _inverted_ratio(a: _Anchor) -> str:
    node = _one("ratio_inverted", [n for n in a.nodes(ast.BinOp) if _binop(ast.Div)(n)], "divisions (a / b)", a.text)
    return a.replace(node, f"{a.atom(node.right)} / {a.atom(node.left)}")


def _residual_without_draft(a: _Anchor) -> str:
    found = [n for n in a.nodes(ast.BinOp) if _binop(ast.Sub)(n)]
    node = _one("residual_not_subtracting_draft", found, "subtractions (p - q)", a.text)
    return a.replace(node, a.atom(node.left))


def _minus_one(a: _Anchor, node: ast.expr) -> str:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return str(node.value - 1)
    return f"{a.atom(node)} - 1"


def _plus_one(a: _Anchor, node: ast.expr | None) -> str:
    if node is None:
        return "1"
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return str(node.value + 1)
    return f"{a.atom(node)} + 1"


def _bonus_row(a: _Anchor) -> str:
    found = [n for n in a.nodes(ast.Subscript) if not isinstance(n.slice, ast.Slice | ast.Tuple)]
    # `p.shape[1]` reads a size, not a row: a bonus line often samples from `p.shape[-1]` tokens.
    found = [n for n in found if not (isinstance(n.value, ast.Attribute) and n.value.attr == "shape")]
    node = _one("bonus_off_by_one", found, "single-index subscripts (p[n])", a.text)
    return a.replace(node.slice, _minus_one(a, node.slice))


def _position_offset(a: _Anchor) -> str:
    found = [n for n in a.nodes(ast.Assign) if len(n.targets) == 1]
    node = _one("position_offset", found, "assignments (positions = ...)", a.text)
    return a.replace(node.value, f"{a.atom(node.value)} + 1")


_CROPS = ("crop", "truncate", "trim", "resize")


def _cache_crop(a: _Anchor) -> str:
    def is_crop(call: ast.Call) -> bool:
        called = getattr(call.func, "attr", None) or getattr(call.func, "id", None) or ""
        return bool(call.args) and any(word in called for word in _CROPS)

    calls = [n for n in a.nodes(ast.Call) if is_crop(n)]
    if calls:
        node = _one("cache_crop_off_by_one", calls, "crop calls (cache.crop(n))", a.text)
        return a.replace(node.args[0], _plus_one(a, node.args[0]))
    slices = [n for n in a.nodes(ast.Slice) if n.upper is not None]
    node = _one("cache_crop_off_by_one", slices, "crop calls (cache.crop(n)) or slices with an end (k[:n])", a.text)
    return a.replace(node.upper, _plus_one(a, node.upper))


def _cache_write(a: _Anchor) -> str:
    found = [n for n in a.nodes(ast.Assign) if len(n.targets) == 1 and isinstance(n.targets[0], ast.Subscript)]
    node = _one("cache_write_shifted", found, "subscript writes (cache[a:b] = kv)", a.text).targets[0]
    where = node.slice
    if isinstance(where, ast.Slice):
        if where.step is not None:
            raise TemplateError(f"template cache_write_shifted: the write in {a.text!r} has a step; write it by hand")
        parts = [where.lower, where.upper]
        shifted = [_plus_one(a, part) if part is not None else "1" for part in parts]
        if where.upper is None:
            shifted[1] = ""
        return a.replace(where, f"{shifted[0]}:{shifted[1]}")
    if isinstance(where, ast.Tuple) and where.elts and isinstance(where.elts[-1], ast.Slice):
        raise TemplateError(
            f"template cache_write_shifted: {a.text!r} writes a multi-axis slice; anchor a write whose index is "
            "one slice or one position (cache[start:end] = kv)"
        )
    return a.replace(where, _plus_one(a, where))


def _past_mismatch(a: _Anchor) -> str:
    def is_cumprod(call: ast.Call) -> bool:
        return "cumprod" in (getattr(call.func, "attr", None), getattr(call.func, "id", None))

    products = [n for n in a.nodes(ast.Call) if is_cumprod(n)]
    if products:
        node = _one("acceptance_past_first_mismatch", products, "cumprod calls", a.text)
        func = node.func
        is_method = isinstance(func, ast.Attribute) and not (
            isinstance(func.value, ast.Name) and func.value.id in ("torch", "np", "numpy")
        )  # match.cumprod(1), not torch.cumprod(match, 1)
        inner = func.value if isinstance(func, ast.Attribute) and is_method else node.args[0]
        return a.replace(node, a.atom(inner))
    breaks = a.nodes(ast.Break)
    node = _one(
        "acceptance_past_first_mismatch", breaks, "cumprod calls (match.cumprod(...)) or `break` statements", a.text
    )
    start, end = a.span(node)
    return a.text[:start] + "continue" + a.text[end:]


@dataclass(frozen=True, slots=True)
class Template:
    """One bug class: how it rewrites an anchor, an anchor it fits, and the gate kit check that kills it."""

    name: str  # kebab-case: the default mutation name
    bug_class: str
    killed_by: str  # the verify.gatekit check that sees it
    rewrite: Callable[[_Anchor], str]
    example_anchor: str
    example_replacement: str

    def __call__(
        self, file: str, anchor: str, *, name: str | None = None, expect_killed_by: tuple[str, ...] = ()
    ) -> Mutation:
        replacement = self.rewrite(_parse(self.name.replace("-", "_"), anchor))
        return Mutation(
            name=name or self.name,
            bug_class=self.bug_class,
            file=file,
            anchor=anchor,
            replacement=replacement,
            expect_killed_by=tuple(expect_killed_by),
        )


TEMPLATES: dict[str, Template] = {}


def _template(*args: object) -> Template:
    made = Template(*args)  # type: ignore[arg-type]
    TEMPLATES[made.name] = made
    return made


residual_not_subtracting_draft = _template(
    "residual-not-subtracting-draft",
    "After a rejection the token is resampled from p instead of norm(max(p - q, 0)).",
    "assert_acceptance_rule_exact",
    _residual_without_draft,
    "residual = (p[i] - q[i]).clamp(min=0)",
    "residual = (p[i]).clamp(min=0)",
)
ratio_inverted = _template(
    "ratio-inverted",
    "The acceptance ratio is q/p instead of p/q: drafts the target dislikes are kept.",
    "assert_acceptance_rule_exact",
    _inverted_ratio,
    "ratio = p[i, x] / q[i, x]",
    "ratio = q[i, x] / p[i, x]",
)
bonus_off_by_one = _template(
    "bonus-off-by-one",
    "When every drafted token is accepted, the bonus token is drawn from the row before the last.",
    "assert_acceptance_rule_exact",
    _bonus_row,
    "return n, sample(p[n], generator)",
    "return n, sample(p[n - 1], generator)",
)
position_offset = _template(
    "position-offset",
    "Position ids start one past where they should: every token is encoded as if it came one later.",
    "assert_batch_equals_solo or assert_speculative_equals_plain, whichever compares the offset path with one "
    "that is right (an offset every path shares needs a reference logits check)",
    _position_offset,
    "positions = torch.arange(start, start + length)",
    "positions = torch.arange(start, start + length) + 1",
)
cache_crop_off_by_one = _template(
    "cache-crop-off-by-one",
    "After a rejection the KV cache keeps one entry too many: the first rejected token's keys and values.",
    "assert_speculative_equals_plain",
    _cache_crop,
    "cache.crop(num_committed)",
    "cache.crop(num_committed + 1)",
)
cache_write_shifted = _template(
    "cache-write-shifted",
    "New keys and values are written one slot late: a slot is left stale and the next write overwrites.",
    "assert_speculative_equals_plain or assert_batch_equals_solo, whichever compares a cached path with an "
    "uncached one",
    _cache_write,
    "self.keys[start:end] = keys",
    "self.keys[start + 1:end + 1] = keys",
)
acceptance_past_first_mismatch = _template(
    "acceptance-past-first-mismatch",
    "Acceptance counts every matching drafted token, not the prefix before the first mismatch.",
    "assert_speculative_equals_plain (greedy); assert_acceptance_rule_exact (sampled)",
    _past_mismatch,
    "return match.cumprod(dim=1).sum(dim=1)",
    "return match.sum(dim=1)",
)
