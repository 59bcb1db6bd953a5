"""Gate fixtures: the shipped fixture's manifest and its audit prompts."""

from __future__ import annotations

import json

import pytest
from gatekit import FIXTURE


@pytest.fixture(scope="session")
def manifest() -> dict:
    return json.loads((FIXTURE / "manifest.json").read_text())


@pytest.fixture(scope="session")
def prompts(manifest: dict) -> list[list[int]]:
    return [list(p) for p in manifest["audit_prompts"]]
