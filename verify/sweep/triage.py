"""Sorting a sweep's survivors by observation: observably equivalent (nothing the observer's workloads see
changes), observable (with the first diverging observable), and duplicates (mutants whose observations are
identical, counted once). The observably equivalent ones can be written into the equivalents file with their
evidence (workloads, observables, tolerance), where an observation supports what a prose argument claimed.

Knows the sweep's records and the observe API; nothing of mutmut or of how the sweep ran.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from verify.compat import tomllib
from verify.config.settings import ProjectConfig
from verify.mutation.apply import count_matches
from verify.observe.api import ExplainRun, SessionOptions, explain_overrides
from verify.report.json_report import Table
from verify.report.verdict import Status
from verify.sweep import equivalents
from verify.sweep.result import SweepMutant, SweepResult

__all__ = [
    "Triage", "TriageError", "annotate_equivalents", "equivalent_entries", "explanations_of", "sweep_mutant_texts",
    "triage", "triage_table", "write_equivalents",
]  # fmt: skip


class TriageError(ValueError):
    """An unknown mutant key, or a module that changed since the sweep (the CLI exits 2)."""


@dataclass(frozen=True, slots=True)
class Triage:
    run: ExplainRun
    survivors: tuple[str, ...]

    @property
    def counts(self) -> dict[str, int]:
        return {
            "observed": len(self.survivors),
            "observably equivalent": len(self.run.equivalent),
            "observable": len(self.run.observable),
            "duplicates": self.run.num_duplicates,
            "not observed (not reached)": len(self.run.unobserved),
            "not observed (harness)": len(self.run.failures),
        }


def _mutated_text(root: Path, mutant: SweepMutant) -> str:
    path = root / mutant.module
    source = path.read_text("utf-8") if path.is_file() else ""
    if not mutant.anchor or count_matches(source, mutant.anchor) != 1:
        raise TriageError(f"{mutant.key}: {mutant.module} changed since the sweep (its change no longer applies)")
    return source.replace(mutant.anchor, mutant.replacement, 1)


def sweep_mutant_texts(root: Path, result: SweepResult, keys: Sequence[str]) -> dict[str, dict[str, str]]:
    texts = {}
    for key in keys:
        mutant = result.find(key)
        if mutant is None:
            raise TriageError(f"unknown mutant {key!r}: not in the saved sweep of {', '.join(result.modules)}")
        texts[key] = {mutant.module: _mutated_text(root, mutant)}
    return texts


def triage(
    config: ProjectConfig, result: SweepResult, options: SessionOptions | None = None, include_marked: bool = False
) -> Triage:
    """Explain every survivor of `result` (a mutant whose module moved on is left out as a failure); with
    `include_marked`, the mutants the equivalents file marks too, to check its prose against an observation."""
    texts, stale = {}, {}
    marked = (Status.EQUIVALENT, Status.UNCOVERED) if include_marked else ()
    # A `no tests` mutant is a survivor too (its status is survived; only its label sets it apart).
    chosen = [m for m in result.mutants if m.status is Status.SURVIVED or m.status in marked]
    for mutant in chosen:
        try:
            texts[mutant.key] = {mutant.module: _mutated_text(config.root, mutant)}
        except TriageError as error:
            stale[mutant.key] = str(error)
    run = explain_overrides(config, texts, options)
    if stale:
        run = ExplainRun(
            run.explanations, {**run.failures, **stale}, run.duplicates, run.workloads, run.compared, run.tolerance,
            run.pristine_s,
        )  # fmt: skip
    return Triage(run, tuple(m.key for m in chosen))


def equivalent_entries(found: Triage, result: SweepResult) -> str:
    """`[[equivalent]]` blocks for the observably equivalent survivors, each with its evidence."""
    run = found.run
    blocks = []
    for key in run.equivalent:
        mutant = result.find(key)
        assert mutant is not None
        fields = {
            "module": mutant.module,
            "function": mutant.function,
            "original": mutant.original,
            "mutated": mutant.mutated,
            "reason": "observably equivalent on the observer's workloads (no observable differs)",
            "evidence": _evidence(run, key),
        }
        lines = (f"{name} = {json.dumps(value, ensure_ascii=False)}\n" for name, value in fields.items())
        blocks.append("[[equivalent]]\n" + "".join(lines))
    return "\n".join(blocks)


def _evidence(run: ExplainRun, key: str) -> str:
    """What the observation compared, in one line: fixtures, workloads, observables, tolerance, and whether the
    mutant's floats were bit-identical or only within the bound."""
    fixtures = sorted({w.partition(": ")[0] for w in run.workloads if ": " in w})
    moved = run.explanations[key].within_tolerance
    floats = f"floats moved within the bound in: {', '.join(moved)}" if moved else "bit-identical"
    return (
        f"observably equivalent (dflash sweep explain): {len(run.workloads)} workloads on {', '.join(fixtures)}; "
        f"{len(run.compared)} observables per step and row; {run.tolerance}; {floats}"
    )


