"""`python -m verify.config.collect_probe OUT PYTEST_ARGS...`: pytest's collection of an existing suite, written to
OUT as JSON (the test ids selected, and each path whose collection failed with the error's last line).

Run in a process of its own by `dflash init` (`verify.config.adopt`), so that a user's test modules never load
into the dflash process. Knows nothing of mutations, settings or forking.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

__all__ = ["main", "reason"]


def reason(text: str) -> str:
    """The line that says why: pytest's last `E   ` line (the exception), else the last line of the report."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line[1:].strip() for line in lines if line.startswith("E ")]
    return (errors or lines or ["collection failed"])[-1][:300]


class _Recorder:
    def __init__(self) -> None:
        self.ids: list[str] = []
        self.errors: dict[str, str] = {}

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self.errors[report.nodeid or "."] = reason(report.longreprtext)

    def pytest_collection_finish(self, session: Any) -> None:
        self.ids = [item.nodeid for item in session.items]  # after -m deselected what it does not select


def main(argv: list[str]) -> int:
    out, args = Path(argv[0]), argv[1:]
    recorder = _Recorder()
    exit_code = pytest.main([*args, "--collect-only", "-q", "-p", "no:cacheprovider"], plugins=[recorder])
    out.write_text(json.dumps({"exit": int(exit_code), "ids": recorder.ids, "errors": recorder.errors}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
