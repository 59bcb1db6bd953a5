"""The runner's import graph: no module imports `verify` or `mutations`, and no circle exists among runner
modules (imports under TYPE_CHECKING count too: a circle hidden there is still a circle in the design)."""

from __future__ import annotations

import ast
from pathlib import Path

RUNNER = Path(__file__).resolve().parents[2] / "runner"


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _graph() -> dict[str, set[str]]:
    modules = {f"runner.{p.stem}": p for p in RUNNER.glob("*.py") if p.stem != "__init__"}
    return {name: {m for m in _imports(path) if m in modules} for name, path in modules.items()}


def test_runner_imports_nothing_of_verify_or_mutations() -> None:
    for path in RUNNER.rglob("*.py"):
        bad = {m for m in _imports(path) if m.split(".")[0] in ("verify", "mutations")}
        assert not bad, f"{path.name} imports {sorted(bad)}"


def find_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of `graph` as a path that ends where it starts, or None."""
    done: set[str] = set()

    def visit(module: str, trail: list[str]) -> list[str] | None:
        if module in trail:
            return [*trail[trail.index(module) :], module]
        if module in done:
            return None
        for imported in sorted(graph.get(module, ())):
            circle = visit(imported, [*trail, module])
            if circle:
                return circle
        done.add(module)
        return None

    for module in sorted(graph):
        circle = visit(module, [])
        if circle:
            return circle
    return None


def test_runner_has_no_import_circle() -> None:
    circle = find_circle(_graph())
    assert circle is None, "import circle: " + " -> ".join(circle or [])


def test_the_circle_check_sees_a_circle() -> None:
    """Proves the check: a three-module circle behind an acyclic entry is found."""
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": {"d"}, "d": {"b"}}) == ["b", "c", "d", "b"]
    assert find_circle({"a": {"b"}, "b": set()}) is None
