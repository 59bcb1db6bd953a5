"""The rule-level exact gates' enumerated cases: small vocabularies (4-8), blocks of 2-4 (1-3 drafted tokens),
temperatures 0.3-3, top-p and top-k alone and together, random logits and adversarial ones (zeros from the
filters, exact ties, a near-one target, p = q, a drafted token the target's filter removed, a drafted token p
prefers, target mass off the candidate set). Built from fixed seeds: the same tensors on every run.

It knows logits and case records; the closed form and the harness live in exactrule.py.
"""

from __future__ import annotations

import torch
from exactrule import RuleCase

from verify.gatekit.rule import RULE_DRAWS  # calls of the rule per case  # noqa: F401 (the gates read it here)


def _random(shape: tuple[int, ...], scale: float, seed: int) -> torch.Tensor:
    return scale * torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def _case(name: str, vocab: int, drafted: int, temperature: float, *, scale: float = 1.5, seed: int, **options):
    """Random target logits and a draft that approximates them (its logits = the target's + noise of the same
    scale), as a trained draft does: its tokens are accepted often, rejected often, and sometimes filtered out."""
    target = _random((drafted + 1, vocab), scale, seed)
    return RuleCase(
        name=name,
        target_logits=target,
        draft_scores=target[:drafted] + _random((drafted, vocab), scale, seed + 1000),
        temperature=temperature,
        seed=seed,
        **options,
    )


def _dflash_cases() -> list[RuleCase]:
    cases = [
        _case("v4-n1-t1.0", 4, 1, 1.0, seed=1),
        _case("v6-n2-t0.3", 6, 2, 0.3, scale=0.6, seed=2),
        _case("v8-n3-t3.0", 8, 3, 3.0, scale=4.0, seed=3),
        _case("v5-n3-t1.5-top-p", 5, 3, 1.5, seed=4, top_p=0.8),
        _case("v8-n2-t0.6-top-k", 8, 2, 0.6, seed=5, top_k=3),
        _case("v8-n3-t2.0-both", 8, 3, 2.0, scale=3.0, seed=6, top_p=0.85, top_k=5),
        _case("v7-n3-t0.8-both", 7, 3, 0.8, seed=7, top_p=0.9, top_k=4),
    ]
    # Exact ties in p and in q (no filter: a tie at a filter's edge has no defined winner).
    tied = torch.tensor([[1.0, 1.0, 1.0, 0.0, 0.0, -1.0], [0.5, 0.5, 0.0, 0.0, 2.0, 2.0], [0.0] * 6])
    cases.append(RuleCase("v6-n2-ties", tied, torch.tensor([[0.0, 2.0, 2.0, 0.0, 1.0, 1.0], [1.0] * 6]), 1.0, seed=8))
    # A near-one target (p_0 ~ 1 - 3e-5) against a spread draft, then a spread target against a near-one draft.
    sharp = torch.tensor([[12.0, 0.0, 0.0, 1.0], [0.0, 0.5, 1.0, 0.2], [0.3, 0.0, -0.3, 0.1]])
    near_one = torch.tensor([[0.5, 0.0, 0.8, 0.0], [0.0, 0.0, 11.0, 0.0]])
    cases.append(RuleCase("v4-n2-near-one", sharp, near_one, 1.0, drafted=(0, 2), seed=9))
    # p = q at every drafted slot: always accepted, the bonus carries the whole law.
    same = _random((3, 5), 1.5, 10)
    cases.append(RuleCase("v5-n2-p-equals-q", same, same[:2].clone(), 1.3, seed=10))
    # A drafted token that the target's top-k removed (always rejected), then one p prefers to q (always kept).
    zeros = torch.tensor(
        [[3.0, 2.5, 0.0, -1.0, 0.3, -0.4], [0.0, 1.0, 2.0, -0.2, 0.5, -1.0], [1.0, 0.0, 1.0, -0.5, 1.0, -1.0]]
    )
    draft = torch.tensor([[0.1, -0.2, 3.0, 2.8, 0.0, -0.5], [0.0, 2.5, 0.5, -0.3, 0.2, -1.0]])
    cases.append(RuleCase("v6-n1-filtered-out", zeros[[0, 2]], draft[:1], 1.0, top_k=2, drafted=(3,), seed=11))
    cases.append(RuleCase("v6-n2-p-prefers", zeros[[1, 0, 2]], draft[[1, 0]], 0.7, top_k=4, drafted=(2, 2), seed=12))
    return cases


def _walk_case(name: str, vocab: int, drafted: int, k: int, temperature: float, *, seed: int, **options):
    """As the walk builds them: candidates are the top-k of the draft's logits (the target's + noise), and the
    walk's scores are their logits plus a pairwise term (noise), so q's order differs from the candidates'."""
    target = _random((drafted + 1, vocab), 1.5, seed)
    unary, candidates = torch.topk(target[:drafted] + _random((drafted, vocab), 1.5, seed + 1000), k, dim=-1)
    return RuleCase(
        name=name,
        target_logits=target,
        draft_scores=unary + _random((drafted, k), 1.0, seed + 2000),
        temperature=temperature,
        candidates=candidates,
        seed=seed,
        **options,
    )


def _dflash2_cases() -> list[RuleCase]:
    cases = [
        _walk_case("v6-n2-k3-t1.0", 6, 2, 3, 1.0, seed=21),
        _walk_case("v8-n3-k4-t0.5-top-k", 8, 3, 4, 0.5, seed=22, top_k=3),
        _walk_case("v8-n3-k4-t3.0-top-p", 8, 3, 4, 3.0, seed=23, top_p=0.7),
        _walk_case("v4-n2-k2-t0.3", 4, 2, 2, 0.3, seed=24),
        _walk_case("v7-n3-k3-t1.5-both", 7, 3, 3, 1.5, seed=25, top_p=0.9, top_k=5),
    ]
    # The walk's favourite candidate in the last slot, and most of the target's mass off the candidate set.
    target = torch.tensor([[0.0, 0.0, 2.5, 2.5, 0.0, 0.0], [2.0, 0.0, 0.0, 0.0, 0.0, 2.0], [0.0] * 6])
    cases.append(
        RuleCase(
            "v6-n2-k3-mass-off-candidates",
            target,
            torch.tensor([[0.0, 0.5, 2.0], [1.0, 0.0, 1.5]]),
            1.0,
            candidates=torch.tensor([[0, 1, 2], [1, 2, 3]]),
            seed=26,
        )
    )
    # A drafted candidate the target's top-k removed: the walk proposes it, the rule must always reject it.
    cases.append(
        RuleCase(
            "v5-n1-k3-filtered-out",
            torch.tensor([[2.0, 1.5, -1.0, 0.0, -2.0], [0.0, 1.0, 0.0, 1.0, 0.0]]),
            torch.tensor([[0.0, 1.0, 0.5]]),
            0.8,
            top_k=2,
            candidates=torch.tensor([[1, 4, 0]]),
            drafted=(4,),
            seed=27,
        )
    )
    return cases


DFLASH_CASES = _dflash_cases()
DFLASH2_CASES = _dflash2_cases()
