"""The equivalents file: operator mutants marked, once and with a reason, as equivalent to the original
(`[[equivalent]]`: no machine can observe them) or as uncovered (`[[uncovered]]`: this machine cannot, another
could; each entry says in `observation` what a run there would see).

An entry matches a mutant by its change (module, function, the changed lines before and after, compared with
surrounding whitespace stripped), not by mutmut's numbering, which shifts whenever the function is edited.
`mutant = "<mutmut key>"` may be given instead, for a one-off mark. This module knows nothing of mutmut or
of how a sweep runs; it reads the file and says which mutants it excuses.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from verify.compat import tomllib
from verify.report.verdict import Status
from verify.sweep.result import SweepMutant

DEFAULT_PATH = Path("mutations/equivalents.toml")


class EquivalentsError(ValueError):
    """The equivalents file is not valid TOML or an entry lacks what it needs."""


def _norm(lines: str) -> str:
    return "\n".join(line.strip() for line in lines.strip().splitlines())


@dataclass(frozen=True, slots=True)
class Equivalent:
    reason: str = ""  # required; a default so a missing one is reported by __post_init__, not a TypeError
    module: str = ""
    function: str = ""
    original: str = ""
    mutated: str = ""
    mutant: str = ""
    observation: str = ""  # [[uncovered]] only: what a run on the machine that can observe it would see
    evidence: str = ""  # what an observation run compared when it found no difference (`dflash sweep explain`)
    kind: str = "equivalent"  # "equivalent" or "uncovered": the table it came from

    def __post_init__(self) -> None:
        if self.kind == "uncovered" and not self.observation.strip():
            raise EquivalentsError(f"uncovered entry {self.mutant or self.function!r} needs an observation")
        if not self.reason.strip():
            raise EquivalentsError(f"equivalent entry {self.mutant or self.function!r} needs a reason")
        if not self.mutant and not (self.module and self.function and self.original):
            raise EquivalentsError(
                "an equivalent entry needs `mutant`, or `module`, `function`, `original` and `mutated`"
            )

    def matches(self, mutant: SweepMutant) -> bool:
        if self.mutant:
            return self.mutant == mutant.key
        return (
            self.module == mutant.module
            and self.function == mutant.function
            and _norm(self.original) == _norm(mutant.original)
            and _norm(self.mutated) == _norm(mutant.mutated)
        )


def load(path: Path) -> tuple[Equivalent, ...]:
    """Read `[[equivalent]]` entries; a missing file means no equivalents."""
    if not path.is_file():
        return ()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as error:
        raise EquivalentsError(f"{path}: {error}") from None
    unknown_tables = sorted(set(data) - {"equivalent", "uncovered"})
    if unknown_tables:
        raise EquivalentsError(f"{path}: unknown tables {unknown_tables} (want [[equivalent]] or [[uncovered]])")
    known = set(Equivalent.__dataclass_fields__) - {"kind"}
    equivalents = []
    for kind in ("equivalent", "uncovered"):
        entries = data.get(kind, [])
        if not isinstance(entries, list):
            raise EquivalentsError(f"{path}: `{kind}` must be an array of tables ([[{kind}]])")
        for entry in entries:
            unknown = set(entry) - known if isinstance(entry, dict) else {"<not a table>"}
            if unknown or (kind == "equivalent" and "observation" in entry):
                raise EquivalentsError(f"{path}: unknown keys {sorted(unknown or {'observation'})} in a {kind} entry")
            if not all(isinstance(value, str) for value in entry.values()):
                raise EquivalentsError(f"{path}: every value in an {kind} entry must be a string")
            equivalents.append(Equivalent(**entry, kind=kind))
    return tuple(equivalents)


def apply(mutants: Iterable[SweepMutant], equivalents: tuple[Equivalent, ...]) -> tuple[SweepMutant, ...]:
    """Survivors an entry matches become EQUIVALENT or UNCOVERED with its reason; every other verdict
    stands, since a mutant a gate kills is not equivalent whatever the file says."""
    marked = []
    for mutant in mutants:
        entry = next((eq for eq in equivalents if eq.matches(mutant)), None)
        if entry is not None and mutant.label == Status.SURVIVED:
            if entry.kind == "uncovered":
                why = f"{entry.reason.strip()}; elsewhere: {entry.observation.strip()}"
                mutant = replace(mutant, status=Status.UNCOVERED, reason=why)
            else:
                mutant = replace(mutant, status=Status.EQUIVALENT, reason=entry.reason.strip())
        marked.append(mutant)
    return tuple(marked)


def stale(equivalents: tuple[Equivalent, ...], sources: Mapping[str, str]) -> tuple[Equivalent, ...]:
    """Entries for the modules in `sources` (module -> its text) whose `original` lines appear nowhere in it: the
    code moved on, so they match no mutant and excuse nothing. (A `mutant = "<key>"` entry cannot be checked.)"""
    texts = {module: _norm(text) for module, text in sources.items()}
    return tuple(
        eq for eq in equivalents if not eq.mutant and eq.module in texts and _norm(eq.original) not in texts[eq.module]
    )


def entry_toml(mutant: SweepMutant, reason: str = "TODO: why this mutant cannot change behaviour") -> str:
    """The `[[equivalent]]` block that marks `mutant`, for the report to offer."""

    fields = {
        "module": mutant.module,
        "function": mutant.function,
        "original": mutant.original,
        "mutated": mutant.mutated,
        "reason": reason,
    }
    # JSON string escapes are valid TOML basic-string escapes.
    lines = (f"{key} = {json.dumps(value, ensure_ascii=False)}\n" for key, value in fields.items())
    return "[[equivalent]]\n" + "".join(lines)
