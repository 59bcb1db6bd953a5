"""Gate: speculative decoding's first three output tokens follow plain sampling's law exactly (exactengine.py).

On the tiny 8-token pair, each setting's exact law of (t1, t2, t3) is enumerated from the target's logits by the
dense reference; the engine draws ENGINE_DRAWS (batched) or SOLO_DRAWS (one row at a time) seeded requests and
their counts are tested with a pooled Pearson chi-square at level 2.5e-4 (a false-alarm rate of at most 1e-3
per gate, verify/gatekit/stats.py; a draw of probability 0 fails at once). Settings: DFlash and DFlash2, T in {0.6, 1.0,
1.5, 3.0}, each without filters and with top-p 0.9 and top-k 5 together, verify blocks of 3 (two drafted
tokens: their joint acceptance and residuals) and of 2 (one drafted token and the bonus after it), over three
prompts.

A mixed batch per kind holds rows of two sampled settings (each its own temperature, filters, prompt and seeds)
and greedy rows, interleaved: each sampled group is tested against its own law (Bonferroni over the two), every
greedy row must be the greedy continuation. A row handed another row's parameters, temperature or q shows there
and nowhere else, since every other gate's rows share one setting.

The smallest total-variation distance over the 512 cells each gate detects with probability >= 0.99 (any
direction; verify/gatekit/stats.py) is listed in ENGINE_TV; test_exact_power.py recomputes it.
"""

from __future__ import annotations

import dataclasses

import pytest
from exactengine import PROMPTS, Setting, describe, engine_fit, greedy_continuation, mixed_counts, setting_law

from verify import case_level, pearson_fit, reseed

pytestmark = pytest.mark.gate

ENGINE_DRAWS = 800
SOLO_DRAWS = 240


def _batched() -> list[Setting]:
    settings, index = [], 0
    for kind in ("dflash", "dflash2"):
        for temperature in (0.6, 1.0, 1.5, 3.0):
            for top_p, top_k in ((1.0, 0), (0.9, 5)):
                block = 3 if index % 2 == 0 else 2
                settings.append(Setting(kind, temperature, top_p, top_k, block, PROMPTS[index % 3], seed=index))
                index += 1
    return settings


BATCHED = _batched()
SOLO = [
    Setting("dflash", 1.5, 0.9, 5, 3, PROMPTS[1], seed=100),
    Setting("dflash2", 0.6, 1.0, 0, 2, PROMPTS[2], seed=101),
]
# The smallest total-variation distance over (t1, t2, t3) each gate detects with probability >= 0.99, computed.
ENGINE_TV = {
    "dflash-t0.6-block3": 0.139,
    "dflash-t0.6-top-p0.9-top-k5-block2": 0.135,
    "dflash-t1.0-block3": 0.154,
    "dflash-t1.0-top-p0.9-top-k5-block2": 0.146,
    "dflash-t1.5-block3": 0.171,
    "dflash-t1.5-top-p0.9-top-k5-block2": 0.155,
    "dflash-t3.0-block3": 0.175,
    "dflash-t3.0-top-p0.9-top-k5-block2": 0.171,
    "dflash2-t0.6-block3": 0.132,
    "dflash2-t0.6-top-p0.9-top-k5-block2": 0.123,
    "dflash2-t1.0-block3": 0.163,
    "dflash2-t1.0-top-p0.9-top-k5-block2": 0.138,
    "dflash2-t1.5-block3": 0.168,
    "dflash2-t1.5-top-p0.9-top-k5-block2": 0.161,
    "dflash2-t3.0-block3": 0.175,
    "dflash2-t3.0-top-p0.9-top-k5-block2": 0.169,
}
SOLO_TV = {"dflash-t1.5-top-p0.9-top-k5-block3": 0.256, "dflash2-t0.6-block2": 0.221}


def _on_stream(setting: Setting) -> Setting:
    """The setting with its seed on the harness's stream (verify.seeds: unchanged unless DFLASH_GATE_SEED says)."""
    return dataclasses.replace(setting, seed=reseed(setting.seed))


@pytest.mark.parametrize("setting", BATCHED, ids=[s.id for s in BATCHED])
def test_exact_output_law_batched(setting: Setting, record_property) -> None:
    fit = engine_fit(_on_stream(setting), ENGINE_DRAWS, case_level(1), solo=False)
    record_property("p_value", fit.gate_p_value)  # read by `dflash verify` (docs/concepts/sampling-gates.md)
    assert fit.passed, "speculative output is not distributed as plain sampling: " + describe(setting, fit, False)


@pytest.mark.parametrize("setting", SOLO, ids=[s.id for s in SOLO])
def test_exact_output_law_solo(setting: Setting, record_property) -> None:
    fit = engine_fit(_on_stream(setting), SOLO_DRAWS, case_level(1), solo=True)
    record_property("p_value", fit.gate_p_value)
    assert fit.passed, "speculative output is not distributed as plain sampling: " + describe(setting, fit, True)


MIXED_DRAWS = 600  # per sampled group; a quarter as many greedy rows
MIXED = {
    kind: (Setting(kind, 0.6, 1.0, 0, 3, PROMPTS[0], seed=200), Setting(kind, 1.5, 0.9, 5, 3, PROMPTS[1], seed=201))
    for kind in ("dflash", "dflash2")
}
MIXED_GREEDY_PROMPT = PROMPTS[2]
# The smallest total-variation distance over (t1, t2, t3) each sampled group detects with probability >= 0.99.
MIXED_TV = {
    f"{kind}-{rest}": tv
    for kind in MIXED
    for rest, tv in (("t0.6-block3", 0.161), ("t1.5-top-p0.9-top-k5-block3", 0.185))
}


def mixed_fits(kind: str, num_draws: int = MIXED_DRAWS):
    """(each sampled group's fit, the greedy rows' outputs, the greedy continuation) of the kind's mixed batch."""
    settings = tuple(_on_stream(s) for s in MIXED[kind])
    counts, greedy = mixed_counts(kind, settings, MIXED_GREEDY_PROMPT, num_draws)
    fits = [
        pearson_fit(c, setting_law(s).flatten(), case_level(len(settings)))
        for c, s in zip(counts, settings, strict=True)
    ]
    return fits, greedy, greedy_continuation(MIXED_GREEDY_PROMPT)


@pytest.mark.parametrize("kind", list(MIXED))
def test_exact_output_law_mixed_batch(kind: str, record_property) -> None:
    fits, greedy, expected = mixed_fits(kind)
    wrong = [describe(s, f, solo=False) for s, f in zip(MIXED[kind], fits, strict=True) if not f.passed]
    record_property("p_value", min(f.gate_p_value for f in fits))  # Bonferroni over the two groups
    assert not wrong, f"rows of other settings in the batch change a row's law ({kind}):\n" + "\n".join(wrong)
    assert set(greedy) == {expected}, f"greedy rows beside sampled ones: {sorted(set(greedy))}, not {expected}"
