"""A pull request's run: `dflash verify --changed-since` on a one-function change of the runner, against one plain
pytest run of the gates that reach the mutations it selects, both in one clone of this repository.

The change renames a local variable of `Request.commit` (runner/request.py), committed on top of HEAD: what a
small refactoring pull request looks like. The run is the CI recipe's (docs/how-to/ci.md): `dflash verify
--changed-since HEAD~1 --first-kill --no-explain`, with the cache a run on the base commit left (the recipe
restores it), so the baseline re-runs only the gates the change can have reached (`verify.run.phases.reuse`).
The base commit's run is not timed. The denominator is `pytest` over the union of the gates that reach the
selected mutations (the coverage map of the pull request's own baseline). Goal (issue 55): at most 1.5x.
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


# Run in the clone: the gates reaching each selected mutation, from the coverage map of its tree's baseline.
_REACHING = """
import json, sys
from pathlib import Path
from verify.config.catalog import load_mutations
from verify.config.settings import load_config
from verify.mutation.apply import Stale, apply_mutation
from verify.run.phases import cache
from verify.run.phases.coverage_map import CoverageMap, anchor_lines
config = load_config(Path.cwd())
entry = cache.ResultCache(config.root).get_baseline(cache.tree_digest(config))
gate_ids = tuple(g["gate_id"] for g in entry["baseline"]["gates"])
coverage = CoverageMap.from_json(entry["coverage"], gate_ids)
mutations = load_mutations(config)
reaching = set()
for name in json.loads(sys.argv[1]):
    applied = apply_mutation(mutations[name], config.root)
    if not isinstance(applied, Stale):
        reaching.update(coverage.gates_reaching(applied.file, anchor_lines(applied)))
print(json.dumps(sorted(reaching)))
"""


def bench_changed() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        clone = Path(tmp) / "repo"
        subprocess.run(["git", "clone", "-q", "--local", str(ROOT), str(clone)], check=True, capture_output=True)
        verify = [sys.executable, "-m", "verify", "verify", "--no-explain"]
        # The base branch's run, whose cache the pull request's job restores (one mutation: its baseline is what
        # the next run can reuse).
        subprocess.run([*verify, "-m", "walk-replaced-by-argmax"], cwd=clone, check=False, capture_output=True)
        source = clone / CHANGED
        text = source.read_text()
        assert text.count("produced") == 6, "the change this bench makes no longer matches runner/request.py"
        source.write_text(text.replace("produced", "count"))
        _git(clone, "commit", "-qam", "request: a clearer name in commit")
        out = Path(tmp) / "changed.json"
        command = [*verify, "--changed-since", "HEAD~1", "--first-kill", "--json", str(out)]
        start = time.perf_counter()
        done = subprocess.run(command, cwd=clone, check=False, capture_output=True, text=True)
        verify_s = time.perf_counter() - start
        report = json.loads(out.read_text())
        selected = [m["name"] for m in report["mutations"] if m["status"] != "skipped"]
        reused = next((line for line in done.stderr.splitlines() if "the rest ran unchanged code" in line), "")
        found = subprocess.run([sys.executable, "-c", _REACHING, json.dumps(selected)], cwd=clone, check=True,
                               capture_output=True, text=True)  # fmt: skip
        gates = json.loads(found.stdout)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *gates], cwd=clone,
                       check=False, capture_output=True)  # fmt: skip
        plain_s = time.perf_counter() - start
    ratio = verify_s / plain_s
    return {
        "mutations selected": len(selected),
        "mutations skipped": len(report["mutations"]) - len(selected),
        "gates reaching them": len(gates),
        "baseline gates re-run": reused.partition("(")[2].partition(" gate ids")[0] or "all",
        "verify --changed-since --first-kill (s)": verify_s,
        "plain pytest of those gates (s)": plain_s,
        "ratio": ratio,
        "goal": f"<= {GOAL} ({'met' if ratio <= GOAL else 'NOT met'})",
    }
