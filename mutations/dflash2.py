"""Mutations of DFlash2's additions: the candidate selector's walk, its q in rejection sampling, and the
grouped dynamic causal convolution (runner/dflash2.py, runner/proposer.py)."""

from verify import Mutation, register

GATES = "tests/gates/test_gate_dflash2.py"

register(
    Mutation(
        name="walk-replaced-by-argmax",
        bug_class="A DFlash2 draft silently falls back to the per-slot argmax instead of the candidate walk (the "
        "selector's call dropped on a code path).",
        file="runner/proposer.py",
        anchor="    if draft.candidate_selector is not None:\n        return _walk(",
        replacement="    if False:\n        return _walk(",
        expect_killed_by=(f"{GATES}::test_dflash2_drafts_match_the_dense_walk",),
    ),
    Mutation(
        name="walk-predecessor-not-advanced",
        bug_class="The walk scores every position against the anchor instead of the token chosen one step before "
        "(the predecessor is not advanced along the path).",
        file="runner/dflash2.py",
        anchor="            predecessor = candidates[:, position].gather(-1, index[:, None])[:, 0]\n"
        "            path.append(predecessor)",
        replacement="            path.append(candidates[:, position].gather(-1, index[:, None])[:, 0])",
        expect_killed_by=(f"{GATES}::test_dflash2_drafts_match_the_dense_walk",),
    ),
    Mutation(
        name="conv-causal-padding-removed",
        bug_class="The grouped dynamic conv shifts by rolling instead of zero-padding, so later block slots leak "
        "into earlier ones (causal padding removed).",
        file="runner/dflash2.py",
        anchor="shifted = blocks if offset == 0 else F.pad(blocks[:, :-offset], (0, 0, 0, 0, offset, 0))",
        replacement="shifted = torch.roll(blocks, offset, dims=1)",
        expect_killed_by=(f"{GATES}::test_dflash2_block_logits_match_dense_reference",),
    ),
    Mutation(
        name="selector-q-replaced-by-draft-softmax",
        bug_class="Rejection sampling for a DFlash2 draft uses the draft's softmax instead of the walk's per-step "
        "distribution q over the candidates, so sampled output is no longer the target's distribution.",
        file="runner/proposer.py",
        anchor="        probs.append(None if r.params.is_greedy else q[row, :n])\n"
        "        indices.append(None if r.params.is_greedy else candidates[row, :n])",
        replacement="        probs.append(\n"
        "            None if r.params.is_greedy else sampling_probs(logits[row, :n], r.params.temperature)\n"
        "        )\n"
        "        indices.append(None)",
        expect_killed_by=(f"{GATES}::test_sampled_dflash2_rejects_with_the_walks_q",),
    ),
    Mutation(
        name="walk-q-wrong-temperature",
        bug_class="The DFlash2 walk samples and computes its q at temperature 1 instead of the request's: lossless "
        "(the path was drawn from that q), but the proposal is not the draft's tempered distribution.",
        file="runner/dflash2.py",
        anchor="q[row] = sampling_probs(scores[row], temperature)",
        replacement="q[row] = sampling_probs(scores[row], 1.0)",
        expect_killed_by=(f"{GATES}::test_sampled_dflash2_q_is_the_walks_tempered_distribution",),
    ),
)

EXACT_RULE = "tests/gates/test_gate_exact_rule.py::test_exact_rule_joint_law[dflash2]"

# The rule's candidate-set branch (runner/sampling.py): the walk's q handed to the rule is right, the law the
# rule applies over the candidates is not. Only the exact rule gate runs that branch against its closed form.
register(
    Mutation(
        name="candidate-q-of-first-candidate",
        bug_class="The DFlash2 rule reads q(x) at the first candidate slot instead of the slot holding the drafted "
        "token: right whenever the walk drafts its first candidate.",
        file="runner/sampling.py",
        anchor="q = (draft_probs * (draft_indices == tokens[:, None])).sum(-1)",
        replacement="q = draft_probs[:, 0]",
        expect_killed_by=(EXACT_RULE,),
    ),
    Mutation(
        name="candidate-residual-drops-candidates",
        bug_class="The DFlash2 residual zeroes the candidates instead of subtracting q from them: right where "
        "q >= p on every candidate, wrong where the target prefers a candidate to the walk.",
        file="runner/sampling.py",
        anchor="residual = target_probs[:n].scatter_add(1, draft_indices, -draft_probs)",
        replacement="residual = target_probs[:n].scatter(1, draft_indices, 0.0)",
        expect_killed_by=(EXACT_RULE,),
    ),
)

# The walk of every row at the first row's temperature. Behind a greedy first row a sampled row drafts by argmax
# and hands the rule no q (zeros): it accepts drafts it should reject, and its output law moves. Only a batch
# that mixes greedy and sampled rows shows it.
register(
    Mutation(
        name="walk-temperature-of-first-row",
        bug_class="The DFlash2 walk tempers every row's candidates with the first row's temperature: right in any "
        "batch whose rows share one temperature.",
        file="runner/proposer.py",
        anchor="[r.params.temperature for r in requests]",
        replacement="[requests[0].params.temperature for r in requests]",
        expect_killed_by=("tests/gates/test_gate_exact_engine.py::test_exact_output_law_mixed_batch[dflash2]",),
    ),
)
