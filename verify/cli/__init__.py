"""The `dflash` command: the typer app and the registry of its command groups.

Start-up stays light: this package and every command module import only typer and the standard library at
module level; torch, the runner, pytest, coverage, mutmut and rich are imported inside the command that needs
them, so `dflash --help` and every `--help` answer at once (tests/cli/test_startup.py holds this). A new
command group is one module exposing a typer app or a function, registered below.

The map: `verify` (`dflash verify` and `verify merge`), `show` (`verify show`), `explain` (`verify explain`,
`sweep explain`), `reporting` (what the verify commands share once they hold a report: files, rendering, exit
codes), `mutations` (`dflash mutations`), `init` (`dflash init`), `generate` (`dflash generate`), `fixtures`
(`dflash fixtures`), `sweep` (`dflash sweep`).
"""

from __future__ import annotations

from typing import Annotated

import typer

from verify.cli.fixtures import fixtures_app
from verify.cli.generate import generate
from verify.cli.init import init
from verify.cli.mutations import mutations_app
from verify.cli.sweep import sweep_app
from verify.cli.verify import verify_app

HELP = """Prove that a speculative-decoding engine's tests catch the bugs that matter.

`dflash verify` applies each registered mutation (a named, realistic bug) to the runner in a private copy,
runs the gates (tests marked `gate`) against it and reports which gates catch which bug, with a CI verdict.

\b
Examples:
  dflash verify                      run the whole catalog; last line: PASS/FAIL
  dflash verify -m walk-replaced-by-argmax
  dflash verify show                 the last run's matrix, without running anything
  dflash mutations list              the catalog
  dflash mutations show NAME | git apply --check
  dflash fixtures audit              can the fixture tell a right context from a wrong one?
  dflash sweep runner/batch.py       mutmut's operator mutants against the gates
  dflash --version
"""

app = typer.Typer(no_args_is_help=True, add_completion=False, help=HELP, rich_markup_mode=None)


def _print_version(value: bool) -> None:
    if value:
        from verify.cli.reporting import tool_version  # installed metadata only: no torch, no pytest

        typer.echo(f"dflash-verify {tool_version()}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the installed version and exit."),
    ] = False,
) -> None:
    """The options every command shares (only --version)."""


app.command()(init)
app.add_typer(verify_app, name="verify")
app.add_typer(mutations_app, name="mutations")
app.add_typer(fixtures_app, name="fixtures")
app.add_typer(sweep_app, name="sweep")
app.command()(generate)
