"""The worked example (examples/reference-engine): a user project around the upstream reference engine
`dflash==0.1.0`, verified through the real CLI in a subprocess; every verdict is the one its README states.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "reference-engine"

# The example's expected verdicts (its README's table).
EXPECTED = {
    "aligned-causal-block-mask": "survived",  # declared expect="survives": the fixture cannot see it
    "context-keeps-rejected-rows": "killed",
    "context-positions-shifted": "killed",
    "draft-cache-keeps-block": "killed",
    "greedy-accepts-one-extra": "killed",
    "sdpa-causal-block-mask": "killed",
    "target-cache-keeps-rejected": "killed",
}


@pytest.fixture(scope="module")
def example_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], dict]:
    reference = os.environ.get("DFLASH_REFERENCE_PATH", str(REPO / ".cache" / "ref"))
    if not (Path(reference) / "dflash" / "model.py").is_file():
        pytest.fail(f"the reference dflash==0.1.0 is not installed at {reference}; run `make install`")
    root = tmp_path_factory.mktemp("example") / "reference-engine"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("__pycache__", ".dflash-cache"))
    report = root.parent / "report.json"
    env = {**os.environ, "DFLASH_REFERENCE_PATH": reference, "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-m", "verify", "verify", "--project", str(root), "--json", str(report)],
        capture_output=True, text=True, env=env, timeout=900, check=False,
    )  # fmt: skip
    return done, json.loads(report.read_text()) if report.is_file() else {}


@pytest.mark.slow
@pytest.mark.reference
def test_every_verdict_of_the_example_is_the_expected_one(example_run) -> None:
    done, report = example_run
    assert done.returncode == 0, done.stdout + done.stderr
    assert {m["name"]: m["status"] for m in report["mutations"]} == EXPECTED


@pytest.mark.slow
@pytest.mark.reference
def test_the_example_reports_its_declared_survivor_with_its_reason(example_run) -> None:
    _, report = example_run
    [declared] = report["expected_survivors"]
    assert declared["name"] == "aligned-causal-block-mask" and "mask_sensitivity_causal_aligned" in declared["reason"]
    assert report["surprises"] == []
    killers = {m["name"]: m["killed_by"] for m in report["mutations"]}
    assert any("fresh_forward" in gate for gate in killers["target-cache-keeps-rejected"])
