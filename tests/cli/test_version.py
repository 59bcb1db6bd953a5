"""`dflash --version` prints the installed distribution's version from its metadata, without importing torch."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata

from tests.cli.test_startup import HEAVY


def test_version_is_the_installed_metadata_and_loads_nothing_heavy() -> None:
    code = (
        "import json, sys\nfrom verify.cli import app\n"
        "try:\n    app(['--version'], prog_name='dflash')\n"
        "except SystemExit as exit:\n    assert exit.code == 0, exit.code\n"
        f"sys.stderr.write(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"dflash-verify {metadata.version('dflash-verify')}\n"
    assert json.loads(done.stderr) == []
