"""`dflash mutations list` and `dflash mutations show NAME`: the registered catalog, read-only.

Imports only typer at module level; the catalog, the applier and the renderer load inside each command.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["ProjectOption", "mutations_app"]

EXIT_USAGE, EXIT_HARNESS = 2, 3

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
  dflash mutations propose           mutations proposed from your engine's own code
""",
)

ProjectOption = Annotated[
    Path, typer.Option("--project", help="Project root holding pyproject.toml with a [tool.dflash] table.")
]


@mutations_app.command("list")
def list_mutations(project: ProjectOption = Path(".")) -> None:
    """List every registered mutation: full name, file, bug class and the gates pinned to kill it.

    Every anchor is checked against the source: a stale one (not found, or found twice) is reported with the
    nearest lines of its file and how they differ, and the exit is 1.

    \b
    Example:
      dflash mutations list --project path/to/project
    """
    from verify.config.catalog import StaleAnchorError, load_mutations, stale_anchors
    from verify.config.settings import ConfigError, load_config
    from verify.report.catalog_view import render_mutations
    from verify.report.terminal import render_error

    try:
        config = load_config(project)
        mutations = load_mutations(config)
    except ConfigError as error:
        render_error(str(error))
        raise typer.Exit(EXIT_USAGE) from None
    render_mutations(mutations)
    if stale := stale_anchors(config, mutations):
        render_error(str(StaleAnchorError(stale)))
        raise typer.Exit(1)


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
    from verify.config.catalog import load_mutations
    from verify.config.settings import ConfigError, load_config
    from verify.mutation import unknown_names
    from verify.mutation.apply import Stale, apply_mutation
    from verify.report.catalog_view import render_mutation
    from verify.report.terminal import render_error
    from verify.run.phases.details import details_for

    try:
        config = load_config(project)
        mutations = load_mutations(config)
        if name not in mutations:
            raise ConfigError(unknown_names([name], mutations))
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


@mutations_app.command("propose")
def propose_mutations(
    project: ProjectOption = Path("."),
    output: Annotated[
        str, typer.Option("--output", help="The catalog module to write, relative to the project root.")
    ] = "proposed_mutations.py",
) -> None:
    """Propose mutations from your engine's own code: scan the source roots for the bug classes of speculative
    decoding and write each finding as a registered mutation, in a catalog module `mutation_modules` can name.

    \b
    The classes: the acceptance ratio (p/q, log p - log q, exp of a difference) inverted; the residual
    max(p - q, 0) without the draft or its clamp; acceptance run past the first rejection (cumprod,
    cumsum-and-compare, a loop's break); the bonus row off by one; position ids and arange offsets; cache crop
    and write slices; the attention mask (is_causal, tril/triu, a causal flag, a visibility comparison); the
    softmax's dimension; temperature not applied or applied twice; a top-k/top-p filter dropped on one side.
    Every proposal is applied, parsed and imported (in a private copy; your files are only read) before it
    is written; one that could only crash, or that changes nothing, is not proposed. A file this command
    wrote before is replaced; any other file of that name is refused.

    \b
    Examples:
      dflash mutations propose            writes proposed_mutations.py; then name it in mutation_modules
      dflash mutations propose --output engine_proposed.py

    Exit 0 written (or nothing found); 2 no [tool.dflash], or the output names a file of yours; 3 the
    import check could not be confined, or your files changed while it ran (nothing written).
    """
    from verify.config.settings import ConfigError, load_config
    from verify.propose.api import propose
    from verify.propose.check import ProbeError
    from verify.propose.writer import WriterError
    from verify.report.catalog_view import render_proposals
    from verify.report.terminal import render_error

    try:
        config = load_config(project)
        run = propose(config, output)
    except (ConfigError, WriterError) as error:
        render_error(str(error))
        raise typer.Exit(EXIT_USAGE) from None
    except ProbeError as error:
        render_error(str(error))
        raise typer.Exit(EXIT_HARNESS) from None
    pairs = zip(run.names, run.proposals, strict=True)
    rows = [(name, p.bug_class.value, f"{p.file}:{p.line}", p.changed_line) for name, p in pairs]
    roots = ", ".join(config.source_roots)
    summary = [f"scanned {run.num_files} files under {roots}: {len(run.proposals)} proposed, "
               f"{len(run.refused)} left out (each applied, parsed and imported first)"]  # fmt: skip
    summary += [f"left out {r.file}:{r.line} ({r.bug_class.value}): {r.reason}" for r in run.refused]
    if run.written:
        todo = f'; add "{run.module}" to [tool.dflash] mutation_modules and `dflash verify` runs each proposal'
        summary.append(f"wrote {run.written}" + ("" if run.module in config.mutation_modules else todo))
    else:
        summary.append("nothing written: no construct of these bug classes was found under the source roots")
    render_proposals(rows, summary)
