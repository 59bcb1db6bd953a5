"""Power checks of the exact gates (tests, not gates): the statistics are right, the figures the gates state are
the computed ones, and each gate detects the perturbations (exactperturb.py) of the terms it claims, while the
unperturbed re-implementation passes it. A gate that loses its power fails here.

The perturbation amounts are stated with each family; each check runs the gate's own draws and seeds, so a
detection here is a fixed outcome on a given tree, not a chance.
"""

from __future__ import annotations

import inspect
import math
import textwrap

import pytest
import torch
from exactcases import RULE_DRAWS
from exactengine import engine_fit, setting_law, setting_power
from exactperturb import KnobRule, filtered, tempered
from exactrule import RulePipeline, case_inputs, case_power, closed_form, rule_fits
from test_gate_exact_engine import (
    BATCHED,
    ENGINE_DRAWS,
    ENGINE_TV,
    MIXED,
    MIXED_DRAWS,
    MIXED_TV,
    SOLO,
    SOLO_DRAWS,
    SOLO_TV,
    mixed_fits,
)
from test_gate_exact_rule import RULE_GATES, RULE_TV_RANGE

import runner.engine
import runner.proposer
import runner.sampling
from verify import ALPHA_GATE, case_level, pearson_fit
from verify import null_rate as _null_rate
from verify.gatekit.stats import chi2_isf, chi2_sf, ncx2_sf


def test_chi_square_tails() -> None:
    # Two degrees of freedom: the tail is exp(-x / 2) exactly.
    for alpha in (0.05, 1e-3, 1e-6):
        assert chi2_isf(alpha, 2) == pytest.approx(-2 * math.log(alpha), rel=1e-9)
    assert chi2_isf(0.05, 1) == pytest.approx(3.841459, rel=1e-6)
    assert chi2_sf(23.209251, 10) == pytest.approx(0.01, rel=1e-5)
    # The noncentral tail against a simulation of sum (Z_i + mu_i)^2 (200,000 draws: standard error < 0.0012).
    generator = torch.Generator().manual_seed(0)
    mu = torch.tensor([2.0, 1.0, 0.5, 0.0, 0.0])
    draws = ((torch.randn(200_000, 5, generator=generator, dtype=torch.float64) + mu) ** 2).sum(-1)
    for x in (5.0, 12.0, 20.0):
        assert ncx2_sf(x, 5, float((mu**2).sum())) == pytest.approx(float((draws > x).double().mean()), abs=0.006)
    assert ncx2_sf(11.07, 5, 0.0) == pytest.approx(chi2_sf(11.07, 5), rel=1e-9)


def test_pearson_fit_fails_a_draw_of_probability_zero_and_a_shifted_law() -> None:
    law = torch.tensor([0.5, 0.3, 0.2, 0.0], dtype=torch.float64)
    assert pearson_fit(torch.tensor([500, 300, 200, 0]), law, 1e-3).passed
    assert not pearson_fit(torch.tensor([500, 300, 199, 1]), law, 1e-3).passed
    assert not pearson_fit(torch.tensor([560, 260, 180, 0]), law, 1e-3).passed
    with pytest.raises(ValueError, match="nothing to test"):
        pearson_fit(torch.tensor([1000, 0]), torch.tensor([1.0, 0.0], dtype=torch.float64), 1e-3)


def test_stated_detectable_distances_are_the_computed_ones() -> None:
    for gate, cases in RULE_GATES.items():
        tv = [case_power(c, RULE_DRAWS, case_level(len(cases))) for c in cases]
        assert (round(min(tv), 3), round(max(tv), 3)) == RULE_TV_RANGE[gate], gate
    for settings, draws, stated in ((BATCHED, ENGINE_DRAWS, ENGINE_TV), (SOLO, SOLO_DRAWS, SOLO_TV)):
        assert {s.id: round(setting_power(s, draws, case_level(1)), 3) for s in settings} == stated
    mixed = {s.id: round(setting_power(s, MIXED_DRAWS, case_level(len(g))), 3) for g in MIXED.values() for s in g}
    assert mixed == MIXED_TV


