"""An earlier tree's baseline standing for this one: which gates a change can have reached, and the baseline
rebuilt from their new run and the earlier run of every other gate.

A gate runs the same way, and covers the same lines, as long as nothing it executed changed. So when the tree
differs from one whose baseline is cached (same harness, settings and interpreter) only in function bodies of
source files and in gate files, the baseline needs to run only the gates that executed a line of a changed
source file (by coverage context, fixtures included) and every gate of a changed gate file; every other gate
keeps its earlier outcome and coverage (pytest-testmon's rule, at file granularity). Anything else falls back to
a whole baseline: a change outside function bodies (an import, a constant, a signature: every importer may see
it), a function body that ran at import time, a changed conftest, helper module or data file. A pull request's
`--changed-since` run with the base branch's cache restored thus runs the gates near its change, not all of
them. This module knows nothing of forking or pytest.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from verify.config.settings import ProjectConfig
from verify.report.decode import baseline_from_dict
from verify.report.verdict import Baseline, BaselineStatus, GateOutcome

__all__ = ["Reuse", "combine", "fingerprint", "plan_reuse"]

_FIXTURE = "fixture:"
_TEST_FILE = re.compile(r"test_.*\.py|.*_test\.py")  # pytest's default python_files


def _skeleton(text: str) -> tuple[str, list[tuple[int, int]]] | None:
    """(digest of the module with every function body emptied, the line ranges of those bodies); None when
    the text does not parse. Two texts with one skeleton differ only inside function bodies: what runs at import
    (imports, constants, class attributes, signatures, defaults, decorators) is the same."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    bodies = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            bodies.append((node.body[0].lineno, node.end_lineno or node.body[-1].lineno))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            node.body = [ast.Pass()]
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest(), bodies


def fingerprint(config: ProjectConfig, files: Mapping[str, bytes], coverage: Mapping[str, Any]) -> dict[str, Any]:
    """What a later tree needs to reuse this baseline, stored beside it: every file's digest, and for each
    source file its skeleton and whether a function body of it ran at import time (the empty context)."""
    lines = coverage.get("lines", {})
    sources = {}
    for rel in files:
        if not rel.endswith(".py") or not config.is_source(rel):
            continue
        try:
            content = (config.root / rel).read_bytes()
            # Only the text the run started from: one edited since has no skeleton, so a later tree that changed
            # it runs a whole baseline.
            shape = _skeleton(content.decode()) if hashlib.sha256(content).digest() == files[rel] else None
        except (OSError, UnicodeDecodeError):
            shape = None
        if shape is None:
            continue
        digest, bodies = shape
        imported = {int(n) for n, contexts in lines.get(rel, {}).items() if "" in contexts}
        at_import = any(first <= n <= last for n in imported for first, last in bodies)
        sources[rel] = [digest, at_import]
    return {"files": {rel: content.hex() for rel, content in files.items()}, "sources": sources}


@dataclass(frozen=True, slots=True)
class Reuse:
    """The gates a change may have reached (`targets`: gate files whole, node ids elsewhere, as pytest
    arguments) and the earlier baseline every other gate keeps."""

    targets: tuple[str, ...]
    changed_gate_files: frozenset[str]
    changed_files: frozenset[str]
    baseline: Baseline
    coverage: dict[str, Any]


def _affected_by_source(rel: str, coverage: Mapping[str, Any], gate_ids: tuple[str, ...]) -> set[str]:
    contexts = {c for by_line in [coverage.get("lines", {}).get(rel, {})] for cs in by_line.values() for c in cs}
    fixtures = {c.removeprefix(_FIXTURE) for c in contexts if c.startswith(_FIXTURE)}
    uses = coverage.get("fixtures", {})
    return {g for g in gate_ids if g in contexts or fixtures.intersection(uses.get(g, ()))}


