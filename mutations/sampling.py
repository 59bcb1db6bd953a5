"""Mutations of acceptance and sampling (runner/sampling.py)."""

from verify.mutation import Mutation, register

RULE = "tests/gates/test_gate_sampling.py::test_acceptance_rule_accepts_with_probability_min_one_p_over_q"

register(
    Mutation(
        name="greedy-accepts-one-extra",
        bug_class="Greedy acceptance counts one drafted token past the longest matching prefix.",
        file="runner/sampling.py",
        anchor="return match.to(torch.int64).cumprod(dim=1).sum(dim=1)",
        replacement="return (match.to(torch.int64).cumprod(dim=1).sum(dim=1) + 1).clamp(max=drafted.shape[1])",
        expect_killed_by=("tests/gates/test_gate_acceptance.py::test_speculative_equals_plain_decoding",),
    ),
    Mutation(
        name="rejection-ignores-draft-prob",
        bug_class="Rejection sampling accepts with probability p instead of min(1, p/q), biasing the output "
        "distribution away from the target's.",
        file="runner/sampling.py",
        anchor="accepted = (u * q < p).long().cumprod(0).sum()",
        replacement="accepted = (u < p).long().cumprod(0).sum()",
        expect_killed_by=(RULE,),
    ),
    Mutation(
        name="residual-not-subtracting-draft",
        bug_class="After a rejection the token is resampled from p instead of norm(max(p - q, 0)).",
        file="runner/sampling.py",
        anchor="residual = target_probs[:n] - draft_probs",
        replacement="residual = target_probs[:n].clone()",
        expect_killed_by=(RULE,),
    ),
    Mutation(
        name="top-k-not-applied",
        bug_class="The per-request top-k filter is skipped on the sampled path.",
        file="runner/sampling.py",
        anchor="if 0 < top_k < vocab:",
        replacement="if False:",
        expect_killed_by=("tests/gates/test_gate_sampling.py::test_degenerate_filters_reduce_to_greedy",),
    ),
)
