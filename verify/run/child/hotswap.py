"""A mutant made live in a process that already imported the original module: its functions' code swapped in.

A warm worker (`verify.run.child.zygote`) imports the project and collects the gates once, with the original
code, and forks a child per mutant. That child must then behave exactly as a fresh import of the mutated text
would. `plan` says which live function objects take which new code object, or refuses, and the refusal sends the
mutant to a cold child (a fresh pytest run, `verify.run.child.job`). A plan is only made when these hold:
- the code that runs at import (the module's and every class body's) is the same, constants included, so a
  fresh import would build the same objects. Line numbers are ignored: a longer replacement moves every line
  after it.
- every function whose code differs never ran before the fork. Coverage of the worker's own start-up gives this:
  no line of the function's body ran, so nothing computed before the fork came from its old code. A function
  whose whole body sits on its `def` line cannot be told apart from its `def`, so it counts as run.
- each such function is reachable by its qualified name from the module (through staticmethod, classmethod,
  property and `__wrapped__`), and nothing but function objects holds its code (a created generator or frame
  would keep running the old code; a compiled form such as TorchScript's would never see the new one).
Everything else (a closure, a wrapper, a registry) holds the function object itself, so the swap reaches it.
Knows nothing of pytest, forking or verdicts.
"""

from __future__ import annotations

import gc
import inspect
import linecache
import types
from collections.abc import Collection
from dataclasses import dataclass

__all__ = ["Live", "Swap", "apply", "live_functions", "plan"]

_CO_NEWLOCALS = inspect.CO_NEWLOCALS  # set on functions, lambdas and comprehensions; unset on class bodies
# What makes two code objects the same program, line numbers and file name apart.
_FIELDS = (
    "co_code", "co_names", "co_varnames", "co_freevars", "co_cellvars", "co_argcount", "co_posonlyargcount",
    "co_kwonlyargcount", "co_flags", "co_name", "co_qualname", "co_exceptiontable", "co_nlocals", "co_stacksize",
)  # fmt: skip


# (qualified name, original code, mutated code, the lines of the code that defines it)
_Found = tuple[str, types.CodeType, types.CodeType, set[int]]


@dataclass(frozen=True, slots=True)
class Swap:
    """Every live function object built from one original code object, and the mutated code it takes."""

    qualname: str
    functions: tuple[types.FunctionType, ...]
    code: types.CodeType


def _same_constant(a: object, b: object) -> bool:
    if isinstance(a, types.CodeType) and isinstance(b, types.CodeType):
        return _same(a, b)
    if type(a) is not type(b):
        return False  # 1, 1.0 and True are equal, and different programs
    if isinstance(a, tuple | frozenset):
        items_a, items_b = sorted(a, key=repr), sorted(b, key=repr)  # type: ignore[call-overload]
        return len(items_a) == len(items_b) and all(map(_same_constant, items_a, items_b))
    return repr(a) == repr(b)  # -0.0 against 0.0 and NaN against itself, as the compiler keeps them


def _same_fields(a: types.CodeType, b: types.CodeType) -> bool:
    """The code's own program, its constants apart (a field this Python lacks counts as equal)."""
    return all(getattr(a, field, None) == getattr(b, field, None) for field in _FIELDS)


def _same(a: types.CodeType, b: types.CodeType) -> bool:
    if not _same_fields(a, b):
        return False
    return len(a.co_consts) == len(b.co_consts) and all(map(_same_constant, a.co_consts, b.co_consts))


def _changed(original: types.CodeType, mutated: types.CodeType, prefix: str, found: list[_Found]) -> str:
    """Walk code that runs at import; collect every function that differs. Returns why no swap can do, or ""."""
    where = prefix.rstrip(".") or "the module"
    if not _same_fields(original, mutated) or len(original.co_consts) != len(mutated.co_consts):
        return f"the code run at import differs ({where})"
    enclosing = {line for _, _, line in original.co_lines() if line is not None}
    for a, b in zip(original.co_consts, mutated.co_consts, strict=True):
        if isinstance(a, types.CodeType) and isinstance(b, types.CodeType) and a.co_flags & _CO_NEWLOCALS:
            if not _same(a, b):
                found.append((prefix + a.co_name, a, b, enclosing))
        elif isinstance(a, types.CodeType) and isinstance(b, types.CodeType):
            why = _changed(a, b, f"{prefix}{a.co_name}.", found)  # a class body: it runs at import too
            if why:
                return why
        elif not _same_constant(a, b):
            return f"a constant of the code run at import differs ({where})"
    return ""


