"""Engine tests: the toy project's gates are data for the engine, never collected by this run."""

from __future__ import annotations

import pytest

from verify.mutation import reset_registry

collect_ignore = ["toy_project"]


@pytest.fixture(autouse=True)
def _fresh_registry():
    reset_registry()
    yield
    reset_registry()
