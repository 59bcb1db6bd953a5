"""The catalog states its killers: every registered mutation pins the gates expected to kill it, and every pin
names a gate that exists (a file under tests/gates and, for a node id, a test function defined in it).

Whether each pinned gate really goes red by an assertion on the shipped fixtures is checked by the slow
`test_embedded_default_kills_every_mutation` (tests/catalog/test_catalog.py), which runs the whole catalog.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from verify.config.catalog import load_mutations
from verify.config.settings import load_config

ROOT = Path(__file__).resolve().parents[2]
CATALOG = load_mutations(load_config(ROOT))


def _test_functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_every_mutation_pins_existing_gates(name: str) -> None:
    mutation = CATALOG[name]
    assert mutation.expect_killed_by, f"{name} names no gate expected to kill it"
    for pin in mutation.expect_killed_by:
        file, _, node = pin.partition("::")
        assert file.startswith("tests/gates/test_gate_"), f"{name}: pin {pin!r} is not a gate"
        assert (ROOT / file).is_file(), f"{name}: pinned gate file {file} does not exist"
        if node:
            function = node.split("[")[0]
            assert function in _test_functions(ROOT / file), f"{name}: {file} defines no {function}"
