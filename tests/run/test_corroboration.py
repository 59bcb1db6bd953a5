"""The corroboration policy as pure functions over records: how many independent reds make a kill.

No child runs here: each rule is checked on hand-made outcomes, and every corroborated record round-trips through
the JSON the cache and the reports write, so a replayed verdict is the one reached.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from verify.report.decode import result_from_dict
from verify.report.verdict import Corroboration, GateOutcome, MutationResult, Outcome, Status
from verify.run.phases.cache import ResultCache
from verify.run.phases.corroboration import AWAITING, Policy, may_replay, needs_second_attempt
from verify.run.phases.judge import verdict

POLICY = Policy(("s::",), 1e-9)


def _o(gate_id: str, outcome: Outcome, exc_type: str = "", p_value: float | None = None) -> GateOutcome:
    return GateOutcome(gate_id, outcome, 0.1, exc_type, "m", p_value)


def _judged(*outcomes: GateOutcome, attempts: int = 1) -> MutationResult:
    return verdict("m", outcomes, tuple(o.gate_id for o in outcomes), 0.1, attempts)


@pytest.mark.parametrize(
    ("outcomes", "again"),
    [
        ((_o("p::a", Outcome.PASSED),), False),
        ((_o("p::a", Outcome.ASSERTION, "AssertionError"), _o("p::b", Outcome.EXCEPTION, "E")), False),
        ((_o("p::a", Outcome.EXCEPTION, "E"),), True),
        ((_o("p::a", Outcome.TIMEOUT, "Timeout"),), True),
        ((_o("p::a", Outcome.INVARIANT, "Named"),), True),
        ((_o("p::a", Outcome.NOT_RUN, "Interrupted"),), True),
    ],
    ids=["green", "a-check-decides", "crash", "hang", "invariant", "not-run"],
)
def test_which_first_attempts_need_a_second_child(outcomes, again) -> None:
    assert needs_second_attempt(outcomes) is again


@pytest.mark.parametrize(
    ("first", "second", "outcome", "corroboration"),
    [
        (Outcome.EXCEPTION, Outcome.EXCEPTION, Outcome.EXCEPTION, Corroboration.REPEATED),
        (Outcome.TIMEOUT, Outcome.TIMEOUT, Outcome.TIMEOUT, Corroboration.REPEATED),
        (Outcome.EXCEPTION, Outcome.PASSED, Outcome.NOT_RUN, Corroboration.UNCONFIRMED),
        (Outcome.EXCEPTION, Outcome.TIMEOUT, Outcome.NOT_RUN, Corroboration.UNCONFIRMED),
        (Outcome.EXCEPTION, Outcome.ASSERTION, Outcome.ASSERTION, Corroboration.ONCE),
        (Outcome.NOT_RUN, Outcome.EXCEPTION, Outcome.NOT_RUN, Corroboration.UNCONFIRMED),
        (Outcome.NOT_RUN, Outcome.PASSED, Outcome.PASSED, Corroboration.ONCE),
        (Outcome.NOT_RUN, Outcome.NOT_RUN, Outcome.NOT_RUN, Corroboration.ONCE),
    ],
    ids=["crash-twice", "hang-twice", "crash-then-green", "red-two-ways", "then-a-check", "retried-red-once",
         "retried-green", "not-run-twice"],
)  # fmt: skip
def test_a_crash_or_hang_counts_only_when_a_second_child_sees_it_again(first, second, outcome, corroboration):
    [resolved] = POLICY.resolve((_o("p::a", first, "E1"),), (_o("p::a", second, "E2"),))
    assert (resolved.outcome, resolved.corroboration) == (outcome, corroboration), resolved
    if corroboration is Corroboration.UNCONFIRMED:
        # The red it was keeps its own exception type: no made-up type name says "unconfirmed".
        assert resolved.exc_type in ("E1", "E2") and _judged(resolved, attempts=2).status is Status.ERROR


@pytest.mark.parametrize(
    ("gate_id", "outcome", "p_value", "corroboration"),
    [
        ("s::law", Outcome.ASSERTION, 1e-12, Corroboration.CONCLUSIVE),
        ("s::law", Outcome.REFUSAL, 1e-9, Corroboration.CONCLUSIVE),
        ("s::law", Outcome.ASSERTION, 1e-8, Corroboration.ONCE),
        ("s::law", Outcome.ASSERTION, None, Corroboration.ONCE),
        ("s::law", Outcome.EXCEPTION, 0.0, Corroboration.ONCE),
        ("p::plain", Outcome.ASSERTION, 0.0, Corroboration.ONCE),
    ],
    ids=["below", "at-the-threshold", "above", "none-stated", "a-crash", "not-statistical"],
)
def test_only_a_statistical_check_with_a_small_enough_p_value_is_conclusive(gate_id, outcome, p_value, corroboration):
    [weighed] = POLICY.resolve((_o(gate_id, outcome, "X", p_value),), None)
    assert weighed.corroboration is corroboration
    [off] = Policy(("s::",), None).resolve((_o(gate_id, outcome, "X", p_value),), None)
    assert off.corroboration is Corroboration.ONCE, "no conclusive p-value: nothing stands alone"


def test_which_kills_await_a_second_seed() -> None:
    red = _o("s::law", Outcome.ASSERTION, "AssertionError")
    assert POLICY.awaiting(_judged(red)) == ("s::law",)
    assert POLICY.awaiting(_judged(red, _o("p::plain", Outcome.ASSERTION, "AssertionError"))) == ()
    assert POLICY.awaiting(_judged(*POLICY.resolve((dataclasses.replace(red, p_value=0.0),), None))) == ()
    assert POLICY.awaiting(dataclasses.replace(_judged(red), cached=True)) == (), "a replayed verdict was final"
    assert POLICY.awaiting(_judged(dataclasses.replace(red, corroboration=Corroboration.RESEEDED))) == ()
    assert Policy().awaiting(_judged(red)) == (), "no statistical gates: no kill awaits"


def test_the_second_seed_runs_the_killers_and_the_gates_never_reached() -> None:
    first = _judged(_o("p::a", Outcome.PASSED), _o("s::law", Outcome.ASSERTION, "AssertionError"))
    assert POLICY.second_seed_gates(first, ("p::a", "s::law", "p::b", "s::c")) == ("s::law", "p::b", "s::c")


@pytest.mark.parametrize(
    ("again", "outcome", "corroboration", "status"),
    [
        (Outcome.ASSERTION, Outcome.ASSERTION, Corroboration.RESEEDED, Status.KILLED),
        (Outcome.PASSED, Outcome.PASSED, Corroboration.CHANCE, Status.SURVIVED),
        (Outcome.EXCEPTION, Outcome.NOT_RUN, Corroboration.UNCONFIRMED, Status.ERROR),
        (Outcome.NOT_RUN, Outcome.NOT_RUN, Corroboration.UNCONFIRMED, Status.ERROR),
    ],
    ids=["red-again", "green-there", "crashed-there", "lost-there"],
)
def test_what_the_second_seed_establishes(again, outcome, corroboration, status) -> None:
    first = (_o("s::law", Outcome.ASSERTION, "AssertionError"),)
    [seeded] = POLICY.reseeded(first, ("s::law",), (_o("s::law", again, "X"),))
    assert (seeded.outcome, seeded.corroboration) == (outcome, corroboration)
    judged = _judged(seeded, attempts=2)
    assert judged.status is status
    assert POLICY.awaiting(judged) == (), "one seed settles it"


def test_one_killer_red_again_on_the_second_seed_is_enough() -> None:
    """Of two statistical killers, one red again keeps the kill (by it alone); the other's red was chance."""
    first = (_o("s::a", Outcome.ASSERTION, "AssertionError"), _o("s::b", Outcome.ASSERTION, "AssertionError"))
    again = (_o("s::a", Outcome.ASSERTION, "AssertionError"), _o("s::b", Outcome.PASSED))
    seeded = POLICY.reseeded(first, ("s::a", "s::b"), again)
    assert [o.corroboration for o in seeded] == [Corroboration.RESEEDED, Corroboration.CHANCE]
    judged = _judged(*seeded, attempts=2)
    assert (judged.status, judged.killed_by) == (Status.KILLED, ("s::a",))
    assert judged.reason == "statistical kill confirmed: s::a red again on an independent gate seed"
    assert POLICY.recorded(judged) == (judged, True)


