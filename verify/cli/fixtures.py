"""`dflash fixtures build` and `dflash fixtures audit`: parse, call verify.fixtures.catalog, render."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from verify.fixtures.catalog import DEFAULT_FIXTURE, FixtureError, audit_fixture, build_fixture
from verify.fixtures.render import render_audit

fixtures_app = typer.Typer(no_args_is_help=True, add_completion=False, help="Build and audit the shipped fixtures.")


@fixtures_app.command("build")
def build_cmd(
    fixture: Annotated[str, typer.Option(help="Fixture name.")] = DEFAULT_FIXTURE,
    seed: Annotated[int | None, typer.Option(help="Override the recipe's seed.")] = None,
    out: Annotated[Path | None, typer.Option(help="Write under this folder instead of runner/fixtures/.")] = None,
) -> None:
    """Regenerate a fixture pair from its recipe and seed on CPU, audit it, and write its manifest."""
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
    """Prove the fixture can discriminate: every figure beside its threshold; exit 1 if one fails."""
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
