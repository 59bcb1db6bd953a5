"""The shipped gate kit (verify.gatekit) on rules and engines written here: each check passes the right
behaviour, fails a planted bug with a message naming where, and refuses a comparison that could not fail."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from verify.gatekit import (
    ALPHA_CHECK,
    ALPHA_GATE,
    DegenerateComparison,
    acceptance_rule_fit,
    assert_acceptance_rule_exact,
    assert_batch_equals_solo,
    assert_first_token_law,
    assert_speculative_equals_plain,
    case_level,
    first_token_fit,
    law_power,
    null_rate,
    sequence_counts,
    speculative_law,
)
from verify.gatekit.sampling import cell_tokens

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "lookup-engine"


def _rule(invert: bool = False, bonus_row: int = 0):
    """Speculative sampling's rule, written plainly; `invert` uses q/p, `bonus_row` shifts the bonus row."""

    def rule(p, q, drafted, generator):
        n = drafted.numel()
        for i in range(n):
            x = int(drafted[i])
            ratio = q[i, x] / p[i, x] if invert else p[i, x] / q[i, x]
            if float(torch.rand((), generator=generator, dtype=torch.float64)) >= float(ratio):
                residual = (p[i] - q[i]).clamp(min=0)
                residual = residual if float(residual.sum()) > 0 else p[i]
                return i, int(torch.multinomial(residual, 1, generator=generator))
        return n, int(torch.multinomial(p[n + bonus_row], 1, generator=generator))

    return rule


def _laws(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    target = torch.randn(3, 6, generator=g, dtype=torch.float64)
    p = torch.softmax(target, -1)
    q = torch.softmax(target[:2] + torch.randn(2, 6, generator=g, dtype=torch.float64), -1)
    return p, q, torch.tensor([1, 4])


def test_the_closed_form_is_a_law_and_a_right_rule_passes_it() -> None:
    p, q, drafted = _laws()
    law = speculative_law(p, q, drafted)
    assert float(law.sum()) == pytest.approx(1.0) and bool((law >= 0).all())
    result = assert_acceptance_rule_exact(_rule(), p, q, drafted, num_draws=2000)
    assert result.passed and 0 < result.fit.detectable_tv < 0.15
    assert result.fit.detectable_tv == pytest.approx(law_power(law, 2000, ALPHA_CHECK))


@pytest.mark.parametrize("bug", ["ratio-inverted", "bonus-from-the-last-drafted-row"])
def test_a_wrong_rule_is_named_with_its_worst_cell(bug: str) -> None:
    p, q, drafted = _laws()
    rule = _rule(invert=True) if bug == "ratio-inverted" else _rule(bonus_row=-1)
    with pytest.raises(AssertionError, match=r"joint law differs .* worst cell: \d accepted then token \d"):
        assert_acceptance_rule_exact(rule, p, q, drafted, num_draws=2000)
    assert not acceptance_rule_fit(rule, p, q, drafted, num_draws=2000).passed


def test_batch_equals_solo_passes_sees_a_row_mix_and_refuses_what_cannot_fail() -> None:
    weight = torch.randn(4, 5, generator=torch.Generator().manual_seed(1))
    inputs = [torch.tensor([1.0, 0.0, 2.0, -1.0]), torch.tensor([0.5, 0.5, 0.0, 3.0])]

    def solo(x):
        return x @ weight

    assert_batch_equals_solo(solo, lambda xs: list(torch.stack(xs) @ weight), inputs)
    with pytest.raises(AssertionError, match=r"logits of input 0: batched differs from solo at \(0,\)"):
        assert_batch_equals_solo(solo, lambda xs: list((torch.stack(xs) @ weight).flip(0)), inputs)
    with pytest.raises(DegenerateComparison, match="two rows or more"):
        assert_batch_equals_solo(solo, lambda xs: [solo(x) for x in xs], inputs[:1])
    with pytest.raises(DegenerateComparison, match="same logits alone"):
        assert_batch_equals_solo(solo, lambda xs: [solo(x) for x in xs], [inputs[0], inputs[0]])


def test_speculative_equals_plain_names_the_first_divergence_and_refuses_constant_outputs() -> None:
    def plain(prompt):
        return [(prompt[-1] + i) % 7 for i in range(6)]

    assert_speculative_equals_plain(plain, plain, [[1], [3]])
    with pytest.raises(AssertionError, match=r"prompt 1: token 2 is 0 speculative, 5 plain"):
        assert_speculative_equals_plain(lambda p: [0 if i == 2 and p == [3] else t for i, t in enumerate(plain(p))],
                                        plain, [[1], [3]])  # fmt: skip
    with pytest.raises(DegenerateComparison, match="fewer than two token ids"):
        assert_speculative_equals_plain(lambda p: [2, 2], lambda p: [2, 2], [[1]])


def test_first_token_law_passes_the_target_law_and_fails_another() -> None:
    law = torch.tensor([0.4, 0.3, 0.2, 0.1], dtype=torch.float64)
    other = torch.tensor([0.3, 0.4, 0.2, 0.1], dtype=torch.float64)

    def sampler(which):
        return lambda seed: int(torch.multinomial(which, 1, generator=torch.Generator().manual_seed(seed)))

    fit = assert_first_token_law(sampler(law), law, num_draws=2000)
    assert 0 < fit.detectable_tv < 0.1
    assert not first_token_fit(sampler(other), law, num_draws=2000).passed
    with pytest.raises(AssertionError, match="first emitted token is not distributed"):
        assert_first_token_law(sampler(other), law, num_draws=2000)


def test_the_example_checks_false_alarm_rates_are_at_most_1e_3() -> None:
    """The rates docs/reference/gatekit.md states for examples/lookup-engine's statistical checks, counted."""
    sys.path.insert(0, str(EXAMPLE))
    try:
        from lookupspec import KVCache, TinyLM

        spec = importlib.util.spec_from_file_location("lookup_example_suite", EXAMPLE / "tests" / "test_engine.py")
        assert spec is not None and spec.loader is not None
        suite = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(suite)  # its rule cases and prompts, under a name no other test module has
    finally:
        sys.path.remove(str(EXAMPLE))
    cases = [(0, 1, 5), (1, 2, 6), (2, 3, 4)]
    laws = [speculative_law(*suite._rule_case(*case)) for case in cases]
    rule = sum(null_rate(law, 2000, case_level(3), 200_000, seed) for seed, law in enumerate(laws))
    law = torch.softmax(TinyLM().forward(torch.tensor(suite.PROMPTS[0]), 0, KVCache())[-1].double(), -1)
    first = null_rate(law, 600, ALPHA_CHECK, 200_000, 7)
    assert 0 < rule <= ALPHA_GATE and 0 < first <= ALPHA_GATE, (rule, first)  # 0: a check that cannot fire


def test_sequence_cells_read_back() -> None:
    tokens = torch.tensor([[2, 0, 1], [1, 2, 2], [2, 0, 1]])
    counts = sequence_counts(tokens, 3)
    assert counts.numel() == 27 and int(counts.sum()) == 3
    assert {cell_tokens(int(c), 3, 3) for c in counts.nonzero()[:, 0]} == {(2, 0, 1), (1, 2, 2)}
    with pytest.raises(AssertionError, match="outside the vocabulary"):
        sequence_counts(torch.tensor([3]), 3)
