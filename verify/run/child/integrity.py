"""The harness's code inside a child, checked against what it loaded: a mutant that rewrites how a gate's outcome
is reported must not turn its kill into a pass unnoticed.

A `Snapshot` is taken before any of the mutant's code is imported: once in the executor before it forks
(`prime`; every child inherits it), else when the recorder is made. It holds, by identity, every function and
class of the modules a verdict passes through: pytest's reporting path (`TestReport.from_item_and_call`,
`CallInfo.from_call`, the runner's `call_and_report` and `runtestprotocol`, the skipping and python plugins'
hooks, the session's loop), pluggy's hook calling, the json and hmac code the journal seals with, and the
recorder's, journal's and this module's own: each function with its code, defaults and closure, each class with
its methods. Once the gates start it adds what each of those namespaces holds (from then on a name added, say a
method to shadow an inherited one, counts: pytest's own plugins add to its classes while it configures itself),
the hook implementations the verdict depends on (`HOOKS`: which plugins, which functions, in which order) and
the recorder's own state (its type, the containers of its red and finished gates, nothing set on it to shadow a
method). `_UNWATCHED` are the few names it holds that are on no verdict's path. `changed` names whatever
differs; the recorder calls it after each gate and at the session's end, journals what it found and ends the
child, and the job is `error`, naming it.

What it cannot see: a mutant that rewrites this check itself before it runs, changes an object these do not hold
(a gate's own item, a fixture), or reads the journal's key from memory and forges sealed lines. Every check runs
in the mutant's own process; docs/how-to/confinement.md says what that means. Knows nothing of verdicts.
"""

from __future__ import annotations

import builtins
import sys
import types
from collections.abc import Mapping
from typing import Any

__all__ = ["HOOKS", "Snapshot", "prime"]

# The modules whose functions and classes decide what a gate's outcome is reported as, or how it is journalled.
_MODULES = (
    "_pytest.reports", "_pytest.runner", "_pytest.python", "_pytest.main", "_pytest.skipping", "_pytest.outcomes",
    "_pytest.nodes", "pluggy._callers", "pluggy._hooks", "pluggy._manager", "pluggy._result", "json",
    "json.encoder", "hmac", "verify.report.verdict", "verify.report.decode", "verify.run.child.recorder",
    "verify.run.child.journal", "verify.run.child.deadline", "verify.run.child.p_value", __name__,
)  # fmt: skip
# Held by these modules and on no verdict's path, and changed by code that is not a mutant's: two properties
# pytest's own legacypath plugin sets anew whenever a session configures itself (a py.path view of a node's path,
# the session's start folder), and the encoder's fallback for objects JSON cannot write, which projects patch to
# write their own types (the journal writes only strings and numbers).
_UNWATCHED = frozenset(
    {"_pytest.nodes.Node.fspath", "_pytest.main.Session.startdir", "json.encoder.JSONEncoder.default"}
)
# The hooks whose implementations run a gate and report it; the recorder's own among them.
HOOKS = (
    "pytest_runtest_protocol", "pytest_runtest_setup", "pytest_runtest_call", "pytest_runtest_teardown",
    "pytest_runtest_makereport", "pytest_runtest_logreport", "pytest_pyfunc_call", "pytest_sessionfinish",
)  # fmt: skip
# Builtins the recorder and pytest's reporting call by name.
_BUILTINS = ("isinstance", "issubclass", "type", "str", "dict", "set", "list", "tuple", "open", "getattr",
             "hasattr", "len", "repr", "id", "BaseException", "Exception", "AssertionError")  # fmt: skip
# The recorder's attributes whose object (not contents) must stay the one it made.
_RECORDER_STATE = ("_red", "_done", "_duration", "journal", "deadlines", "integrity", "invariant_errors")


def _mark(value: Any) -> tuple[Any, ...]:
    """What identifies a function or descriptor: the object, and for a function its code, defaults and closure."""
    function = value
    if isinstance(value, classmethod | staticmethod):
        function = value.__func__
    elif isinstance(value, property):
        return (value, value.fget, value.fset, *(_mark(f) for f in (value.fget, value.fset) if f is not None))
    if isinstance(function, types.FunctionType):
        # Not the closure's cell contents: a cell a function rebinds (a counter, a cache) changes legitimately.
        return (value, function, function.__code__, function.__defaults__, function.__kwdefaults__,
                function.__closure__)  # fmt: skip
    return (value,)


def _untouched(value: Any, mark: tuple[Any, ...]) -> bool:
    """The common case of `_same(_mark(value), mark)` without building a mark: a plain function with the very
    code, defaults and closure it had (checked after every gate, over a few thousand of them). False means only
    "look closer"."""
    return (
        value is mark[0]
        and type(value) is types.FunctionType
        and value.__code__ is mark[2]
        and value.__defaults__ is mark[3]
        and value.__kwdefaults__ is mark[4]
        and value.__closure__ is mark[5]
    )


def _is_code(value: Any) -> bool:
    return isinstance(value, types.FunctionType | classmethod | staticmethod | property | type) or callable(value)


