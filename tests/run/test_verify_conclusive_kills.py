"""A statistical gate's red whose own p-value is conclusive stands on its first seed.

A gate states its red's p-value with pytest's `record_property("p_value", p)` (or a `p_value` on its
exception, as the gate kit's checks raise). A kill by statistical gates alone whose killer stated a p-value at
most `[tool.dflash] conclusive_p_value` needs neither the second seed nor the flake check's pristine re-run:
a correct engine turns it red that rarely, whatever makes the gate vary. A p-value above it, none stated, or
one stated by a gate outside `statistical_gates` changes nothing.
"""

from __future__ import annotations

import json
import math

import numpy
import pytest
import torch

from verify.gatekit import LawMismatch, assert_acceptance_rule_exact, proportion_p_value
from verify.gatekit.stats import ALPHA_GATE, TAIL_MARGIN, FitResult, case_level
from verify.report.verdict import Corroboration, GateOutcome, Outcome, Status
from verify.run.child.p_value import stated_p_value
from verify.run.phases.corroboration import AWAITING, Policy
from verify.run.phases.judge import verdict

COIN = "def value(seed):\n    return seed % 10\n\n\ndef double(x):\n    return 2 * x\n"
# test_law logs "value(5) double(2)" on every run: "5 4" on the unmutated tree, the mutant's values on a mutant.
GATES = """\
import pytest

from coin import double, value
from verify.seeds import reseed

LOG = {log!r}


@pytest.mark.gate
def test_law(record_property):
    with open(LOG, "a") as log:
        log.write(f"{{value(5)}} {{double(2)}}\\n")
    draw = value(reseed(0))
    record_property("p_value", {{7: 1e-12, 8: 1e-5}}.get(draw, 0.5))
    assert draw not in (7, 8), "the draw landed on a rejection cell"


@pytest.mark.gate
def test_double():
    assert double(2) == 4
"""
CATALOG = """\
from verify.mutation import Mutation, register

register(
    Mutation("stated-red", "red with a conclusive p-value", "coin.py", "return seed % 10", "return 7"),
    Mutation("weak-red", "red with a p-value above the threshold", "coin.py", "return seed % 10", "return 8"),
    Mutation("double-adds", "wrong operator", "coin.py", "return 2 * x", "return 2 + x + 1"),
)
"""
PYPROJECT = """\
[tool.pytest.ini_options]
addopts = "-q -p no:cacheprovider"
markers = ["gate: a gate"]

[tool.dflash]
mutation_modules = ["coin_mutations"]
source_roots = ["coin.py"]
gates = ["tests"]
jobs = 2
preload = []
invariant_errors = []
statistical_gates = ["tests/test_coin.py::test_law"]
writable = [{runs!r}]
"""


def test_a_conclusive_red_stands_on_its_first_seed_and_skips_the_flake_check(tmp_path, cli) -> None:
    root, runs = tmp_path / "project", tmp_path / "runs"
    (root / "tests").mkdir(parents=True)
    runs.mkdir()
    (root / "coin.py").write_text(COIN)
    (root / "tests" / "test_coin.py").write_text(GATES.format(log=str(runs / "law")))
    (root / "coin_mutations.py").write_text(CATALOG)
    (root / "pyproject.toml").write_text(PYPROJECT.format(runs=str(runs)))
    result = cli("--project", str(root), "--json", str(tmp_path / "report.json"))
    by_name = {m["name"]: m for m in json.loads((tmp_path / "report.json").read_text())["mutations"]}
    assert {n: (m["status"], m["attempts"]) for n, m in by_name.items()} == {
        "stated-red": ("killed", 1),
        "weak-red": ("killed", 2),
        "double-adds": ("killed", 1),
    }, result.output
    stated = by_name["stated-red"]
    assert stated["reason"] == (
        "statistical kill conclusive on one seed: tests/test_coin.py::test_law red at p-value 1.0e-12 <= 1e-09"
    )
    [law] = [o for o in stated["outcomes"] if o["gate_id"].endswith("test_law")]
    assert (law["outcome"], law["p_value"]) == ("assertion", 1e-12)
    assert by_name["weak-red"]["reason"].startswith("statistical kill confirmed"), "1e-5 is not conclusive"
    # test_law ran once on each mutant, twice on weak-red (its second seed), and on the unmutated tree in the
    # baseline alone: neither kill sent it to the flake check's pristine re-runs.
    assert sorted((runs / "law").read_text().splitlines()) == ["5 4", "5 5", "7 4", "8 4", "8 4"]
    assert result.exit_code == 0, result.output


def _outcome(gate_id: str, kind: Outcome, p_value: float | None) -> GateOutcome:
    return GateOutcome(gate_id, kind, 0.1, "AssertionError", "red", p_value)


@pytest.mark.parametrize(
    ("outcomes", "conclusive_p", "awaits"),
    [
        ((_outcome("s::law", Outcome.ASSERTION, 1e-12),), 1e-9, False),
        ((_outcome("s::law", Outcome.ASSERTION, 0.0),), 0.0, False),
        ((_outcome("s::law", Outcome.ASSERTION, 1e-8),), 1e-9, True),
        ((_outcome("s::law", Outcome.ASSERTION, None),), 1e-9, True),
        ((_outcome("s::law", Outcome.ASSERTION, 1e-12),), None, True),
        ((_outcome("s::law", Outcome.ASSERTION, 1e-8), _outcome("s::other", Outcome.REFUSAL, 0.0)), 1e-9, False),
    ],
    ids=["below", "impossible-at-0", "above", "none-stated", "off", "one-of-two-killers"],
)
def test_which_statistical_kills_need_a_second_seed(outcomes, conclusive_p, awaits) -> None:
    policy = Policy(("s::",), conclusive_p)
    killed = verdict("m", policy.resolve(outcomes, None), tuple(o.gate_id for o in outcomes), 0.2, 1)
    assert killed.status is Status.KILLED
    assert bool(policy.awaiting(killed)) is awaits
    recorded, is_final = policy.recorded(killed)
    assert is_final is not awaits, "an awaiting kill is never cached"
    if awaits:
        assert recorded.reason == AWAITING
    else:
        assert recorded.reason.startswith("statistical kill conclusive on one seed: "), recorded.reason


