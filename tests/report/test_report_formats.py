"""The registry of report formats is the one list the commands read: every registered format is an option of
`verify`, `verify merge` and (but the one it reads) `verify show`, each writes its file, and the run leaves every
file asked for out of the tree it hashes."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from verify.cli import app
from verify.cli.reporting import NO_OUTPUTS, Outputs, report_options
from verify.report.formats import FORMATS, ReportFormat, file_formats, register_format

ROOT = Path(__file__).resolve().parents[2]
SAVED_RUN = ROOT / "docs" / "runs" / "verify-first-kill.json"  # a real run's report, committed


def _options(*path: str) -> dict[str, str]:
    """The options of `dflash PATH...` and the help of each, as click holds them."""
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]  # type: ignore[attr-defined]
    return {opt: param.help or "" for param in command.params for opt in param.opts if opt.startswith("--")}


@pytest.mark.parametrize("fmt", list(FORMATS.values()), ids=list(FORMATS))
def test_every_format_is_an_option_of_every_command_that_writes_reports(fmt: ReportFormat) -> None:
    assert _options("verify")[fmt.option] == fmt.help
    assert _options("verify", "merge")[fmt.option] == fmt.help
    # `verify show` reads its report with --json: that option is its input, never a format it writes
    assert (_options("verify", "show").get(fmt.option) == fmt.help) is (not fmt.reread)


def test_show_writes_every_format_but_the_one_it_reads(tmp_path: Path) -> None:
    written = {fmt.name: tmp_path / f"report.{fmt.name}" for fmt in file_formats(rereading=True)}
    args = [arg for name, path in written.items() for arg in (f"--{name}", str(path))]
    result = CliRunner().invoke(app, ["verify", "show", str(SAVED_RUN), *args, "--project", str(ROOT)])
    assert result.exit_code == 0, result.output
    for name, path in written.items():
        assert path.is_file() and path.stat().st_size > 0, name
        assert str(path) in " ".join(result.output.split()), f"{name}: not listed among the reports written"
    assert {"junit", "html", "stryker", "codequality"} <= set(written)


def test_the_commands_get_every_format_asked_for_in_registration_order(tmp_path: Path) -> None:
    got: list[Outputs] = []
    probe = typer.Typer()

    @probe.command()
    @report_options()
    def command(outputs: Outputs = NO_OUTPUTS, other: bool = False) -> None:
        got.append(outputs)

    args = [arg for name in reversed(FORMATS) for arg in (f"--{name}", str(tmp_path / name))]
    result = CliRunner().invoke(probe, [*args, "--annotations", "github", "--other"])
    assert result.exit_code == 0, result.output
    assert list(got[0].files) == list(FORMATS)
    assert got[0].paths == tuple(tmp_path / name for name in FORMATS)  # what RunOptions.outputs is given
    assert got[0].annotations == "github"


def test_the_run_leaves_every_report_file_out_of_its_tree(toy_copy, monkeypatch, tmp_path: Path) -> None:
    """`dflash verify` hands the run every file asked for (RunOptions.outputs), whatever its format."""
    from verify.run.phases import run as run_module

    seen = []

    def fake_run(config, mutations, options, progress, on_report=None):
        seen.append(options.outputs)
        raise run_module.BaselineError("stopped by the test after reading its options")

    monkeypatch.setattr(run_module, "run_verify", fake_run)
    project = toy_copy()
    args = [arg for name in FORMATS for arg in (f"--{name}", str(project / f"out.{name}"))]
    result = CliRunner().invoke(app, ["verify", *args, "--project", str(project), "--no-explain"])
    assert result.exit_code == 3 and "stopped by the test" in result.output, result.output
    assert seen == [tuple(project / f"out.{name}" for name in FORMATS)]


def test_a_format_is_registered_once_and_well_formed() -> None:
    with pytest.raises(ValueError, match="registered twice"):
        register_format(ReportFormat("json", "Write it again.", "verify.report.json_report:write_report"))
    with pytest.raises(ValueError, match="module:function"):
        ReportFormat("csv", "Write a CSV here.", "verify.report.csv")
    with pytest.raises(ValueError, match="lower-case"):
        ReportFormat("Code-Quality", "Write it here.", "verify.report.annotations:write_report")
