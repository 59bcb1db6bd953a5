"""Which gates reach which source lines, from what the baseline child measured (`verify.run.child.coverage`).

The baseline child ran coverage.py with dynamic contexts: a gate's node id for each test and
`fixture:<name>` while a fixture was set up. A line seen only
at import time (the empty context) is credited to every gate, since every gate imports it. A
mutation then runs only the gates that reach the statements its anchor touches. This module knows
nothing of forking or pytest.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from verify.mutation.apply import Applied

__all__ = ["CoverageMap", "anchor_lines"]

_FIXTURE = "fixture:"


@dataclass(frozen=True, slots=True)
class CoverageMap:
    lines: dict[str, dict[str, list[str]]]  # file -> line -> contexts (the JSON form of `collect`)
    fixtures: dict[str, list[str]]  # gate id -> fixture names it depends on
    gate_ids: tuple[str, ...]

    @classmethod
    def from_json(cls, data: dict[str, Any], gate_ids: tuple[str, ...]) -> CoverageMap:
        return cls(data.get("lines", {}), data.get("fixtures", {}), gate_ids)

    def gates_reaching(self, file: str, line_numbers: Iterable[int]) -> tuple[str, ...]:
        """Gates, in baseline order, that executed any of these lines of `file`."""
        by_line = self.lines.get(file, {})
        contexts = {ctx for n in line_numbers for ctx in by_line.get(str(n), ())}
        if "" in contexts:
            return self.gate_ids
        fixtures = {ctx.removeprefix(_FIXTURE) for ctx in contexts if ctx.startswith(_FIXTURE)}
        return tuple(
            gate_id
            for gate_id in self.gate_ids
            if gate_id in contexts or fixtures.intersection(self.fixtures.get(gate_id, ()))
        )


def anchor_lines(applied: Applied) -> set[int]:
    """The lines coverage.py records for the statements the anchor touches.

    coverage.py records a statement at its first line, so an anchor in the middle of a multi-line
    statement is mapped to that statement's first line. A compound statement (def, if, for) counts
    only when the anchor lies in its header, not merely somewhere in its body.
    """
    first, last = applied.first_line, applied.last_line
    lines = set(range(first, last + 1))
    for start, end, header_end in _statements(applied.original):
        if end < first or start > last:
            continue
        if first <= header_end:
            lines.add(start)
    return lines


@functools.lru_cache(maxsize=64)
def _statements(source: str) -> tuple[tuple[int, int, int], ...]:
    """Every statement of a file as (first line, last line, last line of its header; for a simple statement,
    its last line). Parsed once per file text: a catalog holds many mutations of the same file."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ()
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt) or node.end_lineno is None:
            continue
        children = [c for f in ("body", "orelse", "finalbody", "handlers") for c in getattr(node, f, [])]
        header_end = min(c.lineno for c in children) - 1 if children else node.end_lineno
        found.append((node.lineno, node.end_lineno, header_end))
    return tuple(found)
