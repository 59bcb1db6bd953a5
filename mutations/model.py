"""Mutations of the model maths and checkpoint loading (runner/layers.py, runner/target.py, runner/config.py,
runner/config_read.py, runner/loader.py)."""

from verify import Mutation, register

TARGET = "tests/gates/test_gate_numerics.py::test_target_logits_match_dense_reference"

register(
    Mutation(
        name="rope-rotate-half-sign",
        bug_class="rotate_half with the sign on the wrong half: RoPE rotates backwards (a classic port slip "
        "between interleaved and half-split conventions).",
        file="runner/layers.py",
        anchor="sin = torch.cat((-sin[..., :half], sin[..., half:]), dim=-1)",
        replacement="sin = torch.cat((sin[..., :half], -sin[..., half:]), dim=-1)",
        expect_killed_by=(TARGET,),
    ),
    Mutation(
        name="taps-concatenated-in-wrong-order",
        bug_class="Tapped target layers are concatenated in reverse order before the draft's fc.",
        file="runner/target.py",
        anchor="tapped = torch.cat([taps[i] for i in tap_layer_ids], dim=-1) if tap_layer_ids else None",
        replacement="tapped = torch.cat([taps[i] for i in reversed(tap_layer_ids)], dim=-1) if tap_layer_ids else None",
        expect_killed_by=("tests/gates/test_gate_numerics.py::test_draft_block_logits_match_dense_reference",),
    ),
    Mutation(
        name="mask-token-off-by-one",
        bug_class="The draft's mask_token_id read from the config off by one (the block filled with a real token).",
        file="runner/config.py",
        anchor="mask_token_id=mask_token_id,",
        replacement="mask_token_id=mask_token_id - 1,",
        expect_killed_by=("tests/gates/test_gate_numerics.py::test_draft_block_logits_match_dense_reference",),
    ),
    Mutation(
        name="draft-fit-check-skips-layer-ids",
        bug_class="A draft whose target_layer_ids do not exist in the target loads anyway (missing fit check).",
        file="runner/loader.py",
        anchor="bad = [i for i in draft.target_layer_ids if not 0 <= i < target.num_hidden_layers]",
        replacement="bad = []",
        expect_killed_by=("tests/gates/test_gate_checkpoint.py::test_draft_for_another_target_is_refused",),
    ),
    Mutation(
        name="target-shape-check-skipped",
        bug_class="Target weights are loaded without checking names and shapes against the config, so a truncated "
        "checkpoint fails late with an unnamed error (or loads garbage into a tied head).",
        file="runner/loader.py",
        anchor="check_weights(weights, model.expected_shapes(), str(folder))",
        replacement="pass",
        expect_killed_by=("tests/gates/test_gate_checkpoint.py::test_missing_tensor_is_refused",),
    ),
    Mutation(
        name="draft-shape-check-skipped",
        bug_class="Draft weights are loaded without the shape check (a draft for a different hidden size loads "
        "until the first matmul).",
        file="runner/loader.py",
        anchor="check_weights(weights, draft.expected_shapes(), str(folder))",
        replacement="pass",
        expect_killed_by=("tests/gates/test_gate_checkpoint.py::test_wrong_shape_is_refused",),
    ),
    Mutation(
        name="config-value-coerced",
        bug_class="A config.json value of the wrong JSON type is converted (int('64'), int(2.0), int(True)) "
        "instead of refused by a named error that names the key and the file.",
        file="runner/config_read.py",
        anchor="        if isinstance(value, bool) or not isinstance(value, int):\n"
        "            raise self.refuse(key, wanted, value)\n",
        replacement="        value = int(value)\n",
        expect_killed_by=(
            "tests/gates/test_gate_checkpoint.py::test_wrong_typed_config_value_is_refused_by_name[string-for-int]",
        ),
    ),
    Mutation(
        name="malformed-config-escapes",
        bug_class="A malformed config.json escapes as a raw JSONDecodeError instead of a named CheckpointError.",
        file="runner/checkpoint.py",
        anchor="except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:",
        replacement="except OSError as exc:",
        expect_killed_by=("tests/gates/test_gate_checkpoint.py::test_malformed_config_is_refused",),
    ),
)
