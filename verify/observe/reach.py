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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["changed_lines", "collect", "describe", "start", "unreached"]


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
    changed statement that branches, the exits it has and those taken (negative: leaving the function)."""
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
        files[rel] = {"lines": statements, "ran": [n for n in statements if n in ran], "branches": branches}
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
