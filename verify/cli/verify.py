"""`dflash verify`: run the mutation matrix; `verify merge` joins shard reports; `verify show` re-renders one.

Imports only typer at module level (the run, pytest, torch and rich load inside the command), so `--help`
answers at once. Exit codes: 0 pass; 1 fail (a required mutation not killed, a stale one, a lost pin, the
score under --fail-under); 2 usage or configuration errors; 3 a red or flaky baseline or a failed harness
self-check; 4 the harness could not reach a verdict for some mutation (error); 130/143 interrupted by
SIGINT/SIGTERM (finished verdicts are cached and in the partial report).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from verify.cli.explain import add_explanations, explain_mutation
from verify.cli.mutations import ProjectOption
from verify.cli.reporting import (
    EXIT_ERROR,
    EXIT_HARNESS,
    EXIT_SIGNAL,
    EXIT_USAGE,
    NO_OUTPUTS,
    ByOption,
    FailUnderOption,
    Outputs,
    finish,
    project_commit,
    report_options,
    save_last_report,
)
from verify.cli.show import show

__all__ = ["verify_app"]

verify_app = typer.Typer(
    add_completion=False,
    rich_markup_mode=None,
    help="""Run every registered mutation against the gates and report which gates catch which bug.

Phases: a baseline (every gate on the unmutated code, under coverage, its modules loaded the way each
mutant's are), a harness self-check (a forced failure must turn the gates red), then each mutation in a
forked child against the gates that reach its lines. Results are cached in .dflash-cache/, so a second run with
nothing changed replays them. The last line is the verdict: PASS or FAIL, what failed, time, reports.

\b
Examples:
  dflash verify                                  the whole catalog
  dflash verify -m walk-replaced-by-argmax       one mutation
  dflash verify --jobs 2 --html report.html --json report.json
  dflash verify --shard 1/4 --json shard-1.json  one CI shard; then `dflash verify merge`
  dflash verify --changed-since origin/main      only what a branch touches
  dflash verify --executor ray --ray-address HOST:6379   on a Ray cluster
  dflash verify --device cuda                    each child on its own GPU
  dflash verify --annotations github             survivors on their lines of a pull request
  dflash verify show                             the last run again, without running

\b
Exit codes: 0 pass; 1 fail; 2 usage or configuration error;
3 red or flaky baseline, or failed harness self-check;
4 the harness got no verdict for some mutation; 130/143 interrupted.
""",
)
verify_app.command("show")(show)
verify_app.command("explain")(explain_mutation)


@verify_app.callback(invoke_without_command=True)
@report_options()
def verify(
    ctx: typer.Context,
    jobs: Annotated[
        int,
        typer.Option("--jobs", "-j", min=0, help="Children run at once, in every phase (0: [tool.dflash] jobs)."),
    ] = 0,
    all_gates: Annotated[
        bool, typer.Option("--all-gates", help="Run every gate for every mutation, not only the gates reaching it.")
    ] = False,
    first_kill: Annotated[
        bool,
        typer.Option(
            "--first-kill",
            help="Stop each mutation's gates at its first kill, once its pinned gates ran (PIT's and Stryker's "
            "default): much faster, same verdicts; the matrix shows only the gates that ran, no vacuous-gate list.",
        ),
    ] = False,
    changed_since: Annotated[
        str | None, typer.Option("--changed-since", metavar="REV", help="Only mutations whose file or gates changed.")
    ] = None,
    shard: Annotated[
        str | None, typer.Option("--shard", metavar="K/N", help="Run slice K of N of the sorted mutations.")
    ] = None,
    outputs: Outputs = NO_OUTPUTS,  # one option a report format, and --annotations (report_options)
    fail_under: FailUnderOption = 0.0,
    mutation: Annotated[
        list[str] | None, typer.Option("--mutation", "-m", metavar="NAME", help="Only this mutation (repeatable).")
    ] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Neither read nor write .dflash-cache/.")] = False,
    clear_cache: Annotated[
        bool, typer.Option("--clear-cache", help="Delete .dflash-cache/ first, then run (everything re-runs).")
    ] = False,
    by: ByOption = "file",
    project: ProjectOption = Path("."),
    executor: Annotated[
        str | None,
        typer.Option(
            "--executor",
            metavar="fork|ray",
            help="Where children run: fork (this machine) or ray (a Ray cluster; needs "
            "pip install 'ray>=2.40'). Default: [tool.dflash] executor, else fork.",
        ),
    ] = None,
    ray_address: Annotated[
        str | None,
        typer.Option(
            "--ray-address",
            metavar="ADDR",
            help="The Ray cluster for --executor ray (default: RAY_ADDRESS, else a local cluster for the run).",
        ),
    ] = None,
    device: Annotated[
        str | None,
        typer.Option(
            "--device",
            metavar="cpu|cuda",
            help="The device the gates build their engines on; cuda gives each forked child its own GPU and "
            "--jobs defaults to the number of GPUs. Default: [tool.dflash] device, else cpu.",
        ),
    ] = None,
    no_explain: Annotated[
        bool, typer.Option("--no-explain", help="Do not explain survivors (their first diverging observable).")
    ] = False,
    count: Annotated[
        str | None,
        typer.Option(
            "--count",
            metavar="killed|detected",
            help="What the CI gate counts as a catch: killed (a gate's own check fired: killed or caught) or "
            "detected (crashed and timeout too, for tests that fail by raising). Default: [tool.dflash] count, "
            "else killed.",
        ),
    ] = None,
) -> None:
    if ctx.invoked_subcommand is not None:
        return
    from verify.config.catalog import StaleAnchorError, load_mutations, stale_anchors
    from verify.config.settings import ConfigError, load_config, with_overrides
    from verify.mutation import MutationError
    from verify.report.json_report import write_json
    from verify.report.progress import PhaseProgress
    from verify.report.terminal import render_ceilings, render_confinement, render_error, render_node_confinement
    from verify.report.verdict import RunReport
    from verify.run.execution.interrupts import interrupt_signal
    from verify.run.execution.jobs import ExecutorLost
    from verify.run.phases.cache import ChangedSinceError, ResultCache
    from verify.run.phases.run import BaselineError, HarnessError, RunOptions, SelectionError, Shard, run_verify
    from verify.sandbox import cgroups, namespaces, secrets
    from verify.sandbox.confine import probe

    started = time.monotonic()
    commit = project_commit(project)  # the tree the run starts from, not the one it ends on
    try:
        config = with_overrides(load_config(project), executor=executor, device=device, count=count)
        secrets.start(reexec=config.executor != "ray")  # children fork here: from now on no process holds a secret
        if clear_cache:
            ResultCache(config.root).clear()
        mutations = load_mutations(config)
        options = RunOptions(
            jobs=jobs,
            all_gates=all_gates,
            changed_since=changed_since,
            shard=Shard.parse(shard) if shard else None,
            names=tuple(mutation or ()),
            use_cache=not no_cache,
            first_kill=first_kill,
            ray_address=ray_address,
            outputs=outputs.paths,
        )

        def partial(report: RunReport) -> None:
            # Written as results arrive, so an interrupted run leaves what it finished behind.
            if not no_cache:
                save_last_report(report, None, config.root)
            if (json := outputs.files.get("json")) is not None:
                write_json(report, json)

        # Stale anchors are said before the baseline, not found at the end of a long run (they get no job).
        if stale := stale_anchors(
            config, {n: m for n, m in mutations.items() if not options.names or n in options.names}
        ):
            render_error(str(StaleAnchorError(stale)))
        # Said once, before anything runs (the reports keep it too); on a cluster each node's, once probed.
        if config.executor != "ray" and (not (confinement := probe()).active or confinement.missing):
            render_confinement(confinement.describe())
        if config.executor != "ray" and not (layer := cgroups.probe()).active:
            render_ceilings(layer.describe())
        if config.executor != "ray" and not (layers := namespaces.probe()).full:
            render_confinement(layers.describe())
        with PhaseProgress() as progress:
            report = run_verify(config, mutations, options, progress, on_report=partial)
    except (ConfigError, SelectionError, ChangedSinceError, MutationError) as error:
        render_error(str(error))
        raise typer.Exit(EXIT_USAGE) from None
    except (BaselineError, HarnessError) as error:
        render_error(str(error))
        raise typer.Exit(EXIT_HARNESS) from None
    except ExecutorLost as error:  # before the mutations: nothing judged yet, nothing to report
        render_error(f"the run ended before its baseline and self-check finished, its executor lost: {error}")
        raise typer.Exit(EXIT_ERROR) from None
    except KeyboardInterrupt as error:
        signal_name = interrupt_signal(error)
        render_error(f"interrupted by {signal_name} before the baseline and self-check finished; nothing to report")
        raise typer.Exit(EXIT_SIGNAL.get(signal_name, 130)) from None
    if report.node_confinement:
        render_node_confinement(report.node_confinement)
    report, details = _explained(config, mutations, report, explain=not no_explain, use_cache=not no_cache)
    settings = {
        "jobs": report.jobs or jobs or config.num_jobs,  # as held: a cluster's capacity, not this machine's cores
        "all_gates": all_gates,
        "first_kill": first_kill,
        "changed_since": changed_since,
        "shard": shard,
        "mutations": list(mutation or ()),
        "use_cache": not no_cache,
        "fail_under": fail_under,
        "executor": config.executor,
        "device": config.device,
        "count": config.count,
    }
    code = finish(
        report, details, config.root, fail_under, started, settings, outputs, by, save_last=not no_cache, commit=commit
    )
    raise typer.Exit(code)


def _explained(
    config: Any, mutations: Any, report: Any, explain: bool, use_cache: bool = True
) -> tuple[Any, dict[str, Any]]:
    """The report's details, each survivor's explanation added unless asked not to; a change to the user's files
    while the survivors were observed is a harness error (exit 4)."""
    from verify.run.phases.details import details_for

    details = details_for({r.name: mutations[r.name] for r in report.mutations}, config.root)
    if explain:
        problems: list[str] = []
        details = add_explanations(config, mutations, report, details, problems=problems, use_cache=use_cache)
        if problems:
            report = dataclasses.replace(report, harness_errors=(*report.harness_errors, *problems))
    return report, details


@verify_app.command("merge")
@report_options()
def merge_reports(
    files: Annotated[list[Path], typer.Argument(help="The shard reports, written with --json.")],
    outputs: Outputs = NO_OUTPUTS,  # one option a report format, and --annotations (report_options)
    fail_under: FailUnderOption = 0.0,
    allow_partial: Annotated[
        bool, typer.Option("--allow-partial", help="Merge even when a shard is missing or was interrupted.")
    ] = False,
    by: ByOption = "file",
    project: ProjectOption = Path("."),
) -> None:
    """Join the JSON reports of `dflash verify --shard K/N` runs into one report, in any format.

    Refuses a set that misses a shard (1..N each exactly once) or holds an interrupted one, unless
    --allow-partial. Exit codes as `dflash verify`.

    \b
    Example:
      dflash verify merge shard-*.json --json all.json --html all.html --junit all.xml
      dflash verify merge shard-*.json --annotations github --codequality codequality.json
    """
    from verify.report.json_report import MergeError, merge
    from verify.report.terminal import render_error

    started = time.monotonic()
    try:
        report, details = merge(files, allow_partial=allow_partial)
    except MergeError as error:
        render_error(str(error))
        raise typer.Exit(EXIT_USAGE) from None
    settings = {"merged": [str(f) for f in files], "allow_partial": allow_partial, "fail_under": fail_under}
    code = finish(report, details, project, fail_under, started, settings, outputs, by)
    raise typer.Exit(code)
