"""`dflash verify explain NAME` and `dflash sweep explain MUTANT`: observe the pristine and the mutated runner
side by side in private copies and say what the mutant changes first, what else, what stays equal, and which
kind of gate would see it. Parse, call `verify.observe.api`, print plain text; torch loads inside the command.

Without an observer the project's gates that reach the change are the workloads (`verify.observe.gate_record`).
Exit codes: 0 explained (observable or observably equivalent); 2 bad input (unknown name, a stale mutant); 3
the pristine tree fails its own observation run, or the observation harness failed for a mutant (named, never
an explanation); 4 the user's files changed while the observation ran (named: nothing observed is trusted).
"""

from __future__ import annotations

import json as json_module
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from verify.cli.mutations import ProjectOption

__all__ = ["explain_mutation", "explain_sweep_mutant"]

EXIT_USAGE, EXIT_HARNESS, EXIT_TREE = 2, 3, 4

JobsOption = Annotated[int, typer.Option("--jobs", "-j", min=1, help="Mutants observed at once.")]
JsonOut = Annotated[Path | None, typer.Option("--json", help="Also write the explanations here as JSON.")]

T = TypeVar("T")


def _fail(message: str, code: int) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def _render(run: Any, json_path: Path | None) -> None:
    for explanation in run.explanations.values():
        typer.echo(explanation.text())
        typer.echo("")
    for group in run.duplicates:
        typer.echo(f"duplicates (identical observations, counted once): {', '.join(group)}")
    equivalent, observable, unobserved = len(run.equivalent), len(run.observable), len(run.unobserved)
    typer.echo(
        f"{observable} observable, {equivalent} observably equivalent, {run.num_duplicates} duplicates, "
        f"{unobserved} not observed; "
        f"{len(run.workloads)} workloads, {len(run.compared)} observables, pristine run {run.pristine_s:.1f} s"
    )
    if json_path is not None:
        data = {
            "explanations": {name: e.to_dict() for name, e in run.explanations.items()},
            "duplicates": [list(group) for group in run.duplicates],
            "failures": dict(run.failures),
            "tolerance": str(run.tolerance),
        }
        json_path.write_text(json_module.dumps(data, indent=2) + "\n")


def _observed(observe: Callable[[], T]) -> T:
    """What `observe` returns; no observer is a usage error (exit 2), the observation's own failure exit 3, a
    change to the user's files exit 4."""
    from verify.observe.api import NoObserverError, ObserveHarnessError, ObserveTreeError

    try:
        return observe()
    except NoObserverError as error:
        raise _fail(str(error), EXIT_USAGE) from None
    except ObserveTreeError as error:
        raise _fail(f"harness error: {error}", EXIT_TREE) from None
    except ObserveHarnessError as error:
        raise _fail(f"harness error: {error}", EXIT_HARNESS) from None


def _exit_on_failures(run: Any) -> None:
    """Mutants the harness got no observation of: each named, then exit 3 (never an explanation)."""
    if run.failures:
        for name, why in run.failures.items():
            typer.echo(f"error: harness error for {name}: no observation: {why.strip().splitlines()[-1]}", err=True)
        raise typer.Exit(EXIT_HARNESS)


def _explain(config: Any, mutants: Mapping[str, Mapping[str, str]], jobs: int, json_path: Path | None) -> None:
    from verify.observe.api import SessionOptions, explain_overrides

    run = _observed(lambda: explain_overrides(config, mutants, SessionOptions(jobs=jobs)))
    _render(run, json_path)
    _exit_on_failures(run)


