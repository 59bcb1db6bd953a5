"""The child's half of the coverage map: coverage.py started over the private copy's source roots for the
baseline, and its lines returned as plain JSON data with the contexts that ran them.

The recorder (`verify.run.child.recorder`) switches the dynamic context to the gate's node id for each test and
to `fixture:<name>` while a fixture is set up; the parent turns the data into gates per line
(`verify.run.phases.coverage_map`). Knows nothing of mutations or verdicts.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from pathlib import Path

import coverage
import coverage.exceptions

__all__ = ["collect", "start"]


def start(root: Path, source_roots: Iterable[str]) -> coverage.Coverage:
    """A started coverage.py over the private copy's source roots; nothing is written to disk."""
    include = [
        str(Path(root) / rel / "*") if (Path(root) / rel).is_dir() else str(Path(root) / rel) for rel in source_roots
    ]
    cov = coverage.Coverage(data_file=None, include=include, branch=False, config_file=False)
    cov.start()
    return cov


def collect(cov: coverage.Coverage, root: Path) -> dict[str, dict[str, list[str]]]:
    """Stop coverage and return {file relative to root: {line: [contexts]}} as plain JSON data."""
    cov.stop()
    # A child whose pytest ran nothing (it refused its options) measured nothing: coverage warns, and the
    # caller's warning filters (an outer pytest's "error") must not turn that into the child's death.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", coverage.exceptions.CoverageWarning)
        data = cov.get_data()
    root = Path(root).resolve()
    lines: dict[str, dict[str, list[str]]] = {}
    for measured in data.measured_files():
        path = Path(measured).resolve()
        if path.is_relative_to(root):
            by_line = data.contexts_by_lineno(measured)
            lines[path.relative_to(root).as_posix()] = {str(n): sorted(c) for n, c in by_line.items()}
    return lines