def plan_reuse(config: ProjectConfig, files: Mapping[str, bytes], earlier: Mapping[str, Any]) -> Reuse | None:
    """How an earlier baseline (a cache entry with its `fingerprint`) can stand for the tree `files`; None
    when the difference is one a whole baseline must answer."""
    try:
        old_files: dict[str, str] = dict(earlier["files"])
        sources: dict[str, list[Any]] = dict(earlier["sources"])
        baseline = baseline_from_dict(dict(earlier["baseline"]))
        coverage: dict[str, Any] = dict(earlier["coverage"])
    except (KeyError, TypeError, ValueError):
        return None  # an entry from before fingerprints, or a foreign one
    now = {rel: content.hex() for rel, content in files.items()}
    changed = {rel for rel in set(old_files) | set(now) if old_files.get(rel) != now.get(rel)}
    gate_ids = baseline.gate_ids
    gate_files = {g.partition("::")[0] for g in gate_ids}
    affected: set[str] = set()
    changed_gate_files: set[str] = set()
    for rel in changed:
        if os.path.basename(rel) == "conftest.py" or not rel.endswith(".py"):
            return None  # every gate below a conftest, and whatever reads a data file, may differ
        beside_gates = rel not in old_files and config.is_under_gates(rel)
        new_gate_file = beside_gates and _TEST_FILE.fullmatch(os.path.basename(rel)) is not None
        if beside_gates and not new_gate_file:
            return None  # a new module beside the gates, not named as a test file: what collects it is unknown
        if rel in gate_files or new_gate_file:
            changed_gate_files.add(rel)
            affected |= _affected_by_source(rel, coverage, gate_ids)  # a gate file some other gate runs code of
        elif config.is_source(rel):
            if rel in files and rel in old_files:
                shape = _skeleton((config.root / rel).read_text())
                before = sources.get(rel)
                if shape is None or before is None or shape[0] != before[0] or before[1]:
                    return None  # a change outside function bodies, or a body run at import
            # A new source file was run by no earlier gate, and one removed is reached only through a changed importer.
            affected |= _affected_by_source(rel, coverage, gate_ids)
        else:
            return None  # a helper module beside the gates: which gates import it is not measured
    in_changed_files = tuple(sorted(changed_gate_files & set(files)))
    ids = tuple(g for g in gate_ids if g in affected and g.partition("::")[0] not in changed_gate_files)
    return Reuse(in_changed_files + ids, frozenset(changed_gate_files), frozenset(changed), baseline, coverage)


def combine(
    reuse: Reuse, ran: tuple[GateOutcome, ...], order: tuple[str, ...], coverage: Mapping[str, Any]
) -> tuple[Baseline, dict[str, Any]]:
    """The baseline of this tree: the gates `ran` now (collected in `order`) with their new coverage, and every
    other earlier gate with its earlier outcome and coverage, in the earlier order (a changed gate file's gates
    where its first earlier gate stood, or last when the file is new)."""
    rerun = {o.gate_id for o in ran} | set(order) | set(reuse.targets)  # a target now skipped is dropped
    by_id = {o.gate_id: o for o in ran}
    new_in_file: dict[str, list[GateOutcome]] = {}
    for gate_id in order:
        if gate_id in by_id and gate_id.partition("::")[0] in reuse.changed_gate_files:
            new_in_file.setdefault(gate_id.partition("::")[0], []).append(by_id[gate_id])
    gates: list[GateOutcome] = []
    placed: set[str] = set()
    for outcome in reuse.baseline.gates:
        file = outcome.gate_id.partition("::")[0]
        if file in reuse.changed_gate_files:
            if file not in placed:
                gates += new_in_file.get(file, [])
                placed.add(file)
        elif outcome.gate_id in by_id:
            gates.append(by_id[outcome.gate_id])
        elif outcome.gate_id not in rerun:
            gates.append(outcome)
    gates += [o for file, outcomes in new_in_file.items() if file not in placed for o in outcomes]
    rerun |= {g for g in reuse.baseline.gate_ids if g.partition("::")[0] in reuse.changed_gate_files}
    return Baseline(BaselineStatus.GREEN, tuple(gates)), _join(reuse, rerun, coverage)


def _join(reuse: Reuse, rerun: set[str], coverage: Mapping[str, Any]) -> dict[str, Any]:
    """Earlier coverage less the re-run gates' contexts (and every line of a changed file, whose numbers moved),
    joined with the new run's. Fixture and import-time contexts are kept from both: a superset only makes more
    gates reach a line, never fewer."""
    lines: dict[str, dict[str, list[str]]] = {}
    for file, by_line in reuse.coverage.get("lines", {}).items():
        if file in reuse.changed_files:
            continue
        for line, contexts in by_line.items():
            if kept := [c for c in contexts if c not in rerun]:
                lines.setdefault(file, {})[line] = kept
    for file, by_line in coverage.get("lines", {}).items():
        merged = lines.setdefault(file, {})
        for line, contexts in by_line.items():
            merged[line] = sorted(set(merged.get(line, ())) | set(contexts))
    fixtures = {g: f for g, f in reuse.coverage.get("fixtures", {}).items() if g not in rerun}
    fixtures.update(coverage.get("fixtures", {}))
    return {"lines": lines, "fixtures": fixtures}