def explain_mutation(
    names: Annotated[list[str], typer.Argument(metavar="NAME...", help="Registered mutations to explain.")],
    jobs: JobsOption = 1,
    json: JsonOut = None,
    project: ProjectOption = Path("."),
) -> None:
    """Explain what a mutation changes: the first diverging observable and the gate that would see it.

    Runs the pristine and the mutated code side by side in private copies, on the observer's workloads
    ([tool.dflash] observe) or, without one, on your gates that reach the change (what your source roots'
    functions return, recorded in call order), and prints the first divergence (where, what, by how much),
    what else diverges after it, what stays equal and the gates that reach it, measured in the run. No
    divergence: "observably equivalent on these fixtures", with what was compared. Exit 0 explained; 2
    unknown name; 3 the pristine tree fails its own observation run; 4 the user's files changed while it ran.

    \b
    Examples:
      dflash verify explain store-window
      dflash verify explain rejection-ignores-draft-prob greedy-accepts-one-extra --jobs 2
    """
    from verify.config.catalog import load_mutations
    from verify.config.settings import ConfigError, load_config
    from verify.mutation import MutationError, unknown_names
    from verify.observe.api import mutant_texts

    try:
        config = load_config(project)
        catalog = load_mutations(config)
    except (ConfigError, MutationError) as error:
        raise _fail(str(error), EXIT_USAGE) from None
    unknown = [name for name in names if name not in catalog]
    if unknown:
        raise _fail(unknown_names(unknown, catalog), EXIT_USAGE)
    texts, stale = mutant_texts({name: catalog[name] for name in names}, config.root)
    if stale:
        raise _fail("; ".join(f"{name}: {why}" for name, why in stale.items()), EXIT_USAGE)
    _explain(config, texts, jobs, json)


def explain_sweep_mutant(
    mutants: Annotated[
        list[str] | None,
        typer.Argument(metavar="[MUTANT]...", help="mutmut keys from the saved sweep (default: every survivor)."),
    ] = None,
    jobs: JobsOption = 1,
    json: JsonOut = None,
    write_equivalents: Annotated[
        bool,
        typer.Option(
            "--write-equivalents",
            help="Append the observably equivalent survivors to the equivalents file, with their evidence.",
        ),
    ] = False,
    add_evidence: Annotated[
        bool,
        typer.Option(
            "--add-evidence",
            help="With --marked: add the observation's evidence to the equivalents file's entries it supports.",
        ),
    ] = False,
    marked: Annotated[
        bool,
        typer.Option("--marked", help="Also observe the mutants the equivalents file marks, to check its arguments."),
    ] = False,
    equivalents_file: Annotated[
        Path | None, typer.Option("--equivalents", help="The equivalents file [default: mutations/equivalents.toml]")
    ] = None,
    root: Annotated[Path, typer.Option(help="The project root (holds pyproject.toml).")] = Path("."),
    state: Annotated[Path | None, typer.Option(help="The saved sweep (default: in the user cache).")] = None,
) -> None:
    """Explain a sweep's mutants as `dflash verify explain` does, or sort all its survivors.

    With no MUTANT, every survivor of the saved sweep is observed and sorted: observably equivalent,
    observable (with its first divergence) and duplicates (identical observations, counted once);
    --write-equivalents appends the observably equivalent ones to the equivalents file with their evidence.

    \b
    Examples:
      dflash sweep explain 'runner.batch.x_compact__mutmut_3'
      dflash sweep explain --jobs 2 --write-equivalents
    """
    from verify.config.settings import ConfigError, load_config
    from verify.observe.api import SessionOptions
    from verify.sweep import equivalents
    from verify.sweep import report as sweep_report
    from verify.sweep.triage import TriageError, annotate_equivalents, sweep_mutant_texts, triage
    from verify.sweep.triage import write_equivalents as append_equivalents

    try:
        config = load_config(root)
        saved = state or sweep_report.default_state_path(config.root)
        if not saved.is_file():
            raise _fail(f"no saved sweep at {saved}: run `dflash sweep` first", EXIT_USAGE)
        result = sweep_report.result_from_json(json_module.loads(saved.read_text("utf-8")))
        if mutants:
            texts = sweep_mutant_texts(config.root, result, mutants)
    except (ConfigError, TriageError, ValueError) as error:
        raise _fail(str(error), EXIT_USAGE) from None
    if mutants:
        _explain(config, texts, jobs, json)
        return
    found = _observed(lambda: triage(config, result, SessionOptions(jobs=jobs), include_marked=marked))
    _render(found.run, json)
    typer.echo("triage: " + ", ".join(f"{what} {n}" for what, n in found.counts.items()))
    path = config.root / (equivalents_file or equivalents.DEFAULT_PATH)
    if add_evidence:
        typer.echo(f"{annotate_equivalents(path, found, result)} entries of {path} gained the observation's evidence")
    if write_equivalents:
        typer.echo(f"{append_equivalents(path, found, result)} observably equivalent survivors written to {path}")
    _exit_on_failures(found.run)


