"""Promotion: a sweep survivor becomes a registered mutation in the catalog, so the gap it exposed becomes
a pinned CI check once a gate kills it.

Writes one `register(Mutation(...))` block (anchor, replacement, a bug-class line to fill in) into a catalog
module. Knows nothing of mutmut or of how the survivor was found; checks the anchor against today's source.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

from verify.mutation import Mutation, MutationError
from verify.mutation.apply import count_matches
from verify.report.verdict import Status
from verify.sweep.result import SweepMutant, SweepResult

PROMOTABLE = frozenset({Status.SURVIVED})  # no-tests survivors included: their status is survived
# The public import (`from verify import ...`) or the record's own module, which older catalogs name.
_IMPORT = re.compile(r"^from verify(?:\.mutation)? import (.+)$", re.MULTILINE)


class PromoteError(ValueError):
    """The mutant is unknown, not a survivor, stale, or the name is taken (the CLI exits 2)."""


def find_survivor(result: SweepResult, key: str) -> SweepMutant:
    mutant = result.find(key)
    if mutant is None:
        raise PromoteError(f"unknown mutant {key!r}: not in the sweep of {', '.join(result.modules) or 'nothing'}")
    if mutant.status not in PROMOTABLE:
        raise PromoteError(f"mutant {key!r} is {mutant.label}; only survived or no-tests mutants are promoted")
    if not mutant.anchor:
        raise PromoteError(f"mutant {key!r} has no anchor: its function was not found in the source")
    return mutant


def to_mutation(mutant: SweepMutant, name: str) -> Mutation:
    try:
        return Mutation(
            name=name,
            bug_class="TODO: the bug class, and where such a bug was seen",
            file=mutant.module,
            anchor=mutant.anchor,
            replacement=mutant.replacement,
        )
    except MutationError as error:
        raise PromoteError(str(error)) from None


def catalog_file(root: Path, catalog_module: str, mutant: SweepMutant) -> Path:
    """`mutations/<runner module>.py` for a catalog package; the module's own file otherwise."""
    base = root / catalog_module.replace(".", "/")
    if not base.is_dir():
        return base.with_suffix(".py")
    module = Path(mutant.module)
    stem = module.parent.name if module.stem == "__init__" else module.stem
    return base / f"{stem}.py"


def render(mutation: Mutation, key: str) -> str:
    fields = ("name", "bug_class", "file", "anchor", "replacement")
    # JSON string literals are valid Python ones, double-quoted as ruff format writes them.
    body = "".join(f"        {field}={json.dumps(getattr(mutation, field), ensure_ascii=False)},\n" for field in fields)
    return f"# Promoted from sweep survivor {key}.\nregister(\n    Mutation(\n{body}    )\n)\n"


def promote(root: Path, mutant: SweepMutant, name: str, catalog: Mapping[str, Mutation], target: Path) -> Mutation:
    """Append the mutation for `mutant` to `target` (created if missing) and return it."""
    if name in catalog:
        raise PromoteError(f"a mutation named {name!r} is already registered")
    mutation = to_mutation(mutant, name)
    source = root / mutation.file
    matches = count_matches(source.read_text("utf-8"), mutation.anchor) if source.is_file() else 0
    if matches != 1:
        raise PromoteError(f"{mutation.file} changed since the sweep: the anchor matches {matches} times")
    if target.exists():
        text = target.read_text("utf-8")
        imported = {n.strip() for line in _IMPORT.findall(text) for n in line.split(",")}
        if not {"Mutation", "register"} <= imported:
            raise PromoteError(f"{target} does not import Mutation and register from verify")
        text = text.rstrip("\n") + "\n\n\n"
    else:
        text = (
            f'"""Registered mutations of {mutant.module}, promoted from `dflash sweep` survivors."""\n\n'
            "from verify import Mutation, register\n\n\n"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text + render(mutation, mutant.key), "utf-8")
    return mutation
