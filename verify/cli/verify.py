"""`dflash verify` (run the mutation matrix, merge shard reports) and `dflash mutations` (the catalog).

Each command parses, calls one library function, writes the requested reports and renders. Exit
codes: 0 every required mutation killed or caught, nothing stale, no pinned killer lost, score >=
--fail-under; 1 otherwise; 2 usage or config errors; 3 a red or flaky baseline, or a failed harness
self-check; 4 the harness could not reach a verdict for some mutation (error); 130/143 interrupted by
SIGINT/SIGTERM (finished verdicts are cached and in the partial report).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from verify.mutation import MutationError
from verify.report.files import Detail, MergeError, merge, write_json, write_junit, write_stryker
from verify.report.html import write_html
from verify.report.terminal import (
    PhaseProgress,
    render_error,
    render_failures,
    render_mutation,
    render_mutations,
    render_report,
)
from verify.report.verdict import RunReport
from verify.run.apply import Stale, apply_mutation, details_for
from verify.run.cache import ChangedSinceError, ResultCache
from verify.run.executor import interrupt_signal
from verify.run.phases import BaselineError, HarnessError, RunOptions, SelectionError, Shard, run_verify
from verify.run.settings import ConfigError, load_config, load_mutations

__all__ = ["mutations_app", "verify_app"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_HARNESS, EXIT_ERROR = 0, 1, 2, 3, 4
EXIT_SIGNAL = {"SIGINT": 130, "SIGTERM": 143}

verify_app = typer.Typer(add_completion=False, help=__doc__)
mutations_app = typer.Typer(add_completion=False, no_args_is_help=True, help="The registered mutation catalog.")

ProjectOption = Annotated[Path, typer.Option("--project", help="Project root holding pyproject.toml [tool.dflash].")]
JsonOption = Annotated[Path | None, typer.Option("--json", help="Write the dflash-verify/1 JSON report here.")]
JunitOption = Annotated[Path | None, typer.Option("--junit", help="Write JUnit XML (one testcase per mutation).")]
HtmlOption = Annotated[Path | None, typer.Option("--html", help="Write the offline HTML heatmap.")]
FailUnderOption = Annotated[
    float, typer.Option("--fail-under", min=0.0, max=1.0, help="Fail when the score (0..1) is below this.")
]


def _write(
    report: RunReport, details: dict[str, Detail], json: Path | None, junit: Path | None, html: Path | None
) -> None:
    if json is not None:
        write_json(report, json, details)
    if junit is not None:
        write_junit(report, junit, details)
    if html is not None:
        write_html(report, html, details)


def _exit_code(report: RunReport, failures: tuple[str, ...]) -> int:
    if report.interrupted_by:
        return EXIT_SIGNAL.get(report.interrupted_by, 130)
    if report.errors or report.harness_errors:
        return EXIT_ERROR
    return EXIT_FAILED if failures else EXIT_OK


def _finish(report: RunReport, fail_under: float) -> None:
    render_report(report)
    failures = report.failures(fail_under)
    render_failures(failures + report.harness_errors)
    for result in report.errors:
        render_error(f"{result.name}: no verdict ({result.reason})")
    if report.interrupted_by:
        done = sum(1 for r in report.mutations if r.status.is_judged or r.status.value in ("stale", "skipped"))
        render_error(
            f"interrupted by {report.interrupted_by}: {done} mutations finished (cached; the next run resumes)"
        )
    raise typer.Exit(_exit_code(report, failures))


@verify_app.callback(invoke_without_command=True)
def verify(
    ctx: typer.Context,
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=0, help="Children at once (0: the config's jobs).")] = 0,
    all_gates: Annotated[bool, typer.Option("--all-gates", help="Run every gate, not only those reaching.")] = False,
    changed_since: Annotated[str | None, typer.Option("--changed-since", help="Only what changed since REV.")] = None,
    shard: Annotated[str | None, typer.Option("--shard", help="Run slice K/N of the sorted mutations.")] = None,
    json: JsonOption = None,
    junit: JunitOption = None,
    html: HtmlOption = None,
    stryker: Annotated[Path | None, typer.Option("--stryker", help="Write Stryker mutation-testing JSON.")] = None,
    fail_under: FailUnderOption = 0.0,
    mutation: Annotated[
        list[str] | None, typer.Option("--mutation", "-m", help="Only this mutation (repeatable).")
    ] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Neither read nor write .dflash-cache/.")] = False,
    clear_cache: Annotated[
        bool, typer.Option("--clear-cache", help="Delete .dflash-cache/ first, then run (everything re-runs).")
    ] = False,
    project: ProjectOption = Path("."),
) -> None:
    """Run every registered mutation against the gates and report which gates catch which bugs."""
    if ctx.invoked_subcommand is not None:
        return
    try:
        config = load_config(project)
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
        )
        cache = ResultCache(config.root, enabled=not no_cache)

        def partial(report: RunReport) -> None:
            # Written as results arrive, so an interrupted run leaves what it finished behind.
            if not no_cache:
                cache.directory.mkdir(exist_ok=True)
                write_json(report, cache.last_report)
            if json is not None:
                write_json(report, json)

        with PhaseProgress() as progress:
            report = run_verify(config, mutations, options, progress, on_report=partial)
    except (ConfigError, SelectionError, ChangedSinceError, MutationError) as error:
        render_error(str(error))
        raise typer.Exit(EXIT_USAGE) from None
    except (BaselineError, HarnessError) as error:
        render_error(str(error))
        raise typer.Exit(EXIT_HARNESS) from None
    except KeyboardInterrupt as error:
        signal_name = interrupt_signal(error)
        render_error(f"interrupted by {signal_name} before the baseline and self-check finished; nothing to report")
        raise typer.Exit(EXIT_SIGNAL.get(signal_name, 130)) from None
    details = details_for({r.name: mutations[r.name] for r in report.mutations}, config.root)
    _write(report, details, json, junit, html)
    if not no_cache:
        write_json(report, cache.last_report, details)
    if stryker is not None:
        write_stryker(report, stryker, details, config.root)
    _finish(report, fail_under)


@verify_app.command("merge")
def merge_reports(
    files: Annotated[list[Path], typer.Argument(help="Shard reports written with --json.")],
    json: JsonOption = None,
    junit: JunitOption = None,
    html: HtmlOption = None,
    fail_under: FailUnderOption = 0.0,
) -> None:
    """Join the JSON reports of `dflash verify --shard K/N` runs into one report."""
    try:
        report, details = merge(files)
    except MergeError as error:
        render_error(str(error))
        raise typer.Exit(EXIT_USAGE) from None
    _write(report, details, json, junit, html)
    _finish(report, fail_under)


@mutations_app.command("list")
def list_mutations(project: ProjectOption = Path(".")) -> None:
    """List the registered mutations: name, file, bug class and pinned killers."""
    try:
        render_mutations(load_mutations(load_config(project)))
    except ConfigError as error:
        render_error(str(error))
        raise typer.Exit(EXIT_USAGE) from None


@mutations_app.command("show")
def show_mutation(name: str, project: ProjectOption = Path(".")) -> None:
    """Print one mutation's bug class and its diff against the current source."""
    try:
        config = load_config(project)
        mutations = load_mutations(config)
        if name not in mutations:
            raise ConfigError(f"unknown mutation {name!r}")
    except ConfigError as error:
        render_error(str(error))
        raise typer.Exit(EXIT_USAGE) from None
    applied = apply_mutation(mutations[name], config.root)
    detail = details_for({name: mutations[name]}, config.root)[name]
    render_mutation(mutations[name], detail, applied.reason if isinstance(applied, Stale) else "")
