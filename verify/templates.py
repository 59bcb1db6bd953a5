"""Bug-class templates: a user names a file and an anchor in their engine, a template derives the replacement
and returns a `Mutation` ready to register.

    from verify import ratio_inverted, register

    register(ratio_inverted(file="myengine/accept.py", anchor="ratio = p[i, x] / q[i, x]"))

Each template reads the anchor as Python (whole statements, a block header such as `if x:`, or a continuation line
of arguments such as `position_ids=positions,`), finds the one construct its bug class changes and rewrites only
that span, so the rest of the anchor keeps its spelling. The rewrites are the rules `dflash mutations propose`
scans with (verify.propose), so a template accepts every spelling the scanner recognises. An anchor without that
construct, or with more than one, is a `TemplateError` that names the template and what it looks for; so is one
it cannot mutate correctly (`x = a, b` plus one; a crop `[:-k]`, where `+ 1` keeps nothing at k = 1), with why.
`TEMPLATES` lists them with the gate kit check (verify.gatekit) that kills each.
Knows source text and the mutation record; nothing of files on disk or of how a mutation is applied.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

from verify.mutation import Mutation, MutationError
from verify.propose import attention_rules, sampling_rules
from verify.propose.edit import Edit, Found, Refusal, statement_of
from verify.propose.source import Source, SourceError, parse_anchor

__all__ = [
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
]


class TemplateError(MutationError):
    """The anchor does not fit the template: it lacks the construct the template rewrites, has several, or has
    one that no rewrite would make a correct mutant of (the reason is in the message)."""


Rule = Callable[[Source, dict[ast.AST, ast.stmt], bool], list[Found]]


def _rewriter(template: str, what: str, *rules: Rule) -> Callable[[Source], str]:
    """The rewrite of one bug class: its rules (those `dflash mutations propose` scans with) run on the anchor,
    which must hold exactly one construct they rewrite."""

    def rewrite(anchor: Source) -> str:
        owners = statement_of(anchor.tree)
        found = [item for rule in rules for item in rule(anchor, owners, False)]
        edits = [item for item in found if isinstance(item, Edit)]
        refusals = [item for item in found if isinstance(item, Refusal)]
        if not edits and refusals:
            raise TemplateError(
                f"template {template}: the anchor {anchor.text!r} cannot be mutated: {refusals[0].reason}"
            )
        if len(edits) != 1:
            count = "no" if not edits else str(len(edits))
            raise TemplateError(
                f"template {template}: the anchor {anchor.text!r} has {count} {what}; it needs exactly one"
            )
        return anchor.replace(edits[0].node, edits[0].text)

    return rewrite


@dataclass(frozen=True, slots=True)
class Template:
    """One bug class: how it rewrites an anchor, an anchor it fits, and the gate kit check that kills it."""

    name: str  # kebab-case: the default mutation name
    bug_class: str
    killed_by: str  # the verify.gatekit check that sees it
    rewrite: Callable[[Source], str]
    example_anchor: str
    example_replacement: str

    def __call__(
        self, file: str, anchor: str, *, name: str | None = None, expect_killed_by: tuple[str, ...] = ()
    ) -> Mutation:
        try:
            parsed = parse_anchor(anchor)
        except SourceError as error:
            raise TemplateError(f"template {self.name.replace('-', '_')}: {error}") from None
        replacement = self.rewrite(parsed)
        return Mutation(
            name=name or self.name,
            bug_class=self.bug_class,
            file=file,
            anchor=anchor,
            replacement=replacement,
            expect_killed_by=tuple(expect_killed_by),
        )


TEMPLATES: dict[str, Template] = {}


def _template(*args: object) -> Template:
    made = Template(*args)  # type: ignore[arg-type]
    TEMPLATES[made.name] = made
    return made


residual_not_subtracting_draft = _template(
    "residual-not-subtracting-draft",
    "After a rejection the token is resampled from p instead of norm(max(p - q, 0)).",
    "assert_acceptance_rule_exact",
    _rewriter("residual_not_subtracting_draft", "subtractions (p - q)", sampling_rules.residual_draft),
    "residual = (p[i] - q[i]).clamp(min=0)",
    "residual = (p[i]).clamp(min=0)",
)
ratio_inverted = _template(
    "ratio-inverted",
    "The acceptance ratio is q/p instead of p/q: drafts the target dislikes are kept.",
    "assert_acceptance_rule_exact",
    _rewriter(
        "ratio_inverted",
        "divisions (a / b), log differences or cross-multiplied comparisons (u * q < p)",
        sampling_rules.ratio,
    ),
    "ratio = p[i, x] / q[i, x]",
    "ratio = q[i, x] / p[i, x]",
)
bonus_off_by_one = _template(
    "bonus-off-by-one",
    "When every drafted token is accepted, the bonus token is drawn from the row before the last.",
    "assert_acceptance_rule_exact",
    _rewriter("bonus_off_by_one", "single-index subscripts (p[n], p[:, n, :]) or gathers", sampling_rules.bonus),
    "return n, sample(p[n], generator)",
    "return n, sample(p[n - 1], generator)",
)
position_offset = _template(
    "position-offset",
    "Position ids start one past where they should: every token is encoded as if it came one later.",
    "assert_batch_equals_solo or assert_speculative_equals_plain, whichever compares the offset path with one "
    "that is right (an offset every path shares needs a reference logits check)",
    _rewriter(
        "position_offset", "assignments (positions = ...) or position keyword arguments", attention_rules.positions
    ),
    "positions = torch.arange(start, start + length)",
    "positions = torch.arange(start, start + length) + 1",
)
cache_crop_off_by_one = _template(
    "cache-crop-off-by-one",
    "After a rejection the KV cache keeps one entry too many: the first rejected token's keys and values.",
    "assert_speculative_equals_plain",
    _rewriter(
        "cache_crop_off_by_one", "crop calls (cache.crop(n)) or slices with an end (k[:n])", attention_rules.crop
    ),
    "cache.crop(num_committed)",
    "cache.crop(num_committed + 1)",
)
cache_write_shifted = _template(
    "cache-write-shifted",
    "New keys and values are written one slot late: a slot is left stale and the next write overwrites.",
    "assert_speculative_equals_plain or assert_batch_equals_solo, whichever compares a cached path with an "
    "uncached one",
    _rewriter("cache_write_shifted", "subscript writes (cache[a:b] = kv, cache[:, a:b] = kv)", attention_rules.cache),
    "self.keys[start:end] = keys",
    "self.keys[start + 1:end + 1] = keys",
)
acceptance_past_first_mismatch = _template(
    "acceptance-past-first-mismatch",
    "Acceptance counts every matching drafted token, not the prefix before the first mismatch.",
    "assert_speculative_equals_plain (greedy); assert_acceptance_rule_exact (sampled)",
    _rewriter(
        "acceptance_past_first_mismatch",
        "cumprod calls, cumsum comparisons or `break` statements",
        sampling_rules.acceptance,
    ),
    "return match.cumprod(dim=1).sum(dim=1)",
    "return match.sum(dim=1)",
)
