"""The kit meets the rules engines write: each adapter passes a correct rule and fails a mutated one; the stop law
check passes a step that cuts at the stop token and fails, with a stated p-value, one that does not; and the
kit's draws follow the run's gate seed (the same numbers twice on one stream, new ones on the confirming one)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy
import pytest
import torch

from verify.gatekit import (
    LawMismatch,
    NotALaw,
    assert_acceptance_rule_exact,
    assert_first_token_law,
    assert_stop_law,
    batched,
    global_generator,
    log_space,
    loop_step,
    numpy_rule,
    stop_law,
)
from verify.seeds import CONFIRM_SEED, GATE_SEED_ENV

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "lookup-engine"))
from lookupspec.accept import accept  # noqa: E402  (the example engine's rule)


def _case(seed: int = 1, num_draft: int = 2, vocab: int = 6) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The reference page's case: p [n + 1, V], q near it [n, V], drafts from q."""
    g = torch.Generator().manual_seed(seed)
    logits = 1.5 * torch.randn(num_draft + 1, vocab, generator=g)
    p = torch.softmax(logits, -1)
    q = torch.softmax(logits[:num_draft] + torch.randn(num_draft, vocab, generator=g), -1)
    return p, q, torch.multinomial(q, 1, generator=g)[:, 0]


# ---- rules as engines write them: a correct one and one with the ratio inverted, per adapter -------------------


def _global(p, q, drafted, inverted=False):  # torch's global generator: no generator= anywhere
    for i, x in enumerate(drafted.tolist()):
        ratio = q[i, x] / p[i, x] if inverted else p[i, x] / q[i, x]
        if float(torch.rand(())) >= float(ratio):
            return i, int(torch.multinomial((p[i] - q[i]).clamp(min=0), 1))
    return len(drafted), int(torch.multinomial(p[-1], 1))


def _log(log_p, log_q, drafted, generator, inverted=False):  # log-probabilities
    for i, x in enumerate(drafted.tolist()):
        log_ratio = log_q[i, x] - log_p[i, x] if inverted else log_p[i, x] - log_q[i, x]
        if float(torch.rand((), generator=generator, dtype=torch.float64).log()) >= float(log_ratio):
            residual = (log_p[i].exp() - log_q[i].exp()).clamp(min=0)
            return i, int(torch.multinomial(residual, 1, generator=generator))
    return len(drafted), int(torch.multinomial(log_p[-1].exp(), 1, generator=generator))


def _beams(p, q, drafted, generator, inverted=False):  # a batch of rows [B, ...]: per-row results
    out = [accept(p[b], q[b], drafted[b], generator) if not inverted else _inverted(p[b], q[b], drafted[b], generator)
           for b in range(p.shape[0])]  # fmt: skip
    return torch.tensor([a for a, _ in out]), torch.tensor([y for _, y in out])


def _inverted(p, q, drafted, generator):  # the example's rule with q / p for p / q
    for i, x in enumerate(drafted.tolist()):
        if float(torch.rand((), generator=generator)) >= float(q[i, x] / p[i, x]):
            return i, int(torch.multinomial((p[i] - q[i]).clamp(min=0), 1, generator=generator))
    return len(drafted), int(torch.multinomial(p[-1], 1, generator=generator))


def _step(p, q, drafted, generator, inverted=False):  # one step of a generation loop: the tokens it appends
    accepted, token = (_inverted if inverted else accept)(p, q, drafted, generator)
    return [*drafted[:accepted].tolist(), token]


def _numpy(p, q, drafted, rng, inverted=False):  # numpy rows and a numpy Generator
    for i, x in enumerate(drafted):
        ratio = q[i, x] / p[i, x] if inverted else p[i, x] / q[i, x]
        if rng.random() >= ratio:
            residual = numpy.clip(p[i] - q[i], 0, None)
            return i, int(rng.choice(len(residual), p=residual / residual.sum()))
    return len(drafted), int(rng.choice(p.shape[1], p=p[-1]))


ADAPTED = {
    "global generator": lambda inverted: global_generator(lambda p, q, d: _global(p, q, d, inverted)),
    "log space": lambda inverted: log_space(lambda lp, lq, d, g: _log(lp, lq, d, g, inverted)),
    "batched (beams)": lambda inverted: batched(lambda p, q, d, g: _beams(p, q, d, g, inverted)),
    "generation loop step": lambda inverted: loop_step(lambda p, q, d, g: _step(p, q, d, g, inverted)),
    "numpy": lambda inverted: numpy_rule(lambda p, q, d, rng: _numpy(p, q, d, rng, inverted)),
}


@pytest.mark.parametrize("kind", ADAPTED, ids=list(ADAPTED))
def test_each_adapter_passes_the_right_rule_and_fails_an_inverted_ratio(kind: str) -> None:
    p, q, drafted = _case()
    before = torch.get_rng_state()
    result = assert_acceptance_rule_exact(ADAPTED[kind](False), p, q, drafted)
    assert result.passed and result.fit.detectable_tv < 0.1
    assert torch.equal(torch.get_rng_state(), before)  # the global generator is the caller's, untouched
    with pytest.raises(LawMismatch, match="joint law differs") as red:
        assert_acceptance_rule_exact(ADAPTED[kind](True), p, q, drafted)
    assert red.value.p_value < 1e-6