def add_explanations(
    config: Any,
    mutations: Mapping[str, Any],
    report: Any,
    details: dict[str, Any],
    options: Any = None,
    problems: list[str] | None = None,
    use_cache: bool = True,
) -> dict[str, Any]:
    """A verify run's survivors (declared ones included) with their explanation in their report detail. The
    observation's own trouble is printed by name and leaves the verdicts and the exit code alone; a change to
    the user's files while it ran is printed and added to `problems` (the run's harness errors: exit 4). An
    explanation of the same mutant on the same tree is re-used from the cache (`verify.observe.kept`) unless
    `use_cache` is off; only the others are observed."""
    import dataclasses

    from verify.observe.api import NoObserverError, ObserveHarnessError, ObserveTreeError, explain_catalog, mutant_texts
    from verify.observe.kept import KeptExplanation, KeptExplanations
    from verify.report.verdict import Status
    from verify.run.phases.cache import tree_digest

    survivors = {
        r.name: mutations[r.name] for r in report.mutations if r.status == Status.SURVIVED and r.name in mutations
    }
    if not survivors:
        return details
    texts, _ = mutant_texts(survivors, config.root)  # a stale one has no text: explain_catalog names it
    store = KeptExplanations(config, tree_digest(config), enabled=use_cache)
    explained = dict(details)

    def show(name: str, summary: str, text: str) -> None:
        if name in explained:
            explained[name] = dataclasses.replace(explained[name], divergence=summary, explanation=text)

    for name in list(survivors):
        if name in texts and (kept := store.get(texts[name])) is not None:
            show(name, kept.summary, kept.text)
            del survivors[name]
    if not survivors:
        return explained
    try:
        run = explain_catalog(config, survivors, options)
    except NoObserverError:
        typer.echo("survivors not explained: no observer, and the gates are not run as workloads", err=True)
        return explained
    except ObserveTreeError as error:
        typer.echo(f"error: survivors not explained: harness error: {error}", err=True)
        if problems is not None:
            problems.append(f"explaining the survivors: {error}")
        return explained
    except ObserveHarnessError as error:
        typer.echo(f"error: survivors not explained: harness error: {error}", err=True)
        return explained
    for name, why in run.failures.items():
        typer.echo(f"error: {name} not explained: harness error: {why.strip().splitlines()[-1]}", err=True)
    for name, explanation in run.explanations.items():
        show(name, explanation.summary(), explanation.text())
        if name in texts:
            store.put(texts[name], KeptExplanation(explanation.summary(), explanation.text()))
    return explained


def triage_survivors(config: Any, result: Any, jobs: int) -> Any:
    """A finished sweep's survivors sorted by observation, or None (printed why) when they cannot be observed."""
    from verify.observe.api import NoObserverError, ObserveHarnessError, SessionOptions
    from verify.sweep.triage import triage

    try:
        return triage(config, result, SessionOptions(jobs=max(1, jobs)))
    except NoObserverError:
        typer.echo("survivors not sorted by observation: no observer, and the gates are not run as workloads", err=True)
    except ObserveHarnessError as error:
        typer.echo(f"error: survivors not sorted by observation: harness error: {error}", err=True)
    return None
