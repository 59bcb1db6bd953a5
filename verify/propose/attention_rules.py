"""Rules for attention's bug classes: position ids and `arange` offsets one off, cache crop and cache write slices
one off (multi-axis included), the attention mask (a causal flag forced, tril/triu's diagonal, a visibility
comparison's strictness).

As in `sampling_rules`, `scan` asks for the class's context (a name about positions, the cache, a mask), which a
template's anchor does not need. A `+ 1` that could only crash (a tuple plus one) and a slice end counted from the
back (`[:-k]`, where `+ 1` empties the slice at k = 1) are refused with the reason. So is a constant offset that
rotary embeddings cannot see: RoPE's attention scores depend on a query's position minus a key's, so one offset
added to every position the file's one rotary call rotates (queries and keys alike, the cached keys written by
that same call) cancels, as does one inside the rotary embedding's own code. Knows `ast`; nothing of files.
"""

from __future__ import annotations

import ast
import re

from verify.propose.edit import (
    BugClass,
    Edit,
    Found,
    Refusal,
    called,
    header_text,
    is_negative,
    name_parts,
    plus_one,
    refuse_plus_one,
)
from verify.propose.source import Source

__all__ = ["cache", "crop", "mask", "positions"]

Owners = dict[ast.AST, ast.stmt]
_POSITION_WORDS = {"position", "positions"}
_OFFSET_WORDS = {"offset", "offsets"}
# A name about positions that holds a bound or a count, not position ids: max_position_embeddings, num_positions.
# One past such a limit moves only where a request is refused, not where a token is encoded.
_LIMIT_WORDS = {"max", "min", "num", "embeddings", "limit", "size", "count"}
_CACHE_WORDS = {"cache", "kv", "past", "pending", "store", "keys", "values", "k_cache", "v_cache", "crop"}
_MASK_WORDS = {"mask", "masks", "valid", "visible", "allowed", "causal", "attend"}
_CROPS = ("crop", "truncate", "trim")
_ROTARY_WORDS = {"rotary", "rope"}
_SHIFT_INVARIANT = (
    "the positions feed the file's one rotary embedding call, which rotates queries and keys alike (and the keys "
    "it caches): RoPE's scores see only a query's position minus a key's, so a constant offset cancels"
)
_INSIDE_ROTARY = (
    "inside the rotary embedding's own code an offset moves every angle it computes alike, for queries and keys: "
    "RoPE's scores see only position differences, so a constant offset cancels"
)


def _words(name: str) -> set[str]:
    """name_parts with CamelCase split too: RotaryEmbedding gives rotary, embedding; PagedKVCache paged, kv, cache."""
    return name_parts(re.sub(r"([a-z0-9])([A-Z])|([A-Z])([A-Z][a-z])", r"\1\3_\2\4", name))


def _is_positions(node: ast.AST) -> bool:
    last = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return bool(name_parts(last) & _POSITION_WORDS and not name_parts(last) & _LIMIT_WORDS)


_OVERFLOW = (
    "the positions span [0, n) and n sizes a cache allocated in the same function: one past the end can only index "
    "out of its bounds"
)


def _arange_root(node: ast.AST) -> ast.Call | None:
    """The `arange` call a value is, through views of it (`arange(n).expand(r, n)`, `arange(n)[None]`); None for
    arithmetic on it (`arange(n) - pads` is not [0, n) any more)."""
    while True:
        if isinstance(node, ast.Call) and called(node) == "arange":
            return node
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            node = node.func.value
        elif isinstance(node, ast.Subscript):
            node = node.value
        else:
            return None


