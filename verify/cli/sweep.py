"""`dflash sweep [PATHS...]` and `dflash sweep promote MUTANT NAME`: parse, call the sweep, render.

mutmut, libcst and rich load inside the commands, never at `dflash --help`. Exit codes: 0 the score reached
--fail-under; 1 it did not (or the sweep was interrupted); 2 bad input, or a mutmut other than the one the sweep
reads; 3 mutmut could not run the gates (a red clean run, an unseen forced failure); 4 some mutant got no verdict
(pytest interrupted or failed internally, an exit code mutmut cannot classify), as in `dflash verify`."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from verify.cli.explain import explain_sweep_mutant, triage_survivors

EXIT_FAIL, EXIT_INPUT, EXIT_HARNESS, EXIT_NO_VERDICT = 1, 2, 3, 4


class _SweepGroup(TyperGroup):
    """`sweep` takes PATHS itself and has subcommands: a known subcommand name is never taken as a path, and
    options may follow the paths (`dflash sweep runner/draft.py --jobs 2`)."""

    allow_interspersed_args = True

    # `ctx` is typer's vendored click Context; Any keeps this override independent of where click lives.
    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] in self.commands:
            super().parse_args(ctx, [])  # the group's own options keep their defaults
            ctx._protected_args, ctx.args = args[:1], args[1:]
            return list(ctx.args)
        return super().parse_args(ctx, args)


sweep_app = typer.Typer(
    cls=_SweepGroup,
    add_completion=False,
    rich_markup_mode=None,
    help="""Run mutmut's operator mutants of the runner against the gates and report what survives.

Where `dflash verify` runs the named catalog, a sweep tries every small operator change (a + for a -, a
< for a <=, a dropped call) in a private copy, with the gates as the test suite, and groups survivors by
module and function beside the registered mutations that already touch them. Equivalent mutants are
marked once, with a reason, in mutations/equivalents.toml.

\b
Examples:
  dflash sweep runner/batch.py runner/sampling.py --jobs 2
  dflash sweep --changed-since origin/main --budget 10m
  dflash sweep promote 'runner.batch.x_compact__mutmut_3' batch-compaction-skips-row
