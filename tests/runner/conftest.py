"""Fixtures of the runner's tests: synthetic pairs whose draft often agrees with its target.

A random draft almost never guesses its random target's next token, so acceptance lengths would all be 1 and
any comparison of them blind. With a vocab of 8, random agreement is frequent: the pair below (found by a
small seed search, and re-checked by the tests that rely on it) accepts blocks of every length up to 5.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _use_the_real_runner_package() -> None:
    """Undoes a shadowing: without tests/__init__.py, pytest puts tests/ on sys.path, and there this folder,
    tests/runner/, is found as a namespace package `runner` before the editable install's finder runs. The
    submodules still load from runner/ (the finder maps them), but `from runner import Engine` fails.
    """
    module = sys.modules.get("runner")
    if module is None or getattr(module, "__file__", None) is not None:
        return
    spec = importlib.util.spec_from_file_location(
        "runner", REPO / "runner" / "__init__.py", submodule_search_locations=[str(REPO / "runner")]
    )
    assert spec is not None and spec.loader is not None
    real = importlib.util.module_from_spec(spec)
    sys.modules["runner"] = real
    for name, submodule in list(sys.modules.items()):
        if name.startswith("runner.") and name.count(".") == 1:
            setattr(real, name.split(".")[1], submodule)
    spec.loader.exec_module(real)


_use_the_real_runner_package()


AGREEING_PAIR = {"vocab_size": 8, "seed": 0}

Pair = tuple[Path, Path]


@pytest.fixture(scope="session")
def make_agreeing_pair(make_pair) -> Callable[..., Pair]:
    """make_pair with the agreeing pair's vocab and seed; other PairSpec fields may change."""
    return lambda **changes: make_pair(**{**AGREEING_PAIR, **changes})


@pytest.fixture(scope="session")
def agreeing_pair(make_agreeing_pair) -> Pair:
    """(target_dir, draft_dir) of a vocab-8 DFlash pair whose greedy acceptance lengths vary (1 to 5)."""
    return make_agreeing_pair()


@pytest.fixture(scope="session")
def agreeing_pair2(make_agreeing_pair) -> Pair:
    """The same kind of pair with a DFlash2 draft (candidate selector, dynamic convolutions)."""
    return make_agreeing_pair(kind="dflash2")