def _overflowing(src: Source) -> set[int]:
    """The ids of position values that fill a buffer allocated beside them exactly (`positions = arange(n)` next to
    `Cache(..., n, ...)`), and of the names they are read through: `+ 1` there is a crash, not a shifted encoding."""
    refused: set[int] = set()
    for function in src.nodes((ast.FunctionDef, ast.AsyncFunctionDef)):
        sizes = {
            src.source(arg)
            for call in ast.walk(function)
            if isinstance(call, ast.Call) and _words(called(call)) & _CACHE_WORDS
            for arg in call.args
        }
        names: set[str] = set()
        for node in ast.walk(function):
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
                continue
            call = _arange_root(node.value)
            if call is None or not call.args:
                continue
            start = call.args[0] if len(call.args) > 1 else None
            if start is not None and not (isinstance(start, ast.Constant) and start.value == 0):
                continue
            if src.source(call.args[1 if start is not None else 0]) in sizes:
                refused.add(id(node.value))
                names.add(node.targets[0].id)
        refused |= {
            id(n)
            for n in ast.walk(function)
            if isinstance(n, ast.Name) and n.id in names and isinstance(n.ctx, ast.Load)
        }
    return refused


def _rotary_calls(src: Source) -> list[ast.Call]:
    """Calls of a rotary embedding handed positions: rotary(positions, ...), self.rotary_emb(x, position_ids=p)."""
    return [
        call
        for call in src.nodes(ast.Call)
        if _words(called(call)) & _ROTARY_WORDS
        and (
            any(_is_positions(a) for a in call.args)
            or any(_words(k.arg or "") & _POSITION_WORDS for k in call.keywords)
        )
    ]


