"""What a report shows of a mutation beyond its verdict: bug class, file, diff and the anchor's span.

Reads the pristine tree through `verify.mutation.apply` and returns the report's `Detail` records; here, above the
applier, so that applying a mutation knows nothing of reports. Never writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from verify.mutation import Mutation
from verify.mutation.apply import Applied, apply_mutation
from verify.report.json_report import Detail

__all__ = ["details_for"]


def details_for(mutations: Mapping[str, Mutation], root: Path) -> dict[str, Detail]:
    """Per mutation, what a report shows beyond its verdict: bug class, file, diff and the anchor's span."""
    details = {}
    for name, mutation in mutations.items():
        applied = apply_mutation(mutation, root)
        if not isinstance(applied, Applied):
            details[name] = Detail(mutation.bug_class, mutation.file, replacement=mutation.replacement)
            continue
        start = applied.original.index(mutation.anchor)
        end = start + len(mutation.anchor)
        first_column = start - applied.original.rfind("\n", 0, start)
        last_column = end - applied.original.rfind("\n", 0, end)
        last_line = applied.original.count("\n", 0, end) + 1
        details[name] = Detail(
            mutation.bug_class, mutation.file, applied.diff, mutation.replacement,
            applied.first_line, first_column, last_line, last_column,
        )  # fmt: skip
    return details
