"""The progress log says how many mutations were decided before any child (not reached by a gate, cached,
stale), so "0 to run" beside a listed mutation never reads as one forgotten."""

from __future__ import annotations

import pytest


def test_the_mutations_phase_counts_those_decided_without_a_child(toy_copy, cli, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CI", "1")  # plain progress lines, as in a CI log
    root = toy_copy()
    result = cli("--project", str(root), "-m", "orphan-unreached", "-m", "sub-swaps-operands", "--no-cache")
    assert "mutations (1 decided without a child): 1 to run" in result.output, result.output

    alone = cli("--project", str(root), "-m", "orphan-unreached", "--no-cache")
    assert "mutations (1 decided without a child): 0 to run" in alone.output, alone.output
