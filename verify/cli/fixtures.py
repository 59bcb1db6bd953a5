"""`dflash fixtures build` and `dflash fixtures audit`: parse, call verify.fixtures.catalog, render.

torch loads inside each command (the catalog trains and runs models), never at `dflash --help`.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Annotated, Any

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


def _load_adapter_factory(spec: str, project: Path) -> Any:
    """`module:callable`, imported with the project's import paths (its [tool.dflash] source roots) first."""
    from verify.config.settings import ConfigError, load_config

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise typer.BadParameter(f"--adapter {spec!r} must look like module:callable, e.g. mypkg.audit:make_adapter")
    try:
        paths = [str((project / p).resolve()) for p in load_config(project).import_paths]
    except ConfigError:
        paths = [str(project.resolve()), *([str((project / "src").resolve())] if (project / "src").is_dir() else [])]
    sys.path[:0] = paths
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as error:
        raise typer.BadParameter(f"--adapter {spec!r}: {type(error).__name__}: {error}") from None
    if not callable(factory):
        raise typer.BadParameter(f"--adapter {spec!r} is not callable")
    return factory


@fixtures_app.command("audit")
def audit_cmd(
    fixture: Annotated[
        str, typer.Option(help="Fixture name, or a folder holding target/, draft/, manifest.json.")
    ] = DEFAULT_FIXTURE,
    adapter: Annotated[
        str | None,
        typer.Option(
            help="Audit your own draft: module:factory, where factory(pair) returns a callable mapping a "
            "DraftContext to the drafted ids (verify/fixtures/adapter_audit.py), e.g. refengine.audit:make_adapter."
        ),
    ] = None,
    project: Annotated[Path, typer.Option(help="Where --adapter's module imports from (its source roots).")] = Path(
        "."
    ),
    json_path: Annotated[Path | None, typer.Option("--json", help="Also write the figures as JSON here.")] = None,
) -> None:
    """Measure how well a fixture discriminates, each figure beside its threshold; exit 1 if one fails.

    With --adapter, the figures come from your own draft step; those that need the draft's internals are
    listed as not measured.

    \b
    Examples:
      dflash fixtures audit --fixture stride-dflash2
      cd examples/reference-engine && dflash fixtures audit --adapter refengine.audit:make_adapter
    """
    from verify.fixtures.catalog import FixtureError, audit_fixture
    from verify.fixtures.render import render_audit

    try:
        if adapter is None:
            report: Any = audit_fixture(fixture)
        else:
            from verify.fixtures.adapter_audit import audit_adapter
            from verify.fixtures.api import FixtureError as ApiFixtureError
            from verify.fixtures.api import load_fixture

            factory = _load_adapter_factory(adapter, project)
            try:
                pair = load_fixture(fixture)
            except ApiFixtureError as exc:
                raise FixtureError(str(exc)) from None
            report = audit_adapter(pair, factory(pair))
    except FixtureError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    render_audit(report)
    for name, why in getattr(report, "not_measured", ()):
        typer.echo(f"not measured: {name} ({why})")
    if json_path is not None:
        json_path.write_text(json.dumps(report.to_dict(), indent=2) + "\n")
    if not report.passed:
        failed = ", ".join(f"{f.name}={f.value:.3f} (needs {f.threshold.text})" for f in report.failed)
        typer.echo(f"audit FAILED: {failed}", err=True)
        raise typer.Exit(1)
