"""`dflash fixtures build` and `dflash fixtures audit`: parse, call verify.fixtures.catalog, render.

torch loads inside each command (the catalog trains and runs models), never at `dflash --help`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

DEFAULT_FIXTURE = "copy-dflash"  # = verify.fixtures.catalog.DEFAULT_FIXTURE (tests/cli pins it)

fixtures_app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    help="""The shipped fixture pairs (a tiny target and its DFlash draft) the gates run on.

The audit proves a fixture can discriminate: a draft that ignores its context, its mask or its weights
would make every gate blind, so each figure is printed beside the threshold it must meet.

\b
Examples:
  dflash fixtures audit
  dflash fixtures audit --fixture stride-dflash2 --json audit.json
  dflash fixtures build --fixture stride-dflash --seed 7
""",
)


@fixtures_app.command("build")
def build_cmd(
    fixture: Annotated[str, typer.Option(help="Fixture name.")] = DEFAULT_FIXTURE,
    seed: Annotated[int | None, typer.Option(help="Override the recipe's seed.")] = None,
    out: Annotated[Path | None, typer.Option(help="Write under this folder instead of runner/fixtures/.")] = None,
) -> None:
    """Retrain a fixture pair from its recipe and seed on CPU (about 3 minutes), audit it, write its manifest.

    The shipped pair is replaced only when the new one passes its audit.

    \b
    Example:
      dflash fixtures build --fixture stride-dflash2 --out /tmp/fixtures
    """
    from verify.fixtures.catalog import FixtureError, build_fixture
    from verify.fixtures.render import render_audit

    try:
        result = build_fixture(fixture, seed=seed, out_root=out)
    except FixtureError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    render_audit(result.report)
    typer.echo(f"wrote {result.path}")


@fixtures_app.command("audit")
def audit_cmd(
    fixture: Annotated[
        str, typer.Option(help="Fixture name, or a folder holding target/, draft/, manifest.json.")
    ] = DEFAULT_FIXTURE,
    json_path: Annotated[Path | None, typer.Option("--json", help="Also write the figures as JSON here.")] = None,
) -> None:
    """Measure how well a fixture discriminates, each figure beside its threshold; exit 1 if one fails.

    \b
    Example:
      dflash fixtures audit --fixture stride-dflash2
    """
    from verify.fixtures.catalog import FixtureError, audit_fixture
    from verify.fixtures.render import render_audit

    try:
        report = audit_fixture(fixture)
    except FixtureError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    render_audit(report)
    if json_path is not None:
        json_path.write_text(json.dumps(report.to_dict(), indent=2) + "\n")
    if not report.passed:
        failed = ", ".join(f"{f.name}={f.value:.3f} (needs {f.threshold.text})" for f in report.failed)
        typer.echo(f"audit FAILED: {failed}", err=True)
        raise typer.Exit(1)
