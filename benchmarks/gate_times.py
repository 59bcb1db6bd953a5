"""A pytest plugin for `make bench`: each test's time in a plain run of the gates (setup, call and teardown, as
pytest reports them), written as JSON to the file named by BENCH_GATE_TIMES when the session ends. Loaded with
`-p benchmarks.gate_times`; it changes nothing else, so the run stays the plain run a user's CI makes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

_seconds: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _seconds[report.nodeid] = _seconds.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if path := os.environ.get("BENCH_GATE_TIMES"):
        Path(path).write_text(json.dumps(_seconds))
