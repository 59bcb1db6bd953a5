"""`dflash` starts at once: importing the CLI loads nothing heavy, and every `--help` says how to use it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from runner import SamplingParams
from verify.cli import app

# What a `--help` must never pay for: torch and the runner (seconds), the run's pytest and coverage, the
# sweep's mutmut and libcst, and rich (the renderers load it when there is something to render).
HEAVY = ("torch", "runner", "pytest", "coverage", "mutmut", "libcst", "rich", "numpy", "safetensors")

COMMANDS = [
    [],
    ["verify"],
    ["verify", "show"],
    ["verify", "merge"],
    ["mutations"],
    ["mutations", "list"],
    ["mutations", "show"],
    ["fixtures"],
    ["fixtures", "audit"],
    ["fixtures", "build"],
    ["sweep"],
    ["sweep", "promote"],
    ["generate"],
]


def test_importing_the_cli_loads_nothing_heavy() -> None:
    code = (
        "import json, sys; import verify.cli; "
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == []


def test_help_loads_nothing_heavy() -> None:
    code = (
        "import json, sys\nfrom verify.cli import app\n"
        "for args in " + repr([[*c, "--help"] for c in COMMANDS]) + ":\n"
        "    try:\n        app(args, prog_name='dflash')\n    except SystemExit as exit:\n"
        "        assert exit.code == 0, (args, exit.code)\n"
        f"sys.stderr.write(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stderr) == []


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: "-".join(c) or "dflash")
def test_every_help_has_an_example_and_no_internal_docstring(command: list[str]) -> None:
    result = CliRunner().invoke(app, [*command, "--help"], prog_name="dflash")
    assert result.exit_code == 0, result.output
    assert "Example" in result.output, result.output
    for internal in ("each command parses", "one typer app", "calls one library function"):
        assert internal not in result.output


def test_generate_help_states_the_runner_defaults() -> None:
    result = CliRunner().invoke(app, ["generate", "--help"])
    assert f"the runner's, {SamplingParams().max_tokens}" in " ".join(result.output.split())
    assert SamplingParams().temperature == 0.0  # the help says "default: 0"


def test_a_bad_matrix_view_is_refused_before_anything_runs(tmp_path) -> None:
    result = CliRunner().invoke(app, ["verify", "--by", "row", "--project", str(tmp_path)])
    assert result.exit_code == 2 and "must be 'file' or 'gate'" in result.output
