"""Fixtures of the example's gates: the shipped stride-dflash pair through dflash-verify's fixture API, the
engine under test on it, and the upstream reference as the oracle.

The reference engine is PyPI `dflash==0.1.0` (`pip install dflash==0.1.0`). dflash-verify's own Makefile
installs it beside its venv (`pip install --no-deps --target .cache/ref`) and names that folder in
DFLASH_REFERENCE_PATH, so it goes on sys.path here before anything imports `dflash`.
"""

from __future__ import annotations

import os
import sys
import time

import pytest
import torch

_REFERENCE = os.environ.get("DFLASH_REFERENCE_PATH")
if _REFERENCE and _REFERENCE not in sys.path:
    sys.path.insert(0, _REFERENCE)

from verify import FixturePair, load_fixture  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def pair() -> FixturePair:
    return load_fixture("stride-dflash")


@pytest.fixture(scope="session")
def engine(pair: FixturePair):
    from refengine import SpecEngine

    return SpecEngine.from_folders(pair.target_dir, pair.draft_dir)


@pytest.fixture(scope="session")
def reference():
    """The upstream `dflash.model`; its stats timer needs CUDA, so it is timed with perf_counter on CPU."""
    import dflash.model

    if not torch.cuda.is_available():
        dflash.model._cuda_time = time.perf_counter
    return dflash.model
