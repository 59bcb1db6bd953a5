"""Gate fixtures: the shipped fixture's manifest and its audit prompts."""

from __future__ import annotations

import json

import pytest
from gatekit import COPY, FIXTURE


@pytest.fixture(scope="session")
def manifest() -> dict:
    return json.loads((FIXTURE / "manifest.json").read_text())


@pytest.fixture(scope="session")
def prompts(manifest: dict) -> list[list[int]]:
    return [list(p) for p in manifest["audit_prompts"]]


@pytest.fixture(scope="session")
def copy_prompts() -> list[list[int]]:
    """The copy fixture's audit prompts: a 20-token segment and the first 1..5 tokens of its repeat."""
    return [list(p) for p in json.loads((COPY / "manifest.json").read_text())["audit_prompts"]]
