"""Which adopted gates are statistical: the tests that call the gate kit's statistical checks (verify.gatekit's
law checks, whose red is a p-value, not a certainty). `dflash init` writes them as `statistical_gates`, so a
mutant red only in them is confirmed on an independent seed instead of being taken as a deterministic kill.

Reads test files with `ast`; nothing of pytest runs or of the kit's code (the names below are its public API).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

__all__ = ["STATISTICAL_CHECKS", "statistical_gates"]

# verify.gatekit's checks that draw samples and test a law (a red is a p-value): not the exact comparisons.
STATISTICAL_CHECKS = frozenset({
    "assert_acceptance_rule_exact", "assert_first_token_law", "acceptance_rule_fit", "first_token_fit", "output_fit",
    "pearson_fit", "proportion_p_value", "rule_counts", "sequence_counts", "assert_stop_law", "stop_fit",
})  # fmt: skip


def _kit_names(tree: ast.Module) -> set[str]:
    """The local names bound to the kit's statistical checks (`from verify import x as y`, the public import, or
    `from verify.gatekit import x as y` give y), and the module aliases of the kit itself (`from verify import
    gatekit`, `import verify.gatekit as kit`; `import verify` is read by the call's attribute name)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("verify.gatekit"):
            names.update(a.asname or a.name for a in node.names if a.name in STATISTICAL_CHECKS)
        elif isinstance(node, ast.ImportFrom) and node.module == "verify":
            names.update(a.asname or a.name for a in node.names if a.name == "gatekit" or a.name in STATISTICAL_CHECKS)
        elif isinstance(node, ast.Import):
            names.update(a.asname or a.name for a in node.names if a.name.startswith("verify.gatekit"))
    return names


def _calls_kit(node: ast.AST, names: set[str]) -> bool:
    for inner in ast.walk(node):
        if isinstance(inner, ast.Name) and inner.id in names:
            return True
        if isinstance(inner, ast.Attribute) and inner.attr in STATISTICAL_CHECKS:
            return True
    return False


def statistical_gates(root: Path, gate_files: Iterable[str]) -> tuple[str, ...]:
    """Node ids (or a file's path, when a helper outside the tests calls the kit) of the tests in `gate_files`
    (posix, relative to root) that call a statistical check of the gate kit."""
    found: list[str] = []
    for rel in sorted(set(gate_files)):
        try:
            tree = ast.parse((Path(root) / rel).read_text())
        except (OSError, SyntaxError, UnicodeDecodeError):
            continue
        names = _kit_names(tree)
        text = (Path(root) / rel).read_text()
        if not names and "gatekit" not in text and not any(check in text for check in STATISTICAL_CHECKS):
            continue
        tests: list[str] = []
        helpers = False
        for node in tree.body:
            functions = [(node.name, node)] if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) else []
            if isinstance(node, ast.ClassDef):
                functions = [(f"{node.name}::{f.name}", f) for f in node.body if isinstance(f, ast.FunctionDef)]
            for name, function in functions:
                if _calls_kit(function, names):
                    if name.rpartition("::")[2].startswith("test"):
                        tests.append(f"{rel}::{name}")
                    else:
                        helpers = True
        found += [rel] if helpers else tests
    return tuple(found)
