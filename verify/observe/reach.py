"""Whether an observation run reached a mutant's changed code: line and branch coverage of the changed lines.

"Observably equivalent" means something only where the workloads ran the changed code the way a gate would:
every changed statement executed, and every changed statement that branches (an `if`, a loop, a `while`)
left by each of its ways. The observer's run of a mutant is measured by coverage.py (branch mode) over the
mutated files alone; the changed lines are the mutated text's lines that differ from the pristine copy's,
each taken to the statement that holds it. The result is plain JSON data, and `unreached` words what was not
reached for a person. Runs in the observation child (the mutant's code served by the import hook is
compiled under its file's path, so coverage.py sees it); knows nothing of comparisons or reports.
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "changed_lines",
    "collect",
    "contexts_by_line",
    "describe",
    "gates_reaching",
    "pristine_lines",
    "start",
    "start_contexts",
    "unreached",
]


def changed_lines(pristine: str, mutated: str) -> list[int]:
    """1-based lines of `mutated` that differ from `pristine` (a deletion marks the line now in its place)."""
    old, new = pristine.splitlines(), mutated.splitlines()
    lines: set[int] = set()
    for tag, _, _, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag in ("replace", "insert"):
            lines.update(range(j1 + 1, j2 + 1))
        elif tag == "delete":
            lines.add(min(j1 + 1, max(len(new), 1)))
    return sorted(lines)


def pristine_lines(pristine: str, mutated: str) -> list[int]:
    """1-based lines of `pristine` that a mutation rewrites, each taken to the statement that holds it (an
    insertion marks the lines on both sides of where it goes): the lines a gate must run to reach the change."""
    from coverage.parser import PythonParser

    old, new = pristine.splitlines(), mutated.splitlines()
    lines: set[int] = set()
    for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag in ("replace", "delete"):
            lines.update(range(i1 + 1, i2 + 1))
        elif tag == "insert":
            lines.update(n for n in (i1, i1 + 1) if 1 <= n <= len(old))
    parser = PythonParser(text=pristine)
    parser.parse_source()
    return sorted({parser.first_line(n) for n in lines})


def start_contexts(root: Path, files: Iterable[str]) -> Any:
    """A started coverage.py (line mode) over `files` under `root`, whose contexts the caller switches (to each
    gate's node id); None when there are no files."""
    include = [str((Path(root) / rel).resolve()) for rel in files]
    if not include:
        return None
    import coverage

    cov = coverage.Coverage(data_file=None, include=include, config_file=False)
    cov.start()
    return cov


def contexts_by_line(cov: Any, root: Path, files: Iterable[str]) -> dict[str, dict[str, list[str]]]:
    """Stop `cov`: per file (relative to root), each line that ran and the contexts that ran it ("" before the
    first switch: at import)."""
    import coverage.exceptions

    cov.stop()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", coverage.exceptions.CoverageWarning)
        data = cov.get_data()
    measured = {str(Path(f).resolve()): f for f in data.measured_files()}
    found: dict[str, dict[str, list[str]]] = {}
    for rel in files:
        name = measured.get(str((Path(root) / rel).resolve()))
        if name is not None:
            found[rel] = {str(n): sorted(c) for n, c in data.contexts_by_lineno(name).items()}
    return found


def gates_reaching(by_line: Mapping[str, Mapping[str, Sequence[str]]], pristine: Mapping[str, str],
                   mutated: Mapping[str, str], gate_ids: Sequence[str]) -> list[str]:  # fmt: skip
    """The gates (in `gate_ids`' order) that ran any line a mutation rewrites, as measured (`contexts_by_line`); a
    line run at import only is reached by every gate, since every gate imports it."""
    contexts: set[str] = set()
    for rel, text in mutated.items():
        for line in pristine_lines(pristine[rel], text):
            contexts.update(by_line.get(rel, {}).get(str(line), ()))
    if "" in contexts:
        return list(gate_ids)
    return [gate for gate in gate_ids if gate in contexts]


def start(root: Path, overrides: Mapping[str, str]) -> Any:
    """A started coverage.py (branch mode) over the mutated files under `root`, or None when nothing is mutated."""
    if not overrides:
        return None
    import coverage

    include = [str((Path(root) / rel).resolve()) for rel in overrides]
    cov = coverage.Coverage(data_file=None, include=include, branch=True, config_file=False)
    cov.start()
    return cov


def collect(cov: Any, root: Path, overrides: Mapping[str, str]) -> dict[str, Any]:
    """Stop `cov`; per mutated file (relative to root): its changed statements, those that ran, and for each
    changed statement that branches, the exits it has and those taken (negative: leaving the function), and the
    contexts (gates' node ids, where the caller switched them) that ran a changed statement."""
    import coverage.exceptions
    from coverage.parser import PythonParser

    cov.stop()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", coverage.exceptions.CoverageWarning)
        data = cov.get_data()
    measured = {str(Path(f).resolve()): f for f in data.measured_files()}
    files: dict[str, Any] = {}
    for rel, mutated in overrides.items():
        path = (Path(root) / rel).resolve()
        parser = PythonParser(text=mutated, filename=str(path))
        parser.parse_source()
        changed = {parser.first_line(n) for n in changed_lines(path.read_text(), mutated)}
        statements = sorted(changed & parser.statements)
        name = measured.get(str(path))
        arcs = set(data.arcs(name) or ()) if name else set()
        ran = {a for a, _ in arcs} | {b for _, b in arcs}
        possible = parser.arcs()
        branches = {}
        for line in statements:
            exits = sorted({b for a, b in possible if a == line})
            if len(exits) > 1:
                branches[str(line)] = {"exits": exits, "taken": sorted({b for a, b in arcs if a == line})}
        by_context = data.contexts_by_lineno(name) if name else {}
        gates = sorted({c for n in statements for c in by_context.get(n, ()) if c})
        files[rel] = {"lines": statements, "ran": [n for n in statements if n in ran], "branches": branches,
                      "gates": gates}  # fmt: skip
    return files


def unreached(reach: Mapping[str, Any]) -> tuple[str, ...]:
    """What the run did not reach of the changed code, one phrase each ("runner/x.py line 12 not reached",
    "runner/x.py line 30: the way to line 34 never taken"); () when it reached all of it."""
    missing = []
    for rel, facts in reach.items():
        ran = set(facts["ran"])
        for line in facts["lines"]:
            if line not in ran:
                missing.append(f"{rel} line {line} not reached")
                continue
            branch = facts["branches"].get(str(line))
            for exit_line in sorted(set(branch["exits"]) - set(branch["taken"])) if branch else ():
                to = "leaving the function" if exit_line < 0 else f"to line {exit_line}"
                missing.append(f"{rel} line {line}: the way {to} never taken")
    return tuple(missing)


def describe(reach: Mapping[str, Any]) -> str:
    """The coverage shown with a claim: "runner/x.py lines 12, 30 ran; branches at 30: 2/2 ways taken"."""
    parts = []
    for rel, facts in reach.items():
        if not facts["lines"]:
            parts.append(f"{rel}: no executable line changed")
            continue
        ran = f"{rel} changed line{'s' if len(facts['lines']) > 1 else ''} {', '.join(map(str, facts['lines']))}: "
        ran += f"{len(facts['ran'])}/{len(facts['lines'])} ran"
        ways = [f"line {n}: {len(b['taken'])}/{len(b['exits'])} ways taken" for n, b in facts["branches"].items()]
        parts.append(ran + (f"; {', '.join(ways)}" if ways else ""))
    return "; ".join(parts)