class Snapshot:
    """What the run loaded, to compare against later (`changed`)."""

    def __init__(self) -> None:
        # (label, the namespace it lives in (a live view), the name there, its mark)
        self._marks: list[tuple[str, Mapping[str, Any], str, tuple[Any, ...]]] = []
        self._spaces: list[tuple[str, Mapping[str, Any]]] = []  # each module's and class's namespace
        self._names: list[tuple[str, Mapping[str, Any], frozenset[str]]] = []  # once the gates start
        if _PRIMED is not None:  # taken by the executor before it forked this process: the same objects
            self._marks, self._spaces = list(_PRIMED._marks), list(_PRIMED._spaces)
        else:
            self._take()
        self._hooks: list[tuple[str, Any, tuple[Any, ...]]] = []
        self._recorder: tuple[Any, type, dict[str, tuple[Any, type]], frozenset[str]] | None = None

    def _take(self) -> None:
        for name in _MODULES:
            module = sys.modules.get(name)
            if module is not None:
                self._namespace(name, module)
        space = vars(builtins)
        for name in _BUILTINS:
            self._marks.append((f"builtins.{name}", space, name, _mark(space[name])))

    def _namespace(self, name: str, module: types.ModuleType) -> None:
        space = vars(module)
        self._spaces.append((name, space))
        for key, value in list(space.items()):
            if isinstance(value, types.FunctionType):
                self._marks.append((f"{name}.{key}", space, key, _mark(value)))
            elif isinstance(value, type):  # imported ones too: `_pytest.runner.TestReport` is the one it calls
                self._marks.append((f"{name}.{key}", space, key, (value,)))
                if value.__module__ == name:
                    self._class(f"{name}.{key}", value)

    def _class(self, label: str, cls: type) -> None:
        space = vars(cls)  # a live view, as a module's dict is
        self._spaces.append((label, space))
        for key, value in vars(cls).items():
            if f"{label}.{key}" in _UNWATCHED:
                continue
            if isinstance(value, types.FunctionType | classmethod | staticmethod | property):
                self._marks.append((f"{label}.{key}", space, key, _mark(value)))

    def gates_start(self, pluginmanager: Any, recorder: Any) -> None:
        """Once the gates are collected (every conftest and plugin registered): the hook implementations and the
        recorder's state, as they are before the first gate runs. Taken once."""
        if self._recorder is not None:
            return
        for label, space in self._spaces:
            self._names.append((label, space, frozenset(k for k, v in space.items() if _is_code(v))))
        for name in HOOKS:
            caller = getattr(pluginmanager.hook, name, None)
            if caller is not None:
                self._hooks.append((name, caller, self._impls(caller)))
        self._hooks.append(("pluginmanager", pluginmanager, (getattr(pluginmanager, "_inner_hookexec", None),)))
        state = {key: (value, type(value)) for key in _RECORDER_STATE if (value := vars(recorder).get(key)) is not None}
        self._recorder = (recorder, type(recorder), state, frozenset(vars(recorder)))

    @staticmethod
    def _impls(caller: Any) -> tuple[Any, ...]:
        impls = caller.get_hookimpls()
        marks = tuple((impl, impl.plugin, *_mark(impl.function)) for impl in impls)
        return (getattr(caller, "_hookexec", None), *marks)

    def changed(self) -> list[str]:
        """What differs from the snapshot: each a label, e.g. `_pytest.reports.TestReport.from_item_and_call`."""
        found = []
        for label, space, key, mark in self._marks:
            value = space.get(key)
            if value is None or not (_untouched(value, mark) or _same(_mark(value), mark)):
                found.append(label)
        for label, space, keys in self._names:
            # The names added since, by a set difference (C speed): most namespaces gain none.
            added = sorted(k for k in space.keys() - keys if _is_code(space[k]) and f"{label}.{k}" not in _UNWATCHED)
            found += [f"{label}.{key} (added)" for key in added]
        for name, holder, impls in self._hooks:
            now = (getattr(holder, "_inner_hookexec", None),) if name == "pluginmanager" else self._impls(holder)
            if not _same(now, impls):
                found.append(f"the implementations of {name}" if name != "pluginmanager" else "pluggy's hook runner")
        if self._recorder is not None:
            recorder, kind, state, keys = self._recorder
            if type(recorder) is not kind:
                found.append("the recorder's class")
            for key, (value, value_type) in state.items():
                now = vars(recorder).get(key)
                if now is not value or type(now) is not value_type:
                    found.append(f"the recorder's {key}")
            shadowing = sorted(k for k in vars(recorder) if k not in keys and hasattr(kind, k))
            found += [f"the recorder's {key} (set on it)" for key in shadowing]
        return found


_PRIMED: Snapshot | None = None


def prime() -> None:
    """In the executor, before it forks any child: the snapshot's marks taken once, inherited by every child (which
    then copies a list instead of walking every module, a few ms a child). The executor runs none of the project's
    code, so what it loaded is what each child loaded before its gates."""
    global _PRIMED
    _PRIMED = Snapshot()


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Element by element by identity (a mark holds objects whose == a mutant could define)."""
    if len(a) != len(b):
        return False
    return all(
        x is y or (isinstance(x, tuple) and isinstance(y, tuple) and _same(x, y)) for x, y in zip(a, b, strict=True)
    )
