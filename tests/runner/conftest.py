"""Fixtures of the runner's tests: synthetic pairs whose draft often agrees with its target.

A random draft almost never guesses its random target's next token, so acceptance lengths would all be 1 and
any comparison of them blind. With a vocab of 8, random agreement is frequent: the pair below (found by a
small seed search, and re-checked by the tests that rely on it) accepts blocks of every length up to 5.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

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