def _inside_rotary(src: Source) -> set[int]:
    """The ids of the nodes inside a class or function whose name says it is a rotary embedding."""
    inside: set[int] = set()
    for scope in src.nodes((ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        if _words(scope.name) & _ROTARY_WORDS:
            inside |= {id(n) for n in ast.walk(scope)}
    return inside


def _has_arange(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and called(n) == "arange" for n in ast.walk(node))


def _offset(src: Source, value: ast.AST, what: str) -> Found:
    why = refuse_plus_one(value)
    return (
        Refusal(BugClass.POSITIONS, value, why) if why else Edit(BugClass.POSITIONS, value, plus_one(src, value), what)
    )


def positions(src: Source, owners: Owners, scan: bool) -> list[Found]:
    found: list[Found] = []
    what = "Position ids start one past where they should: every token is encoded as if it came one later."
    inside = _inside_rotary(src) if scan else set()
    overflowing = _overflowing(src) if scan else set()
    rotary = _rotary_calls(src) if scan else []
    # The file's one rotary call: an offset on what it is handed cancels (see the module docstring).
    invariant = (
        {id(n) for n in [*rotary[0].args, *(k.value for k in rotary[0].keywords)]} if len(rotary) == 1 else set()
    )

    def offset(value: ast.AST) -> Found:
        if id(value) in inside:
            return Refusal(BugClass.POSITIONS, value, _INSIDE_ROTARY)
        if id(value) in invariant:
            return Refusal(BugClass.POSITIONS, value, _SHIFT_INVARIANT)
        if id(value) in overflowing:
            return Refusal(BugClass.POSITIONS, value, _OVERFLOW)
        return _offset(src, value, what)

    for node in src.nodes((ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if len(targets) != 1 or node.value is None or isinstance(targets[0], ast.Tuple):
            continue
        words = name_parts(src.source(targets[0]))
        if scan and not (words & _POSITION_WORDS or (words & _OFFSET_WORDS and _has_arange(node.value))):
            continue
        if scan and words & _LIMIT_WORDS:
            continue
        if isinstance(node.value, ast.Constant) and node.value.value is None:
            continue
        found.append(offset(node.value))
    for call in src.nodes(ast.Call):
        for keyword in call.keywords:  # f(position_ids=positions)
            words = name_parts(keyword.arg or "")
            if words & _POSITION_WORDS and not words & _LIMIT_WORDS and not _none(keyword.value):
                found.append(offset(keyword.value))
        if not scan or called(call).endswith("_like") or called(call) in ("len", "range", "enumerate", "zip"):
            continue  # full_like(positions, x) reads a shape
        for arg in call.args:  # rotary(positions, ...): a position tensor handed on
            if _is_positions(arg):
                found.append(offset(arg))
    return found


def _none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _bounded(part: ast.AST) -> bool:
    return isinstance(part, ast.Slice) and part.step is None and (part.lower is not None or part.upper is not None)


def _stores(statement: ast.stmt) -> bool:
    """The statement stores what it slices into an object's state (self.keys = ..., rows.pending[row] = ...): a crop
    that outlives the call, not a local read."""
    if not isinstance(statement, ast.Assign | ast.AnnAssign | ast.AugAssign):
        return False
    targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
    return all(isinstance(t, ast.Attribute | ast.Subscript) for t in targets)


def crop(src: Source, owners: Owners, scan: bool) -> list[Found]:
    """A crop keeps one entry too many: cache.crop(n) -> crop(n + 1); k[:, :n] -> k[:, :n + 1]."""
    found: list[Found] = []
    what = "After a rejection the cache keeps one entry too many: the first rejected token's keys and values."
    for call in src.nodes(ast.Call):
        if call.args and any(word in called(call).lower() for word in _CROPS):
            why = refuse_plus_one(call.args[0])
            found.append(
                Refusal(BugClass.CACHE, call, why)
                if why
                else Edit(BugClass.CACHE, call.args[0], plus_one(src, call.args[0]), what)
            )
    written = {id(t) for n in src.nodes(ast.Assign) for t in n.targets}
    for node in src.nodes(ast.Subscript):
        if id(node) in written:
            continue  # a write: cache_write's
        if scan:
            statement = owners.get(node)
            if statement is None or not name_parts(header_text(src, statement)) & _CACHE_WORDS:
                continue
            if not _stores(statement):
                continue  # keys = cache.keys[:length]: a read whose length other shapes share (+ 1 only crashes)
            if isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
                continue
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        for part in parts:
            if not isinstance(part, ast.Slice) or part.upper is None:
                continue
            if is_negative(part.upper):
                end = src.source(part.upper)
                why = f"the end {end} counts from the back: {end} + 1 keeps nothing when it is -1; "
                found.append(Refusal(BugClass.CACHE, part, why + "anchor a crop whose end counts from the front"))
                continue
            if scan and part.lower is not None and not isinstance(part.lower, ast.Constant):
                continue  # a window a:b read, not a crop
            found.append(Edit(BugClass.CACHE, part.upper, plus_one(src, part.upper), what))
    return found


def cache(src: Source, owners: Owners, scan: bool) -> list[Found]:
    """A write lands one slot late: cache[a:b] = kv -> cache[a + 1:b + 1]; cache[:, a:b] likewise on that axis."""
    found: list[Found] = []
    what = "New keys and values are written one slot late: a slot is left stale and the next write overwrites."
    for node in src.nodes(ast.Assign):
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Subscript):
            continue
        target = node.targets[0]
        if scan and not name_parts(src.source(target.value)) & _CACHE_WORDS:
            continue
        where = target.slice
        parts = where.elts if isinstance(where, ast.Tuple) else [where]
        bounded = [p for p in parts if _bounded(p)]
        if any(isinstance(p, ast.Slice) and p.step is not None for p in parts):
            found.append(Refusal(BugClass.CACHE, where, "the write has a step; write it by hand"))
            continue
        if bounded:
            part = bounded[-1]  # the sequence axis comes last among the bounded ones ([:, start:end])
            assert isinstance(part, ast.Slice)
            if any(b is not None and is_negative(b) for b in (part.lower, part.upper)):
                found.append(Refusal(BugClass.CACHE, part, "a bound counts from the back; shift it by hand"))
                continue
            lower, upper = plus_one(src, part.lower), plus_one(src, part.upper) if part.upper is not None else ""
            found.append(Edit(BugClass.CACHE, part, f"{lower}:{upper}", what))
        elif not isinstance(where, ast.Tuple):
            if (
                scan
                and isinstance(where, ast.Constant | ast.Name)
                and not name_parts(src.source(where))
                & {"pos", "position", "positions", "slot", "slots", "start", "length"}
            ):
                continue  # rows[dst] = ...: a row copy, not a slot
            why = refuse_plus_one(where)
            found.append(
                Refusal(BugClass.CACHE, where, why) if why else Edit(BugClass.CACHE, where, plus_one(src, where), what)
            )
    return found


_LENGTH_WORDS = {"len", "lens", "length", "lengths", "seq", "seqlens"}
_REDUNDANT_WITH_CAUSAL = (
    "the comparison is handed to a mask built with is_causal=True: causality already hides every key past its "
    "query, and a key at the boundary of a validity test is past every query, so its strictness cannot show"
)


def _beside_a_causal_flag(src: Source, value: ast.AST) -> set[int]:
    """The ids of comparisons against a length handed, as arguments, to a call that also says is_causal=True (a
    validity mask ANDed with the causal one: `mask(q_pos, k_pos, k_pos < lens, is_causal=True)`)."""
    ids: set[int] = set()
    for call in (n for n in ast.walk(value) if isinstance(n, ast.Call)):
        flag = next((k.value for k in call.keywords if k.arg == "is_causal"), None)
        if isinstance(flag, ast.Constant) and flag.value is True:
            ids |= {
                id(a)
                for a in [*call.args, *(k.value for k in call.keywords)]
                if isinstance(a, ast.Compare) and name_parts(src.source(a)) & _LENGTH_WORDS
            }
    return ids


def mask(src: Source, owners: Owners, scan: bool) -> list[Found]:
    found: list[Found] = []
    for call in src.nodes(ast.Call):
        for keyword in call.keywords:  # sdpa(..., is_causal=layer.is_causal): forced causal (or not)
            if keyword.arg and "causal" in keyword.arg:
                value = keyword.value
                forced = "False" if isinstance(value, ast.Constant) and value.value is True else "True"
                what = f"The attention's {keyword.arg} flag is forced to {forced}: the mask is wrong for its layers."
                found.append(Edit(BugClass.MASK, value, forced, what))
        if called(call) in ("tril", "triu"):  # the diagonal one off: one key more (tril) or fewer (triu) visible
            diagonal = [k.value for k in call.keywords if k.arg == "diagonal"] or call.args[1:2]
            what = f"{called(call)}'s diagonal is one off: each query sees one key more or fewer than it should."
            if diagonal:
                found.append(Edit(BugClass.MASK, diagonal[0], plus_one(src, diagonal[0]), what))
            elif call.args or call.keywords:
                found.append(Edit(BugClass.MASK, call, f"{src.source(call)[:-1]}, diagonal=1)", what))
            elif isinstance(call.func, ast.Attribute):  # x.tril()
                found.append(Edit(BugClass.MASK, call, f"{src.source(call)[:-1]}diagonal=1)", what))
    for node in src.nodes((ast.Assign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        words = name_parts(" ".join(src.source(t) for t in targets))
        if scan and not words & _MASK_WORDS:
            continue
        flag = (
            not isinstance(node.value, ast.Call)
            or "causal" in called(node.value)
            or called(node.value).startswith("is")
        )
        if words & {"causal"} and flag and not isinstance(node.value, ast.Compare):
            what = "The causal flag is inverted: causal layers attend ahead and non-causal ones do not."
            found.append(Edit(BugClass.MASK, node.value, f"not {src.atom(node.value)}", what))
            continue
        causal = _beside_a_causal_flag(src, node.value) if scan else set()
        for compare in [n for n in ast.walk(node.value) if isinstance(n, ast.Compare) and len(n.ops) == 1]:
            if id(compare) in causal:
                found.append(Refusal(BugClass.MASK, compare, _REDUNDANT_WITH_CAUSAL))
                continue
            flipped = {ast.Lt: "<=", ast.LtE: "<", ast.Gt: ">=", ast.GtE: ">"}.get(type(compare.ops[0]))
            if flipped:
                text = f"{src.source(compare.left)} {flipped} {src.source(compare.comparators[0])}"
                what = "The mask's comparison is one off: a key at the boundary is visible when it should not be."
                found.append(Edit(BugClass.MASK, compare, text, what))
    for node in src.nodes(ast.If):  # `if is_causal:` / `if layer.causal:`
        if isinstance(node.test, ast.Name | ast.Attribute) and "causal" in src.source(node.test):
            what = "The causal branch is taken for the wrong layers (the flag read inverted)."
            found.append(Edit(BugClass.MASK, node.test, f"not {src.source(node.test)}", what))
    return found
