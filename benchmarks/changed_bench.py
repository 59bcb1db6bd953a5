"""A pull request's run: `dflash verify --changed-since` on a one-function change of the runner, against one plain
pytest run of the gates that reach the mutations it selects, both in one clone of this repository.

The change renames a local variable of `Request.commit` (runner/request.py), committed on top of HEAD: what a
small refactoring pull request looks like. The run is `dflash verify --changed-since HEAD~1 --no-cache
--no-explain` (a pull request's CI job has no cache of its tree: the baseline and the self-check run too); the
denominator is `pytest` over the union of the gates the selected mutations ran. Goal (issue 55): at most 1.5x.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHANGED = "runner/request.py"
GOAL = 1.5


def _git(clone: Path, *args: str) -> None:
    command = ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", *args]
    subprocess.run(command, cwd=clone, check=True, capture_output=True)


def bench_changed() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        clone = Path(tmp) / "repo"
        subprocess.run(["git", "clone", "-q", "--local", str(ROOT), str(clone)], check=True, capture_output=True)
        source = clone / CHANGED
        text = source.read_text()
        assert text.count("produced") == 6, "the change this bench makes no longer matches runner/request.py"
        source.write_text(text.replace("produced", "count"))
        _git(clone, "commit", "-qam", "request: a clearer name in commit")
        out = Path(tmp) / "changed.json"
        command = [sys.executable, "-m", "verify", "verify", "--changed-since", "HEAD~1", "--no-cache", "--no-explain"]
        start = time.perf_counter()
        subprocess.run([*command, "--json", str(out)], cwd=clone, check=False, capture_output=True)
        verify_s = time.perf_counter() - start
        report = json.loads(out.read_text())
        selected = [m for m in report["mutations"] if m["status"] != "skipped"]
        gates = sorted({gate for m in selected for gate in m["ran"]})
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *gates], cwd=clone,
                       check=False, capture_output=True)  # fmt: skip
        plain_s = time.perf_counter() - start
    ratio = verify_s / plain_s
    return {
        "mutations selected": len(selected),
        "mutations skipped": len(report["mutations"]) - len(selected),
        "gates reaching them": len(gates),
        "verify --changed-since (s)": verify_s,
        "plain pytest of those gates (s)": plain_s,
        "ratio": ratio,
        "goal": f"<= {GOAL} ({'met' if ratio <= GOAL else 'NOT met'})",
    }
