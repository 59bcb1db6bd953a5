"""`dflash init`: write `[tool.dflash]` for a project, adopting its existing pytest suite as the gates (or, for a
project without tests, scaffolding an example gate), with an example mutation module; then check the result."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["init"]


def init(
    project: Annotated[
        Path, typer.Option("--project", help="The project root (pyproject.toml is appended to).")
    ] = Path("."),
    marker: Annotated[
        str | None,
        typer.Option(
            "--marker",
            metavar="EXPR",
            help="Adopt only the tests this pytest marker expression selects (default: every test is a gate).",
        ),
    ] = None,
    check: Annotated[
        bool, typer.Option("--check/--no-check", help="Run the baseline once to check what was written.")
    ] = True,
) -> None:
    """Write a [tool.dflash] table and an example mutation module for the project, then print the next steps.

    \b
    A project with tests (its pytest testpaths, else every folder holding test_*.py or *_test.py files):
    the suite is adopted as the gates. Every test is a gate (gate_marker = ""), or only those --marker
    selects. The suite is collected once; a file whose collection fails here (it imports a package this
    environment lacks) goes to `exclude` with its reason, and `pytest_args` is written when the suite
    needs one. Then the baseline runs once (the gates on the unmutated tree, as `dflash verify` starts)
    and init prints the gates, the exclusions, green or red, and the time.
    A project without tests: an example gate under tests/gates, selected by a `gate` marker.

    \b
    Examples:
      cd my-engine && dflash init && dflash verify
      dflash init --marker "not slow"      adopt only the tests that marker expression selects

    Exit 0 written (and the baseline green); 1 written, but the baseline is not green (fix what it says
    before `dflash verify`); 2 nothing written: [tool.dflash] exists, a file it would write exists, or no
    Python source or collectable suite was found.
    """
    from verify.run.config.scaffold import GATE_FILE, ScaffoldError, detect, write
    from verify.run.phases.adopt import check_baseline, collect, find_suite

    try:
        scaffold = detect(project)
        suite = find_suite(scaffold.root)
        adoption = collect(scaffold, suite, marker or "") if suite is not None else None
        if suite is None and marker:
            raise ScaffoldError("--marker adopts tests of an existing suite, and the project has none")
        written = write(scaffold, adoption.table() if adoption is not None else None)
    except ScaffoldError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"layout: {scaffold.layout} (source_roots = {list(scaffold.source_roots)})")
    if adoption is not None:
        selected = f"marked {adoption.marker!r}" if adoption.marker else "every test, no marker"
        typer.echo(
            f"suite: {', '.join(adoption.suite.paths)} (from {adoption.suite.found_by}): "
            f"{len(adoption.gate_ids)} gates collected ({selected})"
        )
        for path, why in adoption.excluded:
            typer.echo(f"excluded {path}: {why}")
        if adoption.pytest_args:
            typer.echo(f"pytest_args = {list(adoption.pytest_args)}: {adoption.pytest_args_why}")
    for rel in written:
        typer.echo(f"wrote {rel}" if rel != "pyproject.toml" else "appended [tool.dflash] to pyproject.toml")
    green = True
    if check:
        typer.echo("checking: the baseline (every gate on the unmutated tree) and the harness self-check ...")
        result = check_baseline(scaffold.root)
        green = result.green
        if green:
            typer.echo(f"baseline: green, {result.num_gates} gates ran in {result.wall_s:.1f}s")
        else:
            typer.echo(f"baseline: NOT green ({result.wall_s:.1f}s): {result.message}")
    mutation = f"{scaffold.mutation_name!r} ({scaffold.target_file})"
    if adoption is not None:
        steps = (
            f"  1. dflash verify      runs the example mutation {mutation} against your suite: it is killed\n"
            f"                        when a test calls {scaffold.function} and checks its result.\n"
            f"  2. Replace the example in {scaffold.catalog_file} with the bugs your tests must catch: each "
            "a Mutation(name,\n     description, file, anchor, replacement); `dflash mutations show NAME` prints its "
            "diff.\n"
            "  3. Name your engine's check exceptions in invariant_errors; if your tests fail by raising rather "
            'than\n     asserting, set count = "detected" (docs: concepts/verdicts.md).\n'
            "  4. dflash verify      until every mutation is killed (exit 0)."
        )
    else:
        steps = (
            f"  1. dflash verify      the example mutation {mutation} will survive:\n"
            f"                        {GATE_FILE} only imports {scaffold.target_module}.\n"
            f"  2. Write gates: tests marked @pytest.mark.gate under tests/gates that call {scaffold.function} and "
            "check its result.\n"
            f"  3. Replace the example in {scaffold.catalog_file} with your engine's bug classes; `dflash mutations "
            "show NAME`\n     prints each diff.\n"
            "  4. dflash verify      until every mutation is killed (exit 0)."
        )
    if not green:
        steps = "  0. Fix the baseline (above), or edit [tool.dflash] exclude/gates, until it is green.\n" + steps
    typer.echo("\nNext:\n" + steps)
    if not green:
        raise typer.Exit(1)