""",
)

Root = Annotated[Path, typer.Option(help="The project root (holds pyproject.toml).")]
State = Annotated[Path | None, typer.Option(help="Where the sweep is saved for promote (default: in the user cache).")]


def _fail(message: str, code: int = EXIT_INPUT) -> typer.Exit:
    from verify.report.terminal import render_error

    render_error(message)
    return typer.Exit(code)


def _read_json(path: Path, what: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise _fail(f"cannot read {what} {path}: {error}") from None
    if not isinstance(data, dict):
        raise _fail(f"{what} {path} is not a JSON object")
    return data


@sweep_app.callback(invoke_without_command=True)
def sweep(
    ctx: typer.Context,
    paths: Annotated[
        list[str] | None, typer.Argument(help="Runner modules or folders (default: the project's source_roots).")
    ] = None,
    root: Root = Path("."),
    jobs: Annotated[
        int | None, typer.Option("--jobs", "-j", help="Mutants tested in parallel [default: one per CPU].")
    ] = None,
    budget: Annotated[str | None, typer.Option(help="Stop cleanly after this long, e.g. 10m or 1h30m.")] = None,
    changed_since: Annotated[str | None, typer.Option(help="Only modules changed since this git revision.")] = None,
    fail_under: Annotated[float, typer.Option(help="Exit 1 when the score (killed/scored) is below this.")] = 1.0,
    equivalents_file: Annotated[
        Path | None,
        typer.Option(
            "--equivalents", help="Equivalent mutants file, relative to the root [default: mutations/equivalents.toml]"
        ),
    ] = None,
    verify_report: Annotated[
        Path | None, typer.Option(help="A `dflash verify --json` report whose catalog verdicts go beside the sweep's.")
    ] = None,
    json_path: Annotated[Path | None, typer.Option("--json", help="Write the JSON report here.")] = None,
    junit: Annotated[Path | None, typer.Option(help="Write a JUnit XML report here.")] = None,
    html: Annotated[Path | None, typer.Option(help="Write an HTML report here.")] = None,
    stryker: Annotated[
        Path | None, typer.Option(help="Write a Stryker mutation-testing-elements JSON report here.")
    ] = None,
    state: State = None,
    workdir: Annotated[Path | None, typer.Option(help="Make (and keep) the private copy here.")] = None,
    no_explain: Annotated[
        bool, typer.Option("--no-explain", help="Do not sort the survivors by observation (`dflash sweep explain`).")
    ] = False,
) -> None:
    if ctx.invoked_subcommand is not None:
        return
    from verify.sweep.requirement import MutmutVersionError, require_mutmut

    try:  # before anything imports mutmut: another version would fail there with a traceback
        require_mutmut()
    except MutmutVersionError as error:
        raise _fail(str(error)) from None
    from verify.cli.reporting import run_info
    from verify.config.catalog import load_mutations
    from verify.config.settings import ConfigError, load_config
    from verify.report.summary import judge
    from verify.report.verdict import Status
    from verify.sweep import equivalents
    from verify.sweep import render as sweep_render
    from verify.sweep import report as sweep_report
    from verify.sweep.driver import DEFAULT_JOBS, SweepConfig, SweepInputError, parse_budget, run_sweep
    from verify.sweep.result import SweepOutcome
    from verify.sweep.triage import explanations_of, triage_table
    from verify.sweep.verdicts import to_run_report

    try:
        project = load_config(root)
        config = SweepConfig(
            root=project.root,
            paths=tuple(paths or project.source_roots),
            jobs=DEFAULT_JOBS if jobs is None else jobs,
            budget_s=parse_budget(budget) if budget is not None else None,
            changed_since=changed_since,
            equivalents=equivalents.DEFAULT_PATH if equivalents_file is None else equivalents_file,
            workdir=workdir.resolve() if workdir else None,
            gates=project.gates,
            gate_marker=project.gate_marker,
            import_paths=project.import_paths,
            extra_args=project.pytest_extra(),
            writable=project.writable,
            memory_factor=project.memory_factor,
            memory_min_mb=project.memory_min_mb,
            processes_max=project.processes_max,
            file_max_mb=project.file_max_mb,
        )
        catalog = load_mutations(project)
        verify_data = _read_json(verify_report, "verify report") if verify_report else None
        with sweep_render.progress_display() as on_progress:
            result = run_sweep(config, on_progress)
    except (ConfigError, SweepInputError, equivalents.EquivalentsError) as error:
        raise _fail(str(error)) from None
    settings = {"paths": list(config.paths), "jobs": config.jobs, "budget_s": config.budget_s, "fail_under": fail_under,
                "changed_since": changed_since, "equivalents": str(config.equivalents)}  # fmt: skip
    info = dataclasses.replace(
        run_info(project.root, settings, round(result.wall_s, 3), fail_under), title="dflash sweep"
    )
    sweep_report.write_json(state or sweep_report.default_state_path(project.root), result, catalog, info=info)
    survived = any(m.status is Status.SURVIVED for m in result.mutants)  # `no tests` mutants included
    explain = survived and not no_explain and not result.harness_errors  # no survivor stands when the tree changed
    found = triage_survivors(project, result, config.jobs) if explain else None
    explanations = explanations_of(found) if found else None
    files = (json_path, junit, html, stryker)
    written = sweep_report.write_reports(result, catalog, info, files, verify_data, explanations)
    # The sweep in `dflash verify`'s verdict model: the terminal, every file and the exit code judge it alike.
    report, details = to_run_report(result)
    details = sweep_report.explained(details, explanations)
    verdict = judge(report, fail_under)
    tables = sweep_report.tables(result, catalog) + ((triage_table(found),) if found else ())
    sweep_render.render_result(result, report, details, tables, verdict, written)
    if result.outcome == SweepOutcome.FAILED:
        raise typer.Exit(EXIT_HARNESS)
    if result.harness_errors:  # the project changed while mutmut ran: no verdict of this sweep stands
        raise typer.Exit(EXIT_NO_VERDICT)
    if verdict.failures:  # the score under --fail-under, or interrupted
        raise typer.Exit(EXIT_FAIL)
    if report.errors:  # as `dflash verify`: a mutant with no verdict is outside the score, never a pass
        raise typer.Exit(EXIT_NO_VERDICT)


@sweep_app.command()
def promote(
    mutant: Annotated[str, typer.Argument(help="The survivor's mutmut key, as the sweep report shows it.")],
    name: Annotated[str, typer.Argument(help="The new mutation's kebab-case name.")],
    root: Root = Path("."),
    state: State = None,
    into: Annotated[Path | None, typer.Option(help="The catalog module to append to.")] = None,
) -> None:
    """Turn a sweep survivor into a registered mutation in the catalog (then fill in its bug_class line).

    \b
    Example:
      dflash sweep promote 'runner.batch.x_compact__mutmut_3' batch-compaction-skips-row
    """
    from verify.config.catalog import load_mutations
    from verify.config.settings import ConfigError, load_config
    from verify.sweep import promote as sweep_promote
    from verify.sweep import render as sweep_render
    from verify.sweep import report as sweep_report

    try:
        project = load_config(root)
        saved = state or sweep_report.default_state_path(project.root)
        if not saved.is_file():
            raise _fail(f"no saved sweep at {saved}: run `dflash sweep` first")
        result = sweep_report.result_from_json(_read_json(saved, "saved sweep"))
        survivor = sweep_promote.find_survivor(result, mutant)
        target = into or sweep_promote.catalog_file(project.root, project.mutation_modules[0], survivor)
        mutation = sweep_promote.promote(project.root, survivor, name, load_mutations(project), target)
    except (ConfigError, ValueError) as error:
        raise _fail(str(error)) from None
    sweep_render.render_note(
        f"registered {mutation.name!r} in {target}: fill in its bug_class; `dflash verify` pins it once a gate kills it"
    )


sweep_app.command("explain")(explain_sweep_mutant)
