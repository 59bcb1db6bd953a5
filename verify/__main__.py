"""`python -m verify` is the `dflash` command."""

from verify.cli import app

app(prog_name="dflash")