def _lines(code: types.CodeType) -> set[int]:
    lines = {line for _, _, line in code.co_lines() if line is not None}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            lines |= _lines(const)
    return lines


@dataclass(frozen=True, slots=True)
class Live:
    """The function objects alive in this process whose code comes from one file, by (name, first line), and
    the code objects among theirs that something else holds too (a generator, a frame, a registry of code)."""

    functions: dict[tuple[str, int], list[types.FunctionType]]
    held: frozenset[int]  # ids of those code objects


def live_functions(paths: Collection[str]) -> dict[str, Live]:
    """`Live` for each of `paths` (as the code objects name their file): one walk of the collector's objects for
    them all (tens of ms), done once where many plans are made."""
    wanted = set(paths)
    found: dict[str, dict[tuple[str, int], list[types.FunctionType]]] = {path: {} for path in wanted}
    codes: dict[int, types.CodeType] = {}
    for obj in gc.get_objects():
        # type(), not isinstance: isinstance asks a proxy object for its __class__, which may warn or raise.
        if type(obj) is types.FunctionType and obj.__code__.co_filename in wanted:
            code = obj.__code__
            found[code.co_filename].setdefault((code.co_name, code.co_firstlineno), []).append(obj)
            codes[id(code)] = code
    held: set[int] = set()
    for holder in gc.get_referrers(*codes.values()):
        if holder is codes or type(holder) in (types.FunctionType, tuple):
            continue  # a function runs its __code__ at call time; a constants tuple never runs
        held |= {id(r) for r in gc.get_referents(holder) if id(r) in codes}
    return {path: Live(functions, frozenset(held)) for path, functions in found.items()}


def _reaches(obj: object, functions: Collection[types.FunctionType]) -> bool:
    """Whether `obj`, as the module binds it, calls one of `functions` (itself, or through a wrapper)."""
    candidates = [obj]
    if isinstance(obj, staticmethod | classmethod):
        candidates = [obj.__func__]
    elif isinstance(obj, property):
        candidates = [f for f in (obj.fget, obj.fset, obj.fdel) if f is not None]
    for candidate in candidates:
        for _ in range(20):  # a chain of functools.wraps wrappers, never a loop
            if any(candidate is f for f in functions):
                return True
            candidate = getattr(candidate, "__wrapped__", None)
            if candidate is None:
                break
    return False


def _resolve(module: types.ModuleType, qualname: str) -> object:
    obj: object = module
    for part in qualname.split("."):
        namespace = vars(obj) if isinstance(obj, types.ModuleType | type) else {}
        if part not in namespace:
            return None
        obj = namespace[part]
    return obj


def plan(
    module: types.ModuleType,
    original: str,
    mutated: str,
    executed: Collection[int],
    live: Live,
) -> tuple[Swap, ...] | str:
    """The swaps that turn `module` (imported from `original`) into what importing `mutated` would give, or why
    none can. `executed`: the lines of the module's file that ran in this process so far; `live`: its
    `live_functions`."""
    path = module.__file__ or ""
    try:
        before = compile(original, path, "exec", dont_inherit=True)
        after = compile(mutated, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as error:
        return f"does not compile: {error}"
    found: list[_Found] = []
    why = _changed(before, after, "", found)
    if why:
        return why
    swaps: list[Swap] = []
    for name, a, b, enclosing in found:
        functions = [f for f in live.functions.get((a.co_name, a.co_firstlineno), []) if _same(f.__code__, a)]
        if not functions:
            return f"{name}: no live function runs this code"
        body = _lines(a) - enclosing
        if not body or body & set(executed):
            return f"{name} ran before the fork"
        if "<" in name or not _reaches(_resolve(module, name), functions):
            return f"{name} is not bound by its name as a function"
        if a.co_freevars != b.co_freevars:
            return f"{name}: its closure differs"
        if any(id(f.__code__) in live.held for f in functions):
            return f"{name}: its code is held by something other than its functions"
        swaps.append(Swap(name, tuple(functions), b))
    return tuple(swaps)


def apply(swaps: Collection[Swap], path: str, mutated: str) -> None:
    """Make the swaps live, and let tracebacks and `inspect` show the mutated text, as a fresh import would."""
    for swap in swaps:
        for function in swap.functions:
            function.__code__ = swap.code
    lines = mutated.splitlines(keepends=True)
    linecache.cache[path] = (len(mutated), None, lines, path)
