"""Shared test fixtures: synthetic checkpoint pairs, the upstream reference oracle, the gpu marker, and the engine
tests' builders (tests/builders.py: the toy project, the hostile project, the CLI, the registry reset)."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest
import torch

from tests.builders import cli, fresh_registry, hash_tree, hostile_project, toy_copy, toy_run  # noqa: F401
from verify.fixtures.synthetic import PairSpec, write_pair

collect_ignore = ["toy_project"]  # the toy project's gates are data for the engine tests (tests/builders.py)

REPO = Path(__file__).resolve().parents[1]

torch.set_num_threads(1)  # two-core machines: intra-op threads only oversubscribe


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def reference():
    """The upstream `dflash.model` (PyPI dflash==0.1.0), installed by the Makefile beside the venv."""
    path = os.environ.get("DFLASH_REFERENCE_PATH", str(REPO / ".cache" / "ref"))
    if not (Path(path) / "dflash" / "model.py").is_file():
        pytest.fail(f"the reference dflash==0.1.0 is not installed at {path}; run `make install`")
    if path not in sys.path:
        sys.path.insert(0, path)
    return importlib.import_module("dflash.model")


@pytest.fixture(scope="session")
def make_pair(tmp_path_factory: pytest.TempPathFactory):
    """Writes (once per spec) a random target + draft pair as HF folders; returns (target_dir, draft_dir)."""
    made: dict[PairSpec, tuple[Path, Path]] = {}

    def make(**changes: object) -> tuple[Path, Path]:
        spec = PairSpec(**changes)  # type: ignore[arg-type]
        if spec not in made:
            made[spec] = write_pair(tmp_path_factory.mktemp("pair"), spec)
        return made[spec]

    return make
