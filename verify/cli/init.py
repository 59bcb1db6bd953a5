"""`dflash init`: write `[tool.dflash]` for a project, adopting its existing pytest suite as the gates (or, for a
project without tests, scaffolding an example gate), with an example mutation module; then check the result."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

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
    proposals: Annotated[
        bool,
        typer.Option(
            "--propose/--no-propose",
            help="Propose mutations from the source (as `dflash mutations propose`) and name them in the catalog.",
        ),
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
    Gates that call the gate kit's statistical checks are written as statistical_gates. A source folder of
    plain modules (no __init__.py) gets one, so the mutants of its modules can be served. Then the source
    roots are scanned for the bug classes of speculative decoding (`dflash mutations propose`) and the
    proposals, each applied, parsed and imported first, are written to proposed_mutations.py and named in
    mutation_modules beside the example.

    \b
    Examples:
      cd my-engine && dflash init && dflash verify
      dflash init --marker "not slow"      adopt only the tests that marker expression selects

    Exit 0 written (and the baseline green); 1 written, but the baseline is not green (fix what it says
    before `dflash verify`); 2 nothing written: [tool.dflash] exists, a file it would write exists, or no
    Python source or collectable suite was found; 3 nothing written: the proposals' import check could not
    be confined, or your files changed while it ran.
    """
    import dataclasses

    from verify.config.adopt import collect, find_suite, project_config
    from verify.config.scaffold import GATE_FILE, ScaffoldError, detect, write
    from verify.propose.api import DEFAULT_OUTPUT, propose
    from verify.propose.check import ProbeError
    from verify.propose.writer import catalog_text
    from verify.run.phases.pristine import check_baseline

    try:
        scaffold = detect(project)
        suite = find_suite(scaffold.root)
        if suite is None and marker:
            raise ScaffoldError("--marker adopts tests of an existing suite, and the project has none")
        proposed = propose(project_config(scaffold, suite), write=False) if proposals else None
        if proposed is not None and proposed.proposals:
            text = catalog_text(proposed.proposals, scaffold.source_roots)
            module = DEFAULT_OUTPUT.removesuffix(".py")
            scaffold = dataclasses.replace(scaffold, proposed_catalog=module, proposed_text=text)
        adoption = collect(scaffold, suite, marker or "") if suite is not None else None
        written = write(scaffold, adoption.table() if adoption is not None else None)
    except ScaffoldError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from None
    except ProbeError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(3) from None
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
        if adoption.statistical:
            typer.echo(f"statistical_gates: {len(adoption.statistical)} gates call the gate kit's statistical checks")
    for rel in scaffold.namespace_inits:
        typer.echo(f"{rel}: a folder of plain modules made a package (the mutant import hook serves packages)")
    if proposed is not None:
        typer.echo(
            f"proposals: {len(proposed.proposals)} mutations proposed from the code of {proposed.num_files} files "
            f"(each applied, parsed and imported first), {len(proposed.refused)} left out"
        )
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
    typer.echo("\nNext:\n" + _next_steps(scaffold, adoption is not None, proposed, green, GATE_FILE))
    if not green:
        raise typer.Exit(1)


def _next_steps(scaffold: Any, adopted: bool, proposed: Any, green: bool, gate_file: str) -> str:
    """What each next command will do, said as what happens (a verdict is only ever the run's to give)."""
    num_proposed = len(proposed.proposals) if proposed is not None else 0
    example = f"{scaffold.mutation_name!r} ({scaffold.target_file}: {scaffold.effect})"
    runs = f"the example {example}" + (
        f" and the {num_proposed} proposals in {scaffold.proposed_catalog}.py" if num_proposed else ""
    )
    if adopted:
        reach = (
            "each comes back killed (a gate's own check fired), survived (every gate that reaches it green) or crashed"
        )
    else:
        reach = (
            f"{gate_file} only imports {scaffold.target_module}, so each mutation is reported survived "
            "until gates that call your code are written (tests marked @pytest.mark.gate under tests/gates)"
        )
    steps = [f"  1. dflash verify      runs {runs} against the gates: {reach}. The last line says PASS or FAIL."]
    if proposed is None:
        steps.append(
            "  2. dflash mutations propose   scans your source roots for the bug classes of speculative "
            "decoding and writes proposed_mutations.py; name it in mutation_modules."
        )
    elif not num_proposed:
        steps.append(
            "  2. No construct of the speculative-decoding bug classes was found to propose: write your "
            f"engine's bugs in {scaffold.catalog_file} (`dflash mutations show NAME` prints each diff)."
        )
    else:
        steps.append(
            f"  2. Keep the proposals your gates must catch in {scaffold.proposed_catalog}.py, delete the "
            "others; `dflash mutations show NAME` prints each diff."
        )
    steps.append(
        "  3. dflash verify explain NAME   for a survivor: where the mutant's run first differs from the unmutated one."
    )
    if not green:
        steps.insert(0, "  0. Fix the baseline (above), or edit [tool.dflash] exclude/gates, until it is green.")
    return "\n".join(steps)