def test_a_gate_first_seen_on_the_second_seed_counts_as_one_attempt() -> None:
    first = (_o("s::law", Outcome.ASSERTION, "AssertionError"),)
    again = (
        _o("s::law", Outcome.PASSED),
        _o("p::new", Outcome.ASSERTION, "AssertionError"),
        _o("s::stated", Outcome.ASSERTION, "AssertionError", 1e-12),
        _o("p::crash", Outcome.EXCEPTION, "RuntimeError"),
    )
    seeded = {o.gate_id: o for o in POLICY.reseeded(first, ("s::law",), again)}
    assert {g: (o.outcome, o.corroboration) for g, o in seeded.items()} == {
        "s::law": (Outcome.PASSED, Corroboration.CHANCE),
        "p::new": (Outcome.ASSERTION, Corroboration.ONCE),
        "s::stated": (Outcome.ASSERTION, Corroboration.CONCLUSIVE),
        "p::crash": (Outcome.NOT_RUN, Corroboration.UNCONFIRMED),
    }
    # After the second seed, the red it saw once is flake-checked; the conclusive one needs no re-run.
    assert POLICY.flake_suspects([_judged(*seeded.values(), attempts=2)], seed_to_come=False) == {"p::new"}


def test_the_flake_check_rechecks_every_red_but_those_seen_enough() -> None:
    first, again = _o("s::seen", Outcome.ASSERTION, "A"), _o("s::seen", Outcome.REFUSAL, "B")
    seen = POLICY.reseeded((first,), ("s::seen",), (again,))
    results = [
        _judged(_o("s::law", Outcome.ASSERTION, "AssertionError"), _o("p::crash", Outcome.EXCEPTION, "E")),
        _judged(*POLICY.resolve((_o("s::stated", Outcome.ASSERTION, "AssertionError", 0.0),), None)),
        _judged(_o("p::plain", Outcome.ASSERTION, "AssertionError"), _o("p::green", Outcome.PASSED)),
        _judged(*seen, attempts=2),
    ]
    assert POLICY.flake_suspects(results, seed_to_come=True) == {"p::crash", "p::plain"}
    assert POLICY.flake_suspects(results, seed_to_come=False) == {"s::law", "p::crash", "p::plain"}


