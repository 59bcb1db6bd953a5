"""The gate kit: engine-agnostic checks a speculative-decoding engine's tests call (docs/reference/gatekit.md).

- `assert_acceptance_rule_exact` (rule.py): the joint law of (accepted, next token) of an acceptance rule given
  as a callable rule(p, q, drafted, generator), against speculative sampling's closed form.
- `assert_batch_equals_solo` (compare.py): a batch's logits equal each row's run alone.
- `assert_speculative_equals_plain` (compare.py): greedy speculative output equals plain decoding's.
- `assert_first_token_law` (sampling.py): the first emitted token under sampling follows the target's law.
- `assert_stop_law` (stop.py): what a verify step appends when a stop token ends the block follows its law.
- adapters.py: one-line wrappers for the rules engines write (global generator, log space, batched, one step of
  a generation loop, numpy) into the kit's rule(p, q, drafted, generator).

Every draw follows the run's gate seed (`verify.reseed` of the `seed=`/`first_seed=` given, 0 by
default): the numbers written under plain pytest, independent ones on the stream a statistical kill is
confirmed on.

The statistical checks use a pooled Pearson chi-square (stats.py) tested at ALPHA_CHECK = 2.5e-4 by default: a
false-alarm rate of at most ALPHA_GATE = 1e-3 per check, with a 4x margin for the chi-square approximation
(case_level(n) splits it over n cases in one test). They raise LawMismatch, an AssertionError carrying the
red's p-value (`p_value`), which `dflash verify` reads: a conclusive red needs no second seed. Each result
states the total-variation distance it detects with probability >= 0.99 (fit.detectable_tv; law_power
computes it before any draw). Every check takes plain callables and tensors; none imports an engine, the
runner or pytest. `verify.templates` holds the bug-class mutation templates these checks kill.
"""

from verify.gatekit.adapters import batched, global_generator, log_space, loop_step, numpy_rule
from verify.gatekit.compare import DegenerateComparison, assert_batch_equals_solo, assert_speculative_equals_plain
from verify.gatekit.rule import (
    RULE_DRAWS,
    RuleFit,
    acceptance_rule_fit,
    assert_acceptance_rule_exact,
    law_power,
    normalise,
    rule_counts,
    speculative_law,
    spread,
)
from verify.gatekit.sampling import (
    FIRST_TOKEN_DRAWS,
    assert_first_token_law,
    first_token_fit,
    output_fit,
    sequence_counts,
)
from verify.gatekit.stats import (
    ALPHA_CHECK,
    ALPHA_GATE,
    FitResult,
    LawMismatch,
    NotALaw,
    case_level,
    detectable_tv,
    null_rate,
    pearson_fit,
    proportion_p_value,
)
from verify.gatekit.stop import assert_stop_law, stop_fit, stop_law

__all__ = [
    "ALPHA_CHECK",
    "ALPHA_GATE",
    "FIRST_TOKEN_DRAWS",
    "RULE_DRAWS",
    "DegenerateComparison",
    "FitResult",
    "LawMismatch",
    "NotALaw",
    "RuleFit",
    "acceptance_rule_fit",
    "assert_acceptance_rule_exact",
    "assert_batch_equals_solo",
    "assert_first_token_law",
    "assert_speculative_equals_plain",
    "assert_stop_law",
    "batched",
    "global_generator",
    "log_space",
    "loop_step",
    "numpy_rule",
    "normalise",
    "case_level",
    "detectable_tv",
    "first_token_fit",
    "law_power",
    "null_rate",
    "output_fit",
    "pearson_fit",
    "proportion_p_value",
    "rule_counts",
    "sequence_counts",
    "speculative_law",
    "spread",
    "stop_fit",
    "stop_law",
]
