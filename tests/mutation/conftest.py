"""Tests of applying a mutation: every test starts and ends with an empty mutation registry (tests/builders.py holds the
toy and hostile projects these tests share)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _fresh_registry(fresh_registry: None) -> None:
    """The registry reset (`fresh_registry`) around every test of this folder."""