def annotate_equivalents(path: Path, found: Triage, result: SweepResult) -> int:
    """Add the observation's evidence to each entry of `path` that marks a mutant found observably equivalent
    (the prose reason stays beside it). Text is only appended inside each block; returns how many gained it."""
    if not path.is_file():
        return 0
    observed = {key: result.find(key) for key in found.run.equivalent}
    blocks = path.read_text("utf-8").split("\n[[")
    added = 0
    for index, block in enumerate(blocks[1:], start=1):
        kind, _, body = block.partition("]]")
        entry = tomllib.loads(body)
        if "evidence" in entry or kind not in ("equivalent", "uncovered"):
            continue
        marked = equivalents.Equivalent(**entry, kind=kind)
        key = next((k for k, mutant in observed.items() if mutant is not None and marked.matches(mutant)), None)
        if key is not None:
            evidence = f"evidence = {json.dumps(_evidence(found.run, key), ensure_ascii=False)}"
            blocks[index] = block.rstrip("\n") + "\n" + evidence + ("\n" if block.endswith("\n") else "")
            added += 1
    path.write_text("\n[[".join(blocks), "utf-8")
    equivalents.load(path)  # what was written must read back
    return added


def write_equivalents(path: Path, found: Triage, result: SweepResult) -> int:
    """Append the observably equivalent survivors that no entry of `path` marks yet; returns how many."""
    known = equivalents.load(path)
    fresh = [key for key in found.run.equivalent if not any(eq.matches(result.find(key)) for eq in known)]  # type: ignore[arg-type]
    if not fresh:
        return 0
    subset = Triage(
        ExplainRun({k: found.run.explanations[k] for k in fresh}, {}, (), found.run.workloads, found.run.compared,
                   found.run.tolerance, found.run.pristine_s),
        tuple(fresh),
    )  # fmt: skip
    text = path.read_text("utf-8") if path.is_file() else ""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.rstrip("\n") + ("\n\n" if text.strip() else "") + equivalent_entries(subset, result), "utf-8")
    equivalents.load(path)  # what was written must read back
    return len(fresh)


def explanations_of(found: Triage) -> dict[str, tuple[str, str]]:
    """mutant -> (its first divergence in one line, the whole explanation), for the reports."""
    return {key: (e.summary(), e.text()) for key, e in found.run.explanations.items()}


def triage_table(found: Triage) -> Table:
    """The survivors by observation, each observable one with its first divergence."""
    run = found.run
    first_of = {name: group[0] for group in run.duplicates for name in group[1:]}
    rows = [(key, "observably equivalent", "") for key in run.equivalent]
    rows += [(key, f"duplicate of {first_of[key]}" if key in first_of else "observable",
              run.explanations[key].summary()) for key in run.observable]  # fmt: skip
    # No divergence on workloads that never ran the change: no claim, and never written as an equivalent.
    rows += [(key, "not observed (not reached)", run.explanations[key].summary()) for key in run.unobserved]
    rows += [(key, "not observed (harness)", why.strip().splitlines()[-1]) for key, why in run.failures.items()]
    counts = ", ".join(f"{what} {n}" for what, n in found.counts.items())
    notes = (counts, f"{len(run.workloads)} workloads, {len(run.compared)} observables; tolerance: {run.tolerance}")
    return Table("Survivors by observation", ("mutant", "kind", "first divergence"), tuple(rows), notes)
