"""The hot swap's planner (`verify.run.child.hotswap`): a mutant is made live in an imported module only when a
fresh import of the mutated text would give the same objects, and refused otherwise.

Each case imports a small module from a file, records which of its lines ran (as the warm worker's coverage
does), plans the mutation and, where a plan is made, checks that calling the module's functions gives what a
fresh import of the mutated text gives.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
import types
from pathlib import Path

import pytest

from verify.run.child import hotswap

SOURCE = textwrap.dedent(
    '''\
    import functools

    LIMIT = 3


    def double(x):
        """Twice x."""
        return 2 * x


    def uses_double(x):
        return double(x) + 1


    def one_liner(x): return x + 1


    class Box:
        size = 2

        def area(self):
            return self.size * self.size

        @staticmethod
        def unit():
            return 1

        @property
        def side(self):
            return self.size

        @functools.cache
        def cached(self):
            return self.size + 10


    def wrap(f):
        @functools.wraps(f)
        def inner(*a):
            return f(*a)
        return inner


    @wrap
    def wrapped(x):
        return x - 1


    def gen():
        yield 1
        yield 2
    '''
)


def _load(tmp_path: Path, text: str, name: str) -> types.ModuleType:
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def module(tmp_path: Path, request: pytest.FixtureRequest) -> types.ModuleType:
    name = f"hot_{request.node.name.replace('[', '_').replace(']', '').replace('-', '_')}"
    yield _load(tmp_path, SOURCE, name)
    sys.modules.pop(name, None)


def _import_lines(text: str) -> set[int]:
    """The lines a fresh import runs: the module's and class bodies' own code, no function body."""
    code = compile(text, "m.py", "exec")
    lines = {line for _, _, line in code.co_lines() if line}
    for const in code.co_consts:
        if isinstance(const, types.CodeType) and not const.co_flags & 0x2:
            lines |= {line for _, _, line in const.co_lines() if line}
    return lines


def _plan(module: types.ModuleType, mutated: str, executed: set[int] | None = None) -> object:
    executed = _import_lines(SOURCE) if executed is None else executed
    path = module.__file__ or ""
    return hotswap.plan(module, SOURCE, mutated, executed, hotswap.live_functions([path])[path])


@pytest.mark.parametrize(
    ("anchor", "replacement", "call", "expected"),
    [
        ("return 2 * x", "return 3 * x", lambda m: m.uses_double(2), 7),
        ("return self.size * self.size", "return self.size ** 3", lambda m: m.Box().area(), 8),
        ("        return 1\n", "        return 5\n", lambda m: m.Box.unit(), 5),
        ("        return self.size\n\n", "        return -self.size\n\n", lambda m: m.Box().side, -2),
        ("return self.size + 10", "return self.size + 20", lambda m: m.Box().cached(), 22),
        ("return x - 1", "return x - 2", lambda m: m.wrapped(5), 3),
        # Lines added above later functions move them; those keep their code and still run.
        ("return 2 * x", "y = 3\n    return y * x", lambda m: (m.double(2), m.Box().area()), (6, 4)),
    ],
    ids=["function", "method", "staticmethod", "property", "cached-method", "wrapped", "lines-moved"],
)
def test_a_planned_swap_behaves_as_a_fresh_import(
    module: types.ModuleType, tmp_path: Path, anchor: str, replacement: str, call: object, expected: object
) -> None:
    assert SOURCE.count(anchor) == 1
    mutated = SOURCE.replace(anchor, replacement)
    planned = _plan(module, mutated)
    assert not isinstance(planned, str), planned
    assert call(module) != expected  # type: ignore[operator]
    hotswap.apply(planned, module.__file__ or "", mutated)
    assert call(module) == expected  # type: ignore[operator]
    (tmp_path / "fresh").mkdir()
    fresh = _load(tmp_path / "fresh", mutated, "hot_fresh_import")
    assert call(fresh) == expected  # type: ignore[operator]
    sys.modules.pop("hot_fresh_import", None)


@pytest.mark.parametrize(
    ("anchor", "replacement", "why"),
    [
        ("LIMIT = 3", "LIMIT = 4", "a constant of the code run at import differs"),
        ("    size = 2", "    size = 3", "a constant of the code run at import differs (Box)"),
        ("def double(x):", "def double(x, y=1):", "differs"),
        ("def one_liner(x): return x + 1", "def one_liner(x): return x + 2", "one_liner ran before the fork"),
        ("    return inner\n", "    return f\n", "wrap ran before the fork"),
        ("return double(x) + 1", "return double(x) +", "does not compile"),
    ],
    ids=["module-constant", "class-attribute", "signature", "one-liner", "ran-at-import", "syntax"],
)
def test_a_mutation_that_no_swap_can_reproduce_is_refused(
    module: types.ModuleType, anchor: str, replacement: str, why: str
) -> None:
    executed = _import_lines(SOURCE) | {SOURCE.splitlines().index("    return inner") + 1}
    planned = _plan(module, SOURCE.replace(anchor, replacement), executed)
    assert isinstance(planned, str) and why in planned, planned


def test_a_function_that_ran_before_the_fork_is_refused(module: types.ModuleType) -> None:
    body_line = SOURCE.splitlines().index("    return 2 * x") + 1
    planned = _plan(module, SOURCE.replace("return 2 * x", "return 3 * x"), _import_lines(SOURCE) | {body_line})
    assert planned == "double ran before the fork"


def test_code_held_by_a_live_generator_is_refused(module: types.ModuleType) -> None:
    started = module.gen()  # its frame runs the old code whatever the function is given
    planned = _plan(module, SOURCE.replace("yield 2", "yield 3"))
    assert isinstance(planned, str) and "held by something other than its functions" in planned
    assert next(started) == 1


def test_a_function_bound_to_another_object_is_refused(module: types.ModuleType) -> None:
    original = module.double
    module.double = lambda x: x  # what TorchScript or another compiler binds: it never runs the function's code
    planned = _plan(module, SOURCE.replace("return 2 * x", "return 3 * x"))
    assert planned == "double is not bound by its name as a function"
    module.double = original


def test_an_unchanged_text_plans_nothing(module: types.ModuleType) -> None:
    assert _plan(module, SOURCE) == ()
