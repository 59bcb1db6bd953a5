"""`dflash mutations list` and `dflash mutations show NAME`: the registered catalog, read-only.

Imports only typer at module level; the catalog, the applier and the renderer load inside each command.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["ProjectOption", "mutations_app"]

EXIT_USAGE = 2

mutations_app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="""The registered mutation catalog: each entry is a named bug applied to one source file.

\b
Examples:
  dflash mutations list
  dflash mutations show walk-replaced-by-argmax
  dflash mutations show walk-replaced-by-argmax | git apply --check
""",
)

ProjectOption = Annotated[
    Path, typer.Option("--project", help="Project root holding pyproject.toml with a [tool.dflash] table.")
]


@mutations_app.command("list")
def list_mutations(project: ProjectOption = Path(".")) -> None:
    """List every registered mutation: full name, file, bug class and the gates pinned to kill it.

    \b
    Example:
      dflash mutations list --project path/to/project
    """
    from verify.report.catalog_view import render_mutations
    from verify.report.terminal import render_error
    from verify.run.config.catalog import load_mutations
    from verify.run.config.settings import ConfigError, load_config

    try:
        render_mutations(load_mutations(load_config(project)))
    except ConfigError as error:
        render_error(str(error))
        raise typer.Exit(EXIT_USAGE) from None


@mutations_app.command("show")
def show_mutation(
    name: Annotated[str, typer.Argument(help="The mutation's name, as `dflash mutations list` shows it.")],
    project: ProjectOption = Path("."),
) -> None:
    """Print one mutation's bug class and the unified diff it applies to the current source.

    Piped (not a terminal), the output is a plain patch (the bug class as a comment preamble, then the diff
    line for line, never cropped), so `git apply` and `patch` accept it; on a terminal it is highlighted.

    \b
    Examples:
      dflash mutations show walk-replaced-by-argmax
      dflash mutations show walk-replaced-by-argmax | git apply --check
      dflash mutations show walk-replaced-by-argmax | patch -p1 --dry-run
    """
    from verify.report.catalog_view import render_mutation
    from verify.report.terminal import render_error
    from verify.run.apply import Stale, apply_mutation
    from verify.run.config.catalog import load_mutations
    from verify.run.config.settings import ConfigError, load_config
    from verify.run.phases.details import details_for

    try:
        config = load_config(project)
        mutations = load_mutations(config)
        if name not in mutations:
            raise ConfigError(f"unknown mutation {name!r}; `dflash mutations list` names them all")
    except ConfigError as error:
        render_error(str(error))
        raise typer.Exit(EXIT_USAGE) from None
    applied = apply_mutation(mutations[name], config.root)
    detail = details_for({name: mutations[name]}, config.root)[name]
    stale = applied.reason if isinstance(applied, Stale) else ""
    if not sys.stdout.isatty():
        # A pipe gets the diff byte for byte (a stale mutation has none: say why on stderr, exit 1).
        if stale:
            render_error(f"{name} is stale: {stale}")
            raise typer.Exit(1)
        # Text before the first "---" line is a patch's preamble: git apply and patch skip it.
        pins = ", ".join(mutations[name].expect_killed_by)
        preamble = f"# {name}: {detail.file}\n# bug class: {detail.bug_class}\n"
        sys.stdout.write(preamble + (f"# pinned killers: {pins}\n" if pins else "") + "\n" + detail.diff)
        return
    render_mutation(mutations[name], detail, stale)
