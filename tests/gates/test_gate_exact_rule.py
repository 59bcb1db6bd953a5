"""Gate: the acceptance rule's joint law over a block, exactly. For each enumerated case (exactcases.py: 12
DFlash cases, 7 DFlash2 cases) the rule the engine calls (runner.engine.rejection_accept, with p from
runner.engine.sampling_probs and q from runner.proposer's or the walk's sampling_probs) runs RULE_DRAWS = 2000
times from a fixed seed, and the counts of (acceptance length, token after it) are tested against the closed
form of speculative sampling (exactrule.py) with a pooled Pearson chi-square at level 1e-3 / (4 cases)
(Bonferroni with a margin for the chi-square tail: each gate's false-alarm rate is at most 1e-3, measured by
simulation in test_exact_power.py); a draw the closed form gives probability 0 fails at once.

Detectable total-variation distance (probability >= 0.99, any direction; verify/gatekit/stats.py): per case between
RULE_TV_RANGE[gate][0] and [1], over (acceptance length x token) of that case. tests/gates/test_exact_power.py
checks these figures and that the gates detect a family of perturbations of every term of the closed form.
"""

from __future__ import annotations

import dataclasses

import pytest
from exactcases import DFLASH2_CASES, DFLASH_CASES, RULE_DRAWS
from exactrule import rule_fits

from verify import reseed

pytestmark = pytest.mark.gate

RULE_GATES = {"dflash": DFLASH_CASES, "dflash2": DFLASH2_CASES}
# The smallest and largest per-case detectable total-variation distance (probability >= 0.99), computed.
RULE_TV_RANGE = {"dflash": (0.074, 0.098), "dflash2": (0.072, 0.092)}


@pytest.mark.parametrize("gate", list(RULE_GATES))
def test_exact_rule_joint_law(gate: str, record_property) -> None:
    # Each case's seed on the harness's stream (verify.seeds: unchanged unless DFLASH_GATE_SEED says).
    results = rule_fits([dataclasses.replace(c, seed=reseed(c.seed)) for c in RULE_GATES[gate]], RULE_DRAWS)
    failed = [r.describe() for r in results if not r.fit.passed]
    # The gate's p-value: its most extreme case's, Bonferroni over the cases (FitResult.gate_p_value).
    record_property("p_value", min(r.fit.gate_p_value for r in results))
    assert not failed, "the acceptance rule's joint law differs from speculative sampling's:\n" + "\n".join(failed)