def test_what_a_run_records_and_may_cache() -> None:
    awaiting = _judged(_o("s::law", Outcome.ASSERTION, "AssertionError"))
    assert POLICY.recorded(awaiting) == (dataclasses.replace(awaiting, reason=AWAITING), False)
    conclusive = _judged(*POLICY.resolve((_o("s::law", Outcome.ASSERTION, "AssertionError", 1e-12),), None))
    recorded, is_final = POLICY.recorded(conclusive)
    assert is_final and recorded.reason == (
        "statistical kill conclusive on one seed: s::law red at p-value 1.0e-12 <= 1e-09"
    )
    crashed = _judged(*POLICY.resolve((_o("p::a", Outcome.EXCEPTION, "E"),), (_o("p::a", Outcome.EXCEPTION, "E"),)))
    assert crashed.status is Status.CRASHED and POLICY.recorded(crashed) == (crashed, False)
    assert [s for s in Status if may_replay(s)] == [Status.KILLED, Status.CAUGHT, Status.SURVIVED]


def _every_corroboration() -> list[MutationResult]:
    red = _o("s::law", Outcome.ASSERTION, "AssertionError", 1e-12)
    seeded = POLICY.reseeded((_o("s::law", Outcome.ASSERTION, "A"),), ("s::law",), (_o("s::law", Outcome.PASSED),))
    return [
        _judged(*POLICY.resolve((red,), None)),
        _judged(*POLICY.reseeded((red,), ("s::law",), (red,)), attempts=2),
        _judged(*seeded, attempts=2),
        _judged(*POLICY.resolve((_o("p::a", Outcome.INVARIANT, "N"),), (_o("p::a", Outcome.INVARIANT, "N"),))),
    ]


@pytest.mark.parametrize("result", _every_corroboration(), ids=["conclusive", "reseeded", "chance", "repeated"])
def test_a_corroborated_verdict_round_trips_through_the_cache(tmp_path, result) -> None:
    assert result_from_dict(json.loads(json.dumps(dataclasses.asdict(result)))) == result
    cache = ResultCache(tmp_path)
    cache.put("k", result)
    hit = cache.get("k")
    assert hit == dataclasses.replace(result, cached=True)
    # Rejudging the replayed outcomes reaches the same verdict and reason: the state is on the outcomes.
    assert verdict(hit.name, hit.outcomes, hit.ran, hit.duration_s, hit.attempts) == result
