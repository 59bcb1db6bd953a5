"""`dflash verify show`: render a finished report again (the last run's, or a JSON file), running nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from verify.cli.mutations import ProjectOption
from verify.cli.reporting import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    LAST_REPORT,
    NO_OUTPUTS,
    ByOption,
    Outputs,
    print_annotations,
    report_options,
    write_reports,
)

__all__ = ["show"]


@report_options(rereading=True)
def show(
    report_path: Annotated[
        Path | None,
        typer.Argument(
            metavar="[REPORT]", help="A report written by --json (default: the last run's).", show_default=False
        ),
    ] = None,
    json: Annotated[
        Path | None, typer.Option("--json", help="The same report, as an option (REPORT or --json, not both).")
    ] = None,
    mutation: Annotated[
        str | None, typer.Option("--mutation", "-m", metavar="NAME", help="Show one mutation: its gates and messages.")
    ] = None,
    survivors: Annotated[
        bool, typer.Option("--survivors/--no-survivors", help="List what no gate caught, with diffs.")
    ] = True,
    vacuous: Annotated[bool, typer.Option("--vacuous", help="List the gates no mutation turned red.")] = False,
    outputs: Outputs = NO_OUTPUTS,  # one option a report format but --json, and --annotations (report_options)
    by: ByOption = "file",
    project: ProjectOption = Path("."),
) -> None:
    """Show a finished run again: the matrix, what survived (with diffs), the verdict. Runs nothing.

    Reads the last run's report from .dflash-cache/ (every `dflash verify` without --no-cache saves it) or
    a file written with --json, and can write it again in the other formats (sources are read from --project).
    Exits 0 when that run passed, 1 when it failed, 2 without a report.

    \b
    Examples:
      dflash verify show
      dflash verify show --by gate
      dflash verify show --vacuous
      dflash verify show -m walk-replaced-by-argmax
      dflash verify show shard-1.json
      dflash verify show --html report.html --annotations github
    """
    from verify.report.json_report import MergeError, read_report
    from verify.report.summary import judge
    from verify.report.terminal import (
        render_error,
        render_gate_list,
        render_report,
        render_result_detail,
        render_survivors,
    )

    if report_path is not None and json is not None and report_path != json:
        render_error(f"two reports named: {report_path} and --json {json}; name one")
        raise typer.Exit(EXIT_USAGE)
    json = report_path or json
    path = json or Path(project) / LAST_REPORT
    if json is None and not path.is_file():
        render_error(f"no report at {path}: run `dflash verify` first, or pass --json FILE")
        raise typer.Exit(EXIT_USAGE)
    try:
        report, details, info = read_report(path)
    except MergeError as error:
        render_error(str(error))
        raise typer.Exit(EXIT_USAGE) from None
    verdict = judge(report, info.fail_under)
    written = write_reports(report, details, Path(project), info, outputs)
    print_annotations(report, details, Path(project), info, outputs)
    if mutation is not None:
        found = {r.name: r for r in report.mutations}.get(mutation)
        if found is None:
            render_error(f"{mutation!r} is not in {path}")
            raise typer.Exit(EXIT_USAGE)
        render_result_detail(found, details.get(mutation))
        return
    if vacuous:
        render_gate_list("vacuous gates (no mutation turned them red)", report.vacuous_gates)
        return
    if survivors:
        render_survivors(report, details)
    stamp = f"{path}" + (f" (commit {info.commit[:12]})" if info.commit else "")
    render_report(report, verdict, info.wall_s, (stamp, *written), by)
    raise typer.Exit(EXIT_OK if verdict.passed else EXIT_FAILED)
