"""The `dflash` command line: one typer app; each command parses, calls one library function, renders.

Command groups live in their own modules and are joined here with `add_typer`.
"""

from __future__ import annotations

import typer

from verify.cli.fixtures import fixtures_app
from verify.cli.generate import generate
from verify.cli.init import init
from verify.cli.sweep import sweep_app
from verify.cli.verify import mutations_app, verify_app

app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__)
app.command()(generate)
app.command()(init)
app.add_typer(verify_app, name="verify")
app.add_typer(mutations_app, name="mutations")
app.add_typer(sweep_app, name="sweep")
app.add_typer(fixtures_app, name="fixtures")