def test_only_a_statistical_gates_red_by_its_check_is_conclusive() -> None:
    crash = GateOutcome("s::law", Outcome.EXCEPTION, 0.1, "RuntimeError", "boom", 0.0)
    [weighed] = Policy(("s::",), 1e-9).resolve((crash,), None)
    assert weighed.corroboration is Corroboration.ONCE, "a crash's stated p-value says nothing"
    plain = _outcome("p::plain", Outcome.ASSERTION, 0.0)
    [weighed] = Policy(("s::",), 1e-9).resolve((plain,), None)
    assert weighed.corroboration is Corroboration.ONCE, "nor a gate's outside statistical_gates"
    [weighed] = Policy(("p::",), 1e-9).resolve((plain,), None)
    assert weighed.corroboration is Corroboration.CONCLUSIVE
    killed = verdict("m", (plain,), ("p::plain",), 0.2, 1)
    assert Policy(("s::",), 1e-9).recorded(killed) == (killed, True), "a plain kill stands as it is"


class _Stated(AssertionError):
    def __init__(self, p_value: object) -> None:
        super().__init__("red")
        self.p_value = p_value


@pytest.mark.parametrize(
    ("exc", "properties", "expected"),
    [
        (AssertionError("red"), [("p_value", 0.5), ("other", 1.0), ("p_value", 1e-20)], 1e-20),
        (_Stated(0.0), [("p_value", 0.5)], 0.0),
        (_Stated(numpy.float32(1e-3)), [], float(numpy.float32(1e-3))),
        (AssertionError("red"), [], None),
        (AssertionError("red"), [("p_value", True)], None),
        (AssertionError("red"), [("p_value", math.nan)], None),
        (AssertionError("red"), [("p_value", 1.5)], None),
        (AssertionError("red"), [("p_value", "1e-9")], None),
        (_Stated(-1e-9), [("p_value", 0.5)], None),
    ],
    ids=["last-recorded", "exception-first", "numpy", "none", "bool", "nan", "above-1", "text", "negative"],
)
def test_the_p_value_a_red_gate_states(exc, properties, expected) -> None:
    assert stated_p_value(exc, properties) == expected


def test_the_gate_kits_statistical_checks_state_their_p_value() -> None:
    p = torch.tensor([[0.5, 0.5], [0.5, 0.5]])
    q = torch.tensor([[0.9, 0.1]])

    def always_accept(p, q, drafted, generator):
        return 1, int(torch.multinomial(p[1], 1, generator=generator))

    with pytest.raises(LawMismatch) as red:
        assert_acceptance_rule_exact(always_accept, p, q, [0])
    assert isinstance(red.value, AssertionError) and red.value.p_value < 1e-30, red.value.p_value
    assert stated_p_value(red.value, []) == red.value.p_value


def test_a_fits_gate_p_value_is_on_the_scale_of_the_gates_false_alarm_rate() -> None:
    fit = FitResult(statistic=50.0, df=4, p_value=1e-12, alpha=case_level(3), num_draws=100, impossible=0, worst_cell=0)
    assert fit.gate_p_value == pytest.approx(1e-12 * 3 * TAIL_MARGIN)  # Bonferroni over 3 cases, with the margin
    loose = FitResult(statistic=50.0, df=4, p_value=1e-12, alpha=1e-2, num_draws=100, impossible=0, worst_cell=0)
    assert loose.gate_p_value == pytest.approx(1e-12 * TAIL_MARGIN), "never below the tail margin's share"
    impossible = FitResult(statistic=0.0, df=4, p_value=1.0, alpha=case_level(1), num_draws=100, impossible=1,
                           worst_cell=0)  # fmt: skip
    assert impossible.gate_p_value == 0.0
    assert FitResult(0.0, 4, 0.9, ALPHA_GATE, 100, 0, 0).gate_p_value == 1.0


@pytest.mark.parametrize("num_trials", [20, 200, 2000])
@pytest.mark.parametrize("probability", [0.1, 0.4])
def test_the_proportion_p_value_bounds_the_exact_binomial_tail(num_trials, probability) -> None:
    """Hoeffding's bound is at least the exact two-sided binomial tail at every deviation, deep tails included."""
    k = numpy.arange(num_trials + 1)
    log_pmf = (
        numpy.array([math.lgamma(num_trials + 1) - math.lgamma(i + 1) - math.lgamma(num_trials - i + 1) for i in k])
        + k * math.log(probability)
        + (num_trials - k) * math.log1p(-probability)
    )
    pmf = numpy.exp(log_pmf)
    for observed in range(0, num_trials + 1, max(1, num_trials // 40)):
        deviation = abs(observed / num_trials - probability)
        exact = float(pmf[numpy.abs(k / num_trials - probability) >= deviation - 1e-12].sum())
        assert proportion_p_value(num_trials, deviation) >= exact * (1 - 1e-9), (observed, exact)
    assert proportion_p_value(num_trials, 0.0) == 1.0
    assert proportion_p_value(4000, 0.21) < 1e-150
