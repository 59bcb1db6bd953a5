"""The engine's tests. They call dflash-verify's gate kit (imported from verify) for the checks that need no
reference: the acceptance rule's exact law, speculative = plain under greedy, batch = solo, and the first
emitted token's law under sampling. Nothing here is marked: every test is a gate."""

from __future__ import annotations

import torch
from lookupspec import KVCache, LookupEngine, NGramDrafter, TinyLM, plain_generate, score
from lookupspec.accept import accept

from verify import (
    assert_acceptance_rule_exact,
    assert_batch_equals_solo,
    assert_first_token_law,
    assert_speculative_equals_plain,
    case_level,
)

PROMPTS = [[1, 2, 3, 1, 2], [5, 7, 5, 7, 5, 7, 0], [4, 9, 4, 11, 3], [8, 8, 2]]


def _rule_case(seed: int, num_draft: int, vocab: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """p [k + 1, V] and q [k, V] as the engine hands them (q near p, as a useful drafter's is) and drafts from q."""
    g = torch.Generator().manual_seed(seed)
    logits = 1.5 * torch.randn(num_draft + 1, vocab, generator=g)
    p = torch.softmax(logits, -1)
    q = torch.softmax(logits[:num_draft] + torch.randn(num_draft, vocab, generator=g), -1)
    return p, q, torch.multinomial(q, 1, generator=g)[:, 0]


def test_acceptance_rule_has_speculative_samplings_law() -> None:
    cases = [(0, 1, 5), (1, 2, 6), (2, 3, 4)]
    for seed, num_draft, vocab in cases:
        p, q, drafted = _rule_case(seed, num_draft, vocab)
        # The rule's draws follow the run's gate seed (the kit reseeds them): new numbers on a confirming pass.
        assert_acceptance_rule_exact(accept, p, q, drafted, alpha=case_level(len(cases)), name=f"case {seed}")


def test_speculative_equals_plain_under_greedy() -> None:
    model = TinyLM()
    engine = LookupEngine(model, NGramDrafter())
    assert_speculative_equals_plain(
        lambda prompt: engine.generate(prompt, 16).token_ids, lambda prompt: plain_generate(model, prompt, 16), PROMPTS
    )


def test_batched_logits_equal_each_prompt_alone() -> None:
    model = TinyLM()
    assert_batch_equals_solo(
        lambda prompt: model.forward(torch.tensor(prompt), 0, KVCache()), lambda prompts: score(model, prompts), PROMPTS
    )


def test_first_token_follows_the_targets_law() -> None:
    model = TinyLM()
    engine = LookupEngine(model, NGramDrafter())
    prompt, temperature = PROMPTS[0], 1.0
    law = torch.softmax(model.forward(torch.tensor(prompt), 0, KVCache())[-1].double() / temperature, -1)
    # 600 seeded requests at the kit's level (2.5e-4, false alarms at most 1e-3): a law 0.137 away in total
    # variation is detected with probability >= 0.99 (fit.detectable_tv).
    assert_first_token_law(lambda seed: engine.generate(prompt, 1, temperature, seed).token_ids[0], law, num_draws=600)


def test_the_drafter_proposes_from_a_law_with_mass_everywhere() -> None:
    """Speculative sampling needs q(x) > 0 for every drafted x; smoothing gives every token some mass."""
    q = NGramDrafter().law([3, 4, 5, 3, 4, 6, 3, 4])
    assert float(q.sum()) == 1.0 or abs(float(q.sum()) - 1.0) < 1e-6
    assert bool((q > 0).all())
