"""Explaining mutants: the entry points the CLI, a verify run's survivors and the sweep's triage call.

Takes mutants as {name: {relative file: mutated text}}, observes them beside the pristine tree (`session`),
explains each (`explain`) and groups the ones whose observations are identical (duplicates, named, never
hidden). Knows the project's settings and the catalog's records, nothing of the renderers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from verify.config.project import project_files
from verify.config.settings import ProjectConfig
from verify.mutation import Mutation
from verify.observe.compare import Tolerance
from verify.observe.explain import Explanation, GateFacts, explain
from verify.observe.session import (
    ChildLimits,
    GateWorkloads,
    Observed,
    ObserveHarnessError,
    ObserveJob,
    ObserveTreeError,
    SessionOptions,
    observe_mutants,
)

__all__ = ["ExplainRun", "NoObserverError", "explain_catalog", "explain_overrides", "mutant_texts"]


class NoObserverError(Exception):
    """The project names no observer: `[tool.dflash] observe` is unset."""


@dataclass(frozen=True, slots=True)
class ExplainRun:
    explanations: Mapping[str, Explanation]
    failures: Mapping[str, str]  # the harness's trouble per mutant: no explanation, never a verdict
    duplicates: tuple[tuple[str, ...], ...]  # groups of mutants with identical observations, first named first
    workloads: tuple[str, ...]
    compared: tuple[str, ...]
    tolerance: Tolerance
    pristine_s: float

    @property
    def equivalent(self) -> tuple[str, ...]:
        return tuple(name for name, e in self.explanations.items() if e.is_equivalent)

    @property
    def observable(self) -> tuple[str, ...]:
        return tuple(name for name, e in self.explanations.items() if e.first is not None)

    @property
    def unobserved(self) -> tuple[str, ...]:
        """No divergence, but the workloads never ran some changed line or way: no claim either way."""
        return tuple(name for name, e in self.explanations.items() if e.is_unobserved)

    @property
    def num_duplicates(self) -> int:
        """Mutants counted once with the first of their group: the group's size less one, summed."""
        return sum(len(group) - 1 for group in self.duplicates)


def mutant_texts(mutations: Mapping[str, Mutation], root: Path) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """Each catalog mutation's mutated file, and why the ones that no longer apply were left out."""
    from verify.mutation.apply import Applied, apply_mutation

    texts, stale = {}, {}
    for name, mutation in mutations.items():
        applied = apply_mutation(mutation, root)
        if isinstance(applied, Applied):
            texts[name] = {applied.file: applied.mutated}
        else:
            stale[name] = f"stale: {applied.reason}"
    return texts, stale


def _group(observed: Observed) -> tuple[tuple[str, ...], ...]:
    """Mutants whose observations are identical, bit for bit, and differ from the pristine tree's (a mutant with
    no divergence is no one's duplicate: with the gates as workloads each mutant runs its own gates, so its
    digest is not the pristine run's even where nothing differs)."""
    groups: dict[str, list[str]] = {}
    for name in sorted(observed.digests):
        digest = observed.digests[name]
        comparison = observed.comparisons.get(name)
        if digest != observed.pristine_digest and comparison is not None and not comparison.is_equivalent:
            groups.setdefault(digest, []).append(name)
    return tuple(tuple(group) for group in groups.values() if len(group) > 1)


def _gate_workloads(config: ProjectConfig, mutants: Mapping[str, Mapping[str, str]]) -> GateWorkloads:
    """The gates to run as workloads: where the run's coverage map for this very tree is cached
    (`.dflash-cache`, written by `dflash verify`), only the gates it says reach some mutant's rewritten lines;
    otherwise every gate (the pristine run then measures which reach each mutant)."""
    from verify.observe import reach
    from verify.run.phases import cache as cache_mod

    paths: tuple[str, ...] = ()
    cached = cache_mod.ResultCache(config.root, True).get_baseline(cache_mod.tree_digest(config))
    if cached is not None:
        lines = cached.get("coverage", {}).get("lines", {})
        gate_ids = tuple(str(g["gate_id"]) for g in cached.get("baseline", {}).get("gates", ()))
        texts = {rel: (config.root / rel).read_text() for overrides in mutants.values() for rel in overrides}
        reaching = {
            g for overrides in mutants.values() for g in reach.gates_reaching(lines, texts, overrides, gate_ids)
        }
        paths = tuple(g for g in gate_ids if g in reaching)
    options = (*config.marker_args, *config.pytest_args)
    return GateWorkloads(paths or tuple(config.gates), options, tuple(config.source_roots))


def _facts(observed: Observed, name: str) -> GateFacts:
    return GateFacts(observed.gates_run.get(name, ()), observed.gate_comparisons.get(name), observed.functions,
                     observed.capped.get(name, {}), observed.unstable)  # fmt: skip


def explain_overrides(
    config: ProjectConfig, mutants: Mapping[str, Mapping[str, str]], options: SessionOptions | None = None
) -> ExplainRun:
    """Observe and explain mutants given as their mutated files' texts: on the observer's workloads where the
    project names one, and on its gates (their functions' returns recorded) unless `options.gate_workloads` is
    off. Raises ObserveHarnessError when the pristine tree fails its own observation run (ObserveTreeError, one
    of them, when the user's files changed meanwhile), NoObserverError when there is nothing to observe (no
    observer, and the gates are off)."""
    options = options or SessionOptions()
    if not config.observe and not options.gate_workloads:
        raise NoObserverError(
            "[tool.dflash] names no observer and the gates are not run as workloads: nothing to observe "
            "(docs/how-to/observe.md)"
        )
    # The children's ceilings and writable paths are a verify run's: the same regime for every child.
    limits = ChildLimits(config.memory_factor, config.memory_min_mb, config.processes_max, config.file_max_mb,
                         config.writable)  # fmt: skip
    job = ObserveJob(
        config.root, tuple(project_files(config)), config.import_paths, config.source_packages, config.observe,
        mutants, options, limits, _gate_workloads(config, mutants) if options.gate_workloads else None,
    )  # fmt: skip
    observed = observe_mutants(job)
    groups = () if options.first_only else _group(observed)
    first_of = {name: group[0] for group in groups for name in group[1:]}
    explanations = {
        name: explain(
            name,
            observed.comparisons[name],
            observed.gates,
            first_of.get(name, ""),
            observed.reach.get(name, {}),
            _facts(observed, name) if job.gates is not None else None,
        )
        for name in mutants
        if name in observed.comparisons
    }
    return ExplainRun(
        explanations, dict(observed.failures), groups, observed.workloads, observed.compared, options.tolerance,
        observed.seconds,
    )  # fmt: skip


def explain_catalog(
    config: ProjectConfig, mutations: Mapping[str, Mutation], options: SessionOptions | None = None
) -> ExplainRun:
    """Explain registered mutations; one that no longer applies is a failure (stale), not an explanation."""
    texts, stale = mutant_texts(mutations, config.root)
    run = explain_overrides(config, texts, options)
    return ExplainRun(
        run.explanations, {**run.failures, **stale}, run.duplicates, run.workloads, run.compared, run.tolerance,
        run.pristine_s,
    )  # fmt: skip


__all__ += ["ObserveHarnessError", "ObserveTreeError", "SessionOptions"]
