"""dflash-verify: the `dflash` CLI and the mutation-testing engine around the runner.

This package is also the one import point a team's code uses (docs/reference/api.md lists each name): the
mutation record and its registry, the bug-class templates, the gate kit's checks, the gate seed, the observer
protocol and the shipped fixture pairs, e.g. `from verify import Mutation, register, assert_stop_law`. Every
other module is private by convention and may change without notice.

The names load lazily (PEP 562 `__getattr__`): `from verify import Mutation` imports only the mutation record,
so a catalog stays light and `dflash --help` never pays for torch; the re-exported modules never import this
list back.

The map: `cli` (the `dflash` command), `run` (a verify run: its children, executors and phases), `config` (the
`[tool.dflash]` table read and validated, the catalog it names, `dflash init`'s library), `sandbox` (what keeps a
mutant in its box, for the run, observe and the sweep), `report` (the verdict model and every renderer), `observe`
(what a mutant changes, step by step), `propose` (mutations proposed from the engine's syntax trees), `sweep`
(mutmut's operator mutants), `fixtures` (the shipped fixture pairs and their audit), `gatekit` (the engine-agnostic
checks), `mutation` (the record, its registry and how a mutation is applied), `templates` (bug-class templates),
`seeds` (the gate seed), `compat` (the Python 3.10 shims).

`verify` may import `runner`; `runner` never imports `verify`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what mypy and editors see; _EXPORTS below is what runs (a test keeps the two equal)
    from verify.fixtures.api import FixtureError, FixturePair, fixture_names, load_fixture
    from verify.gatekit import (
        ALPHA_CHECK,
        ALPHA_GATE,
        DegenerateComparison,
        FitResult,
        LawMismatch,
        NotALaw,
        RuleFit,
        acceptance_rule_fit,
        assert_acceptance_rule_exact,
        assert_batch_equals_solo,
        assert_first_token_law,
        assert_speculative_equals_plain,
        assert_stop_law,
        batched,
        case_level,
        detectable_tv,
        first_token_fit,
        global_generator,
        law_power,
        log_space,
        loop_step,
        normalise,
        null_rate,
        numpy_rule,
        output_fit,
        pearson_fit,
        proportion_p_value,
        rule_counts,
        sequence_counts,
        speculative_law,
        spread,
        stop_fit,
        stop_law,
    )
    from verify.mutation import Mutation, MutationError, register
    from verify.observe.protocol import Emit, Observer, ObserverError, WorkloadTimeout
    from verify.sandbox.confine import probe as confinement_probe
    from verify.seeds import GATE_SEED_ENV, gate_seed, reseed
    from verify.templates import (
        TEMPLATES,
        Template,
        TemplateError,
        acceptance_past_first_mismatch,
        bonus_off_by_one,
        cache_crop_off_by_one,
        cache_write_shifted,
        position_offset,
        ratio_inverted,
        residual_not_subtracting_draft,
    )

# public name -> (module, name there); grouped as docs/reference/api.md lists them. The `@mutation` decorator
# stays at verify.mutation: its name is that submodule's, which the import system binds on this package.
_EXPORTS: dict[str, tuple[str, str]] = {
    # the mutation record and its registry
    **{name: ("verify.mutation", name) for name in ("Mutation", "MutationError", "register")},
    # the bug-class templates
    **{
        name: ("verify.templates", name)
        for name in (
            "TEMPLATES",
            "Template",
            "TemplateError",
            "acceptance_past_first_mismatch",
            "bonus_off_by_one",
            "cache_crop_off_by_one",
            "cache_write_shifted",
            "position_offset",
            "ratio_inverted",
            "residual_not_subtracting_draft",
        )
    },
    # the gate kit
    **{
        name: ("verify.gatekit", name)
        for name in (
            "ALPHA_CHECK",
            "ALPHA_GATE",
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
            "case_level",
            "detectable_tv",
            "first_token_fit",
            "global_generator",
            "law_power",
            "log_space",
            "loop_step",
            "normalise",
            "null_rate",
            "numpy_rule",
            "output_fit",
            "pearson_fit",
            "proportion_p_value",
            "rule_counts",
            "sequence_counts",
            "speculative_law",
            "spread",
            "stop_fit",
            "stop_law",
        )
    },
    # the gate seed
    **{name: ("verify.seeds", name) for name in ("GATE_SEED_ENV", "gate_seed", "reseed")},
    # the observer protocol
    **{name: ("verify.observe.protocol", name) for name in ("Emit", "Observer", "ObserverError", "WorkloadTimeout")},
    # the shipped fixture pairs
    **{
        name: ("verify.fixtures.api", name) for name in ("FixtureError", "FixturePair", "fixture_names", "load_fixture")
    },
    # the children's confinement on this machine
    "confinement_probe": ("verify.sandbox.confine", "probe"),
}

__all__ = [
    "ALPHA_CHECK",
    "ALPHA_GATE",
    "GATE_SEED_ENV",
    "TEMPLATES",
    "DegenerateComparison",
    "Emit",
    "FitResult",
    "FixtureError",
    "FixturePair",
    "LawMismatch",
    "Mutation",
    "MutationError",
    "NotALaw",
    "Observer",
    "ObserverError",
    "RuleFit",
    "Template",
    "TemplateError",
    "WorkloadTimeout",
    "acceptance_past_first_mismatch",
    "acceptance_rule_fit",
    "assert_acceptance_rule_exact",
    "assert_batch_equals_solo",
    "assert_first_token_law",
    "assert_speculative_equals_plain",
    "assert_stop_law",
    "batched",
    "bonus_off_by_one",
    "cache_crop_off_by_one",
    "cache_write_shifted",
    "case_level",
    "confinement_probe",
    "detectable_tv",
    "first_token_fit",
    "fixture_names",
    "gate_seed",
    "global_generator",
    "law_power",
    "load_fixture",
    "log_space",
    "loop_step",
    "normalise",
    "null_rate",
    "numpy_rule",
    "output_fit",
    "pearson_fit",
    "position_offset",
    "proportion_p_value",
    "ratio_inverted",
    "register",
    "reseed",
    "residual_not_subtracting_draft",
    "rule_counts",
    "sequence_counts",
    "speculative_law",
    "spread",
    "stop_fit",
    "stop_law",
]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use (then cached here); submodules load as usual."""
    try:
        module, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'verify' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
