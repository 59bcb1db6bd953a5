"""Mutations of acceptance and sampling (runner/sampling.py)."""

from verify import Mutation, register

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

DISTRIBUTION = "tests/gates/test_gate_distribution.py"
P_AND_Q = f"{DISTRIBUTION}::test_rule_gets_the_tempered_filtered_p_and_q"
OUTPUT = f"{DISTRIBUTION}::test_sampled_output_is_distributed_as_plain_sampling"

register(
    Mutation(
        name="draft-q-wrong-temperature",
        bug_class="The draft samples its block and computes q at temperature 1 instead of the request's: still "
        "lossless (the tokens were drawn from that q), but the proposal is not the draft's tempered distribution "
        "and acceptance drops.",
        file="runner/proposer.py",
        anchor="q = sampling_probs(logits[row, :n], p.temperature, p.top_p, p.top_k)",
        replacement="q = sampling_probs(logits[row, :n], 1.0, p.top_p, p.top_k)",
        expect_killed_by=(P_AND_Q,),
    ),
    Mutation(
        name="q-handed-untempered",
        bug_class="The draft samples from its tempered q but hands the acceptance rule q at temperature 1 (the "
        "temperature applied on one side of p/q only): the output is no longer the target's distribution.",
        file="runner/proposer.py",
        anchor="        probs.append(q)\n",
        replacement="        probs.append(sampling_probs(logits[row, :n], 1.0, p.top_p, p.top_k))\n",
        expect_killed_by=(P_AND_Q, OUTPUT),
    ),
    Mutation(
        name="draft-q-ignores-top-p-top-k",
        bug_class="The draft's q drops the request's top-p/top-k filter that the target's p applies (filters on "
        "one side of p/q only): lossless, but drafted tokens outside the filter are always rejected.",
        file="runner/proposer.py",
        anchor="q = sampling_probs(logits[row, :n], p.temperature, p.top_p, p.top_k)",
        replacement="q = sampling_probs(logits[row, :n], p.temperature)",
        expect_killed_by=(P_AND_Q,),
    ),
    Mutation(
        name="target-p-untempered-in-verify",
        bug_class="The verify step computes the target's p at temperature 1 while the first token uses the "
        "request's temperature: every speculative token is sampled at the wrong temperature.",
        file="runner/engine.py",
        anchor="target_probs = sampling_probs(logits[row, : sizes[row]], p.temperature, p.top_p, p.top_k)",
        replacement="target_probs = sampling_probs(logits[row, : sizes[row]], 1.0, p.top_p, p.top_k)",
        expect_killed_by=(P_AND_Q, OUTPUT),
    ),
    Mutation(
        name="target-p-ignores-top-p-top-k",
        bug_class="The verify step's p drops the request's top-p/top-k filter: speculative tokens can come from "
        "outside the filter that plain sampling respects.",
        file="runner/engine.py",
        anchor="target_probs = sampling_probs(logits[row, : sizes[row]], p.temperature, p.top_p, p.top_k)",
        replacement="target_probs = sampling_probs(logits[row, : sizes[row]], p.temperature)",
        expect_killed_by=(P_AND_Q, OUTPUT),
    ),
)

EXACT_RULE = "tests/gates/test_gate_exact_rule.py::test_exact_rule_joint_law"

# Bugs where each position's marginal stays right while the rule's joint law over the block is wrong: the
# statistics over tokens and the one-position rule checks above miss them. (A residual always from position 0, a
# bonus from p_{n-1} and an acceptance count that is not a leading run were tried too: the distribution gate
# already kills those.)
register(
    Mutation(
        name="rejection-one-uniform-per-block",
        bug_class="The acceptance rule draws one uniform and reuses it at every drafted position: each position "
        "accepts with min(1, p/q) on its own, but the acceptances are dependent, so the joint law of the block "
        "(and so the output) is wrong.",
        file="runner/sampling.py",
        anchor="u = torch.rand(n, generator=generator, device=device)",
        replacement="u = torch.rand(1, generator=generator, device=device).expand(n)",
        expect_killed_by=(f"{EXACT_RULE}[dflash]",),
    ),
)

EXACT_ENGINE = "tests/gates/test_gate_exact_engine.py::test_exact_output_law_batched"

register(
    Mutation(
        name="prefill-token-untempered",
        bug_class="Prefill draws the first token at temperature 1 while verify steps use the request's: every "
        "later token is right given the first, the first is not (the statistics over later tokens cannot see it, "
        "and top-k 1 or a tiny top-p hides it).",
        file="runner/engine.py",
        anchor="probs = sampling_probs(logits[i, 0], p.temperature, p.top_p, p.top_k)",
        replacement="probs = sampling_probs(logits[i, 0], 1.0, p.top_p, p.top_k)",
        expect_killed_by=(f"{EXACT_ENGINE}[dflash-t0.6-block3]", f"{EXACT_ENGINE}[dflash2-t3.0-block3]"),
    ),
)

EXACT_MIXED = "tests/gates/test_gate_exact_engine.py::test_exact_output_law_mixed_batch"

# A row that reads another row's settings: every other gate's batch shares one setting, so only rows of different
# settings side by side can tell.
register(
    Mutation(
        name="verify-params-of-first-row",
        bug_class="The verify step samples every row with the first row's sampling parameters (its temperature, "
        "filters, greedy or not): right in any batch whose rows share one setting.",
        file="runner/engine.py",
        anchor="p = r.params",
        replacement="p = requests[0].params",
        expect_killed_by=(f"{EXACT_MIXED}[dflash]",),
    ),
)
