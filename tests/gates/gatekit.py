"""Helpers every gate shares: the shipped fixture's location, engines over it, and the comparison helper that
refuses to compare degenerate (constant) sequences.

Fixtures that run the engine are function-scoped: mutmut (`dflash sweep`) maps each runner function to the
tests that were running when it was called, so work done once in a module-scoped fixture would be credited to
the first test only, and a mutant would then be checked against that one test.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from runner import Engine, EngineConfig, SamplingParams

FIXTURES = Path(__file__).resolve().parents[2] / "runner" / "fixtures"
FIXTURE = FIXTURES / "stride-dflash"
FIXTURE2 = FIXTURES / "stride-dflash2"  # the DFlash2 pair: conv layers and the candidate walk
MAX_TOKENS = 24


def make_engine(draft: bool = True, fixture: Path = FIXTURE, **config: object) -> Engine:
    options = {"trace": True, **config}
    return Engine.from_pretrained(
        fixture / "target",
        fixture / "draft" if draft else None,
        config=EngineConfig(**options),  # type: ignore[arg-type]
    )


def greedy(max_tokens: int = MAX_TOKENS, **changes: object) -> SamplingParams:
    return SamplingParams(max_tokens=max_tokens, **changes)  # type: ignore[arg-type]


def assert_not_degenerate(blocks: Sequence[tuple[int, ...]], what: str) -> None:
    """A comparison arm must carry information: several steps, mostly distinct blocks, more than one id.

    A fixture that drafts the same block at every step makes any drafted-block comparison a tautology.
    """
    if len(blocks) < 3:
        pytest.fail(f"degenerate comparison refused: {what} has only {len(blocks)} drafted steps")
    distinct = len(set(blocks)) / len(blocks)
    ids = {t for b in blocks for t in b}
    if distinct < 0.5 or len(ids) < 3:
        pytest.fail(
            f"degenerate comparison refused: {what} drafts {len(set(blocks))} distinct blocks in {len(blocks)} "
            f"steps over {len(ids)} ids; a constant arm cannot tell a right context from a wrong one"
        )


def assert_same_drafts(actual: Sequence[tuple[int, ...]], expected: Sequence[tuple[int, ...]], what: str) -> None:
    assert_not_degenerate(actual, f"{what} (actual)")
    assert_not_degenerate(expected, f"{what} (expected)")
    for step, (a, e) in enumerate(zip(actual, expected, strict=False)):
        assert a == e, f"{what}: drafted block differs at step {step}: {a} != {e}"
    assert len(actual) == len(expected), f"{what}: {len(actual)} drafted steps != {len(expected)}"


def row_owners(engine: Engine, num_rows: int) -> list[int]:
    """The request ids in the rows of a forward call over `num_rows` rows, read from inside a forward hook: a
    call's rows are the last `num_rows` occupied rows (prefill adds rows at the end; decode runs them all)."""
    active = [r.request_id for r in engine.rows.requests[: engine.rows.num_rows] if r is not None]
    return active[len(active) - num_rows :]


def assert_refused(kind: type[Exception], match: str, call: Callable[[], object]) -> None:
    """The gate's check that `call` is refused by name: the named error with a matching message.

    Anything else escaping (a raw JSONDecodeError, a torch RuntimeError from a late shape check) is this check
    failing, so it is reported as an assertion, not left to escape as an unrelated exception.
    """
    try:
        call()
    except kind as error:
        assert re.search(match, str(error)), f"{kind.__name__} raised, but {str(error)!r} does not match {match!r}"
        return
    except Exception as error:
        got = f"{type(error).__name__}: {error}"
        raise AssertionError(f"expected a named {kind.__name__} ({match!r}), got {got}") from error
    raise AssertionError(f"expected a named {kind.__name__} ({match!r}); nothing was raised")