NULL_REPS = 400_000  # a rate of 5e-4 is counted 200 times: its standard error is about 3.5e-5


def test_each_rule_gates_false_alarm_rate_is_at_most_its_stated_bound() -> None:
    for gate, cases in RULE_GATES.items():
        rates = []
        for index, case in enumerate(cases):
            drafted, *_ = case_inputs(case, RulePipeline(), torch.Generator().manual_seed(case.seed))
            rates.append(_null_rate(closed_form(case, drafted), RULE_DRAWS, case_level(len(cases)), NULL_REPS, index))
        assert 0 < sum(rates) <= ALPHA_GATE, (gate, sum(rates), rates)  # 0: a count that cannot fire is no check


def test_each_engine_gates_false_alarm_rate_is_at_most_its_stated_bound() -> None:
    for settings, draws in ((BATCHED, ENGINE_DRAWS), (SOLO, SOLO_DRAWS)):
        for index, setting in enumerate(settings):
            rate = _null_rate(setting_law(setting), draws, case_level(1), NULL_REPS, 100 + index)
            assert rate <= ALPHA_GATE, (setting.id, rate)


def _filters(**wrong: object):
    return lambda logits, temperature, top_p=1.0, top_k=0: filtered(logits, temperature, top_p, top_k, **wrong)


# (name, perturbation, {gate: the case that detects it}). Amounts: acceptance eps 0.1-0.15, residual eps 0.15-0.3,
# bonus eps 0.3, one uniform for all positions with probability 0.5, a temperature 15% off on one side, the
# filters wrong in three ways. Each check runs the gate's cases with its detecting case first and stops at the
# first case that fails: the gate detects the perturbation if any case does, so a check costs one case unless
# the named case lost its power (then the others are tried: slower, still honest).
RULE_PERTURBATIONS = [
    ("accept-0-eps0.1", KnobRule(accept_shift=(0.1, 0, 0)), {"dflash": "v4-n1-t1.0", "dflash2": "v4-n2-k2-t0.3"}),
    (
        "accept-1-eps0.1",
        KnobRule(accept_shift=(0, 0.1, 0)),
        {"dflash": "v4-n2-near-one", "dflash2": "v6-n2-k3-mass-off-candidates"},
    ),
    (
        "accept-2-eps0.15",
        KnobRule(accept_shift=(0, 0, 0.15)),
        {"dflash": "v5-n3-t1.5-top-p", "dflash2": "v7-n3-k3-t1.5-both"},
    ),
    (
        "residual-0-eps0.15",
        KnobRule(residual_mix=(0.15, 0, 0)),
        {"dflash": "v8-n3-t3.0", "dflash2": "v8-n3-k4-t3.0-top-p"},
    ),
    (
        "residual-1-eps0.3",
        KnobRule(residual_mix=(0, 0.3, 0)),
        {"dflash": "v4-n2-near-one", "dflash2": "v8-n3-k4-t3.0-top-p"},
    ),
    (
        "residual-2-eps0.3",
        KnobRule(residual_mix=(0, 0, 0.3)),
        {"dflash": "v5-n3-t1.5-top-p", "dflash2": "v7-n3-k3-t1.5-both"},
    ),
    ("bonus-from-q-eps0.3", KnobRule(bonus_mix=0.3), {"dflash": "v5-n2-p-equals-q", "dflash2": "v6-n2-k3-t1.0"}),
    ("shared-uniform-0.5", KnobRule(shared_uniform=0.5), {"dflash": "v8-n3-t3.0", "dflash2": "v6-n2-k3-t1.0"}),
    ("p-temperature-x1.15", tempered(1.15), {"dflash": "v8-n3-t3.0", "dflash2": "v8-n3-k4-t3.0-top-p"}),
    ("p-temperature-x0.87", tempered(1 / 1.15), {"dflash": "v8-n3-t3.0", "dflash2": "v8-n3-k4-t3.0-top-p"}),
    ("q-temperature-x1.15", tempered(1.15), {"dflash": "v8-n3-t2.0-both"}),
    ("walk-q-temperature-x1.15", tempered(1.15), {"dflash2": "v8-n3-k4-t3.0-top-p"}),
    (
        "p-not-renormalised",
        _filters(renormalise=False),
        {"dflash": "v8-n3-t2.0-both", "dflash2": "v8-n3-k4-t3.0-top-p"},
    ),
    (
        "p-filtered-before-temperature",
        _filters(filter_temperature=1.0),
        {"dflash": "v5-n3-t1.5-top-p", "dflash2": "v8-n3-k4-t3.0-top-p"},
    ),
    ("p-top-k-after-top-p", _filters(top_k_last=True), {"dflash": "v7-n3-t0.8-both", "dflash2": "v7-n3-k3-t1.5-both"}),
    ("q-not-renormalised", _filters(renormalise=False), {"dflash": "v5-n3-t1.5-top-p"}),
]


