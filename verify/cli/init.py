"""`dflash init`: scaffold `[tool.dflash]`, an example mutation module and an example gate for a project."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["init"]


def init(
    project: Annotated[
        Path, typer.Option("--project", help="The project root (pyproject.toml is appended to).")
    ] = Path("."),
) -> None:
    """Detect the project's layout (src/, flat packages or root modules) and write a [tool.dflash] table, an
    example mutation module and an example gate, then print the next steps.

    Example: `cd my-engine && dflash init && dflash verify`. Refuses (exit 2) when pyproject.toml already has
    [tool.dflash] or a file it would write exists.
    """
    from verify.run.scaffold import GATE_FILE, ScaffoldError, detect, write

    try:
        scaffold = detect(project)
        written = write(scaffold)
    except ScaffoldError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"layout: {scaffold.layout} (source_roots = {list(scaffold.source_roots)})")
    for rel in written:
        typer.echo(f"wrote {rel}" if rel != "pyproject.toml" else "appended [tool.dflash] to pyproject.toml")
    typer.echo(
        "\nNext:\n"
        f"  1. dflash verify      the example mutation {scaffold.mutation_name!r} ({scaffold.target_file}) will "
        "survive:\n"
        f"                        {GATE_FILE} only imports {scaffold.target_module}.\n"
        f"  2. Write gates: tests marked @pytest.mark.gate under tests/gates that call {scaffold.function} and "
        "check its result\n"
        "     (for a spec-decoding engine: drafted blocks, acceptance lengths, logits against a reference; the\n"
        "     shipped fixture pairs load with verify.fixtures.api.load_fixture).\n"
        f"  3. Replace the example in {scaffold.catalog_file} with your engine's bug classes (draft context, block "
        "mask,\n     KV-cache cropping, acceptance rule); `dflash mutations show NAME` prints each diff.\n"
        "  4. dflash verify      until every mutation is killed (exit 0)."
    )
