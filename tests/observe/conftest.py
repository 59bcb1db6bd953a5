"""The observed toy project, copied per test (its tree is never written)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

collect_ignore = ["toy"]

TOY = Path(__file__).parent / "toy"


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    shutil.copytree(TOY, tmp_path / "toy", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path / "toy"