def test_a_step_whose_prefix_is_not_the_drafts_is_named() -> None:
    p, q, drafted = _case()
    wrong = loop_step(lambda p, q, d, g: [int(d[0]) + 1, 0])
    with pytest.raises(AssertionError, match="are not the drafted"):
        assert_acceptance_rule_exact(wrong, p, q, drafted)


# ---- the stop law -----------------------------------------------------------------------------------------------

STOP = 3


def _stop_case() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    p, q, drafted = _case(seed=4, num_draft=3, vocab=5)
    return p, q, torch.tensor([int(drafted[0]), STOP, int(drafted[2])])


def _cut(tokens: list[int]) -> list[int]:
    return tokens[: tokens.index(STOP) + 1] if STOP in tokens else tokens


def _engine_step(p, q, drafted, generator):  # the right one: the block ends at its first stop token
    accepted, token = accept(p, q, drafted, generator)
    return _cut([*drafted[:accepted].tolist(), token])


def _stop_sometimes_rejected(p, q, drafted, generator):  # an accepted drafted stop is rejected 15% of the time
    accepted, token = accept(p, q, drafted, generator)
    tokens = [*drafted[:accepted].tolist(), token]
    if STOP in tokens[:accepted] and float(torch.rand((), generator=generator)) < 0.15:
        k = tokens.index(STOP)
        residual = (p[k] - q[k]).clamp(min=0)
        return [*tokens[:k], int(torch.multinomial(residual, 1, generator=generator))]
    return _cut(tokens)


def test_the_stop_law_cuts_the_block_at_its_first_stop_token() -> None:
    p, q, drafted = _stop_case()
    law = stop_law(p, q, drafted, STOP)
    assert abs(float(law.sum()) - 1) < 1e-6 and float(law[2:].sum()) == 0.0  # nothing past the stop at 1
    result = assert_stop_law(_engine_step, p, q, drafted, STOP)
    assert result.passed


def test_the_stop_law_fails_a_step_that_goes_on_past_the_stop_and_one_that_rejects_it_too_often() -> None:
    p, q, drafted = _stop_case()
    no_cut = lambda p, q, d, g: _step(p, q, d, g)  # noqa: E731  (appends past the stop)
    with pytest.raises(LawMismatch, match="stop token 3") as red:
        assert_stop_law(no_cut, p, q, drafted, STOP)
    assert red.value.p_value == 0.0  # a draw of probability 0: no correct engine makes one
    with pytest.raises(LawMismatch, match=r"p-value \d") as red:
        assert_stop_law(_stop_sometimes_rejected, p, q, drafted, STOP)
    assert "0 draws of probability 0" in str(red.value) and 0 < red.value.p_value < 1e-6  # by the fit alone


# ---- the run's gate seed ----------------------------------------------------------------------------------------


def _draws_of_the_reference_gate() -> tuple[list[int], list[int]]:
    """The reference page's gates, as written there (no seed= passed), recording what they drew."""
    p, q, drafted = _case()
    tokens: list[int] = []

    def recording(p, q, drafted, generator):
        accepted, token = accept(p, q, drafted, generator)
        tokens.append(token)
        return accepted, token

    assert_acceptance_rule_exact(recording, p, q, drafted)
    seeds: list[int] = []
    law = torch.full((4,), 0.25, dtype=torch.float64)

    def first(seed: int) -> int:
        seeds.append(seed)
        return int(torch.multinomial(law, 1, generator=torch.Generator().manual_seed(seed)))

    assert_first_token_law(first, law, num_draws=400)
    return tokens, seeds


def test_a_gate_written_as_the_reference_shows_follows_the_runs_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(GATE_SEED_ENV, raising=False)
    plain = _draws_of_the_reference_gate()
    monkeypatch.setenv(GATE_SEED_ENV, "0")
    assert _draws_of_the_reference_gate() == plain  # the verify run's first pass: what plain pytest draws
    monkeypatch.setenv(GATE_SEED_ENV, str(CONFIRM_SEED))
    confirming = _draws_of_the_reference_gate()
    assert confirming == _draws_of_the_reference_gate()  # one stream, the same numbers twice
    assert confirming[0] != plain[0] and not set(confirming[1]) & set(plain[1])  # new numbers on the confirming one


def test_a_law_that_is_not_one_is_an_assertion_a_kill_not_a_crash() -> None:
    """A law built from a mutant's own distributions (softmax over the wrong dimension) is no probability law: the
    check goes red as an AssertionError, which the recorder reads as the gate's own check."""
    broken = torch.softmax(torch.tensor([[1.0, 2.0, 3.0], [0.5, 0.1, 0.2]]), dim=0)[0]  # [3], sums to ~1.3
    with pytest.raises(NotALaw, match="not a probability law") as raised:
        assert_first_token_law(lambda seed: seed % 3, broken, num_draws=30)
    assert isinstance(raised.value, AssertionError) and isinstance(raised.value, ValueError)