def _pipeline(name: str, change) -> RulePipeline:
    """The perturbation in its place: a knob rule replaces the rule; a probs function replaces p, q or the walk's q."""
    if isinstance(change, KnobRule):
        return RulePipeline(accept=change)
    if name.startswith("walk-q"):
        return RulePipeline(walk_probs=change)
    if name.startswith("q-"):
        return RulePipeline(draft_probs=change)
    return RulePipeline(target_probs=change)


def _first(cases: list, name: str) -> list:
    """The gate's cases with `name` first; a case's verdict does not depend on the order (each has its seed)."""
    assert any(c.name == name for c in cases), f"no case {name!r}"
    return sorted(cases, key=lambda c: c.name != name)


DETECTORS = sorted({(g, case) for _, _, found in RULE_PERTURBATIONS for g, case in found.items()})


@pytest.mark.parametrize(("gate", "case"), DETECTORS, ids=[f"{g}-{c}" for g, c in DETECTORS])
def test_unperturbed_reimplementation_passes(gate: str, case: str) -> None:
    """The control: the knob rule at zero, with p and q from exactperturb's own filter, is the closed form on
    every case a detection below relies on."""
    pipeline = RulePipeline(accept=KnobRule(), target_probs=_filters(), draft_probs=_filters(), walk_probs=_filters())
    cases = RULE_GATES[gate]
    (result,) = rule_fits(_first(cases, case)[:1], RULE_DRAWS, pipeline, alpha=case_level(len(cases)))
    assert result.fit.passed, result.describe()


@pytest.mark.parametrize(
    ("gate", "name", "change", "case"),
    [
        pytest.param(g, name, change, case, id=f"{g}-{name}")
        for name, change, found in RULE_PERTURBATIONS
        for g, case in found.items()
    ],
)
def test_rule_gate_detects(gate: str, name: str, change, case: str) -> None:
    results = rule_fits(_first(RULE_GATES[gate], case), RULE_DRAWS, _pipeline(name, change), stop_at_first=True)
    assert not results[-1].fit.passed, f"the {gate} rule gate no longer sees {name}"


def _setting(id_: str):
    return next(s for s in [*BATCHED, *SOLO] if s.id == id_)


def _q_sharpened(factor: float):
    """The rule gets q at temperature T / factor while the draft drew from q at T."""

    def accept(drafted, target_probs, draft_probs, draft_indices, generator):
        sharpened = draft_probs.double() ** factor
        sharpened = (sharpened / sharpened.sum(-1, keepdim=True)).float()
        return runner.sampling.rejection_accept(drafted, target_probs, sharpened, draft_indices, generator)

    return accept


