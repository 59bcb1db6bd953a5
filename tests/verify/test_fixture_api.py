"""The documented fixture API (verify.fixtures.api) and the audit of a user's own draft through an adapter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from verify.fixtures.adapter_audit import NOT_MEASURED, DraftContext, audit_adapter
from verify.fixtures.api import FixtureError, fixture_names, load_fixture

REPO = Path(__file__).resolve().parents[2]


def test_shipped_pairs_load_as_configs_tensors_and_folders() -> None:
    assert {"stride-dflash", "stride-dflash2"} <= set(fixture_names())
    pair = load_fixture("stride-dflash")
    assert (pair.target_dir / "config.json").is_file() and (pair.draft_dir / "model.safetensors").is_file()
    assert (pair.block_size, pair.mask_token_id, pair.target_layer_ids, pair.kind) == (4, 47, (0, 1), "dflash")
    assert len(pair.audit_prompts) == 10 and all(isinstance(t, int) for t in pair.audit_prompts[0])
    assert pair.acceptance_floor == pytest.approx(0.9 * pair.audit_figure("acceptance_right"), abs=1e-3)
    weights = pair.draft_weights()
    assert all(isinstance(w, torch.Tensor) for w in weights.values()) and "fc.weight" in weights
    assert pair.target_config()["vocab_size"] == 48
    assert load_fixture("stride-dflash2").kind == "dflash2"
    assert load_fixture(pair.root).name == "stride-dflash"  # a folder works as well as a name
    with pytest.raises(FixtureError, match="no fixture 'nope'"):
        load_fixture("nope")


def test_a_constant_draft_fails_the_adapter_audit() -> None:
    """The audit can fail: a draft that ignores its context drafts one block forever."""
    contexts: list[DraftContext] = []

    def constant(context: DraftContext) -> list[int]:
        contexts.append(context)
        return [19] * (context.block_size - 1)

    report = audit_adapter(load_fixture("stride-dflash"), constant)
    assert not report.passed
    assert {f.name for f in report.failed} >= {"block_diversity", "context_sensitivity_reset", "acceptance_right"}
    assert {name for name, _ in report.not_measured} == set(NOT_MEASURED)  # never faked
    right = next(c for c in contexts if c.token_ids)
    assert right.features.shape == (len(right.token_ids), 128) and right.positions == tuple(range(len(right.token_ids)))
    assert any(not c.token_ids for c in contexts)  # the reset context was offered too


@pytest.mark.slow
@pytest.mark.reference
def test_the_examples_own_draft_passes_the_adapter_audit(tmp_path: Path) -> None:
    reference = os.environ.get("DFLASH_REFERENCE_PATH", str(REPO / ".cache" / "ref"))
    out = tmp_path / "audit.json"
    done = subprocess.run(
        [sys.executable, "-m", "verify", "fixtures", "audit", "--adapter", "refengine.audit:make_adapter",
         "--project", str(REPO / "examples" / "reference-engine"), "--json", str(out)],
        capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "PYTHONPATH": reference, "PYTHONDONTWRITEBYTECODE": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    figures = {f["name"]: f["value"] for f in json.loads(out.read_text())["figures"]}
    assert figures["context_sensitivity_reset"] >= 0.9 and figures["acceptance_right"] >= 2.5
    assert "not measured: weight_sensitivity" in done.stdout