# (name, the batched gate it runs on, {runner.engine attribute: replacement}). Each runs that engine gate's own
# core (its draws, seeds and level) with the runner patched. The engine gates claim the end-to-end law at the
# distances ENGINE_TV states; their per-term power is the rule gates' (above). Amounts: the bonus from q, q
# handed at T / 2 while drawn at T, the verify step's p at T * 1.2 (prefill right). Each is detected at every
# one of ten other seeds of its setting; one uniform for the block and residuals mixed half with p were detected
# at about half of them (the engine's 800 draws over 512 cells are too few for those), so they are the rule
# gates' alone.
ENGINE_PERTURBATIONS = [
    ("bonus-from-q", "dflash-t0.6-top-p0.9-top-k5-block2", {"rejection_accept": KnobRule(bonus_mix=1.0)}),
    ("q-handed-at-half-temperature", "dflash-t1.0-block3", {"rejection_accept": _q_sharpened(2.0)}),
    ("verify-p-temperature-x1.2", "dflash2-t0.6-block3", {"sampling_probs": tempered(1.2, only_blocks=True)}),
]


@pytest.mark.parametrize(("setting_id", "patches"), [pytest.param(s, p, id=n) for n, s, p in ENGINE_PERTURBATIONS])
def test_engine_gate_detects(monkeypatch: pytest.MonkeyPatch, setting_id: str, patches: dict) -> None:
    for name, replacement in patches.items():
        monkeypatch.setattr(runner.engine, name, replacement)
    setting = _setting(setting_id)
    fit = engine_fit(setting, ENGINE_DRAWS, case_level(1), solo=False)
    assert not fit.passed, f"the engine gate {setting_id} no longer sees this perturbation"


def test_verify_filter_perturbation_is_detected(monkeypatch: pytest.MonkeyPatch) -> None:
    """The verify step's p without its filters (prefill keeps them) on a filtered setting."""
    original = runner.engine.sampling_probs
    monkeypatch.setattr(
        runner.engine,
        "sampling_probs",
        lambda logits, t, top_p=1.0, top_k=0: (
            original(logits, t) if logits.dim() == 2 else original(logits, t, top_p, top_k)
        ),
    )
    fit = engine_fit(_setting("dflash2-t1.0-top-p0.9-top-k5-block2"), ENGINE_DRAWS, case_level(1), solo=False)
    assert not fit.passed, "the engine gate no longer sees the verify step's p without its filters"


def _rewritten(owner: object, name: str, old: str, new: str):
    """`owner.name` recompiled from its source with `old` replaced by `new` (once, or the check is void)."""
    function = inspect.unwrap(getattr(owner, name))
    source = textwrap.dedent(inspect.getsource(function))
    assert source.count(old) == 1, f"{name}: {old!r} is no longer in its source: rewrite this power check"
    namespace: dict[str, object] = {}
    exec(compile(source.replace(old, new), f"<{name} perturbed>", "exec"), vars(inspect.getmodule(function)), namespace)
    return namespace[name]


# Bugs of a row reading another row's settings: every other gate's rows share one setting, so only the mixed batch
# can see them. Each is built from the runner's own source with one line changed, in the test.
ROW_PERTURBATIONS = [
    ("verify-params-of-row-0", "dflash", runner.engine.Engine, "_decode", "p = r.params", "p = requests[0].params"),
    ("prefill-params-of-row-0", "dflash", runner.engine.Engine, "_prefill", "enumerate(r.params for r in requests)",
     "enumerate(requests[0].params for r in requests)"),
    ("walk-temperature-of-row-0", "dflash2", runner.proposer, "_walk", "[r.params.temperature for r in requests]",
     "[requests[0].params.temperature for r in requests]"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "owner", "name", "old", "new"), [pytest.param(*p[1:], id=p[0]) for p in ROW_PERTURBATIONS]
)
def test_mixed_batch_gate_detects(
    monkeypatch: pytest.MonkeyPatch, kind: str, owner, name: str, old: str, new: str
) -> None:
    monkeypatch.setattr(owner, name, _rewritten(owner, name, old, new))
    fits, greedy, expected = mixed_fits(kind)
    assert not all(f.passed for f in fits) or set(greedy) != {expected}, f"the mixed {kind} gate no longer sees it"
