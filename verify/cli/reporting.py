"""What every `dflash verify` command does after it has a report: write the files, render, pick the exit code.

Shared options and exit codes of `verify`, `verify merge` and `verify show`. Imports only typer and the
standard library at module level; the renderers load when a report is there to render.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from verify.report.files import Detail, RunInfo
    from verify.report.verdict import RunReport

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_HARNESS, EXIT_ERROR = 0, 1, 2, 3, 4
EXIT_SIGNAL = {"SIGINT": 130, "SIGTERM": 143}
LAST_REPORT = Path(".dflash-cache") / "last-report.json"  # relative to the project root

JsonOption = Annotated[Path | None, typer.Option("--json", help="Write the JSON report (dflash-verify/1) here.")]
JunitOption = Annotated[Path | None, typer.Option("--junit", help="Write JUnit XML here (one testcase a mutation).")]
HtmlOption = Annotated[
    Path | None,
    typer.Option(
        "--html",
        help="Write the HTML report here: one offline page, the source with each mutant inline (Stryker's "
        "viewer), the gates, the mutation x gate matrix.",
    ),
]
StrykerOption = Annotated[
    Path | None, typer.Option("--stryker", help="Write a Stryker mutation-testing-elements JSON report here.")
]
CodequalityOption = Annotated[
    Path | None,
    typer.Option("--codequality", help="Write GitLab's code-quality JSON here: each survivor on its mutated line."),
]


ANNOTATION_FORMATS = ("github",)  # GitLab reads a file instead: --codequality


def _check_annotations(value: str | None) -> str | None:
    if value is not None and value not in ANNOTATION_FORMATS:
        raise typer.BadParameter(f"must be one of: {', '.join(ANNOTATION_FORMATS)}")
    return value


AnnotationsOption = Annotated[
    str | None,
    typer.Option(
        "--annotations",
        metavar="FORMAT",
        callback=_check_annotations,
        help="Print review annotations: 'github' prints workflow commands that put each survivor on its "
        "mutated line of the pull request.",
    ),
]
FailUnderOption = Annotated[
    float, typer.Option("--fail-under", min=0.0, max=1.0, help="Fail when the score (0..1) is below this.")
]


def _check_by(value: str) -> str:
    if value not in ("file", "gate"):
        raise typer.BadParameter("must be 'file' or 'gate'")
    return value


ByOption = Annotated[
    str,
    typer.Option(
        "--by", callback=_check_by, help="Matrix columns: 'file' (gates grouped by file) or 'gate' (one column each)."
    ),
]


@dataclass(frozen=True, slots=True)
class Outputs:
    """The reports a command was asked for: files to write (None: not asked) and annotations to print."""

    json: Path | None = None
    junit: Path | None = None
    html: Path | None = None
    stryker: Path | None = None
    codequality: Path | None = None
    annotations: str | None = None  # one of ANNOTATION_FORMATS


def tool_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dflash-verify")
    except PackageNotFoundError:
        return "unknown"


def project_commit(root: Path) -> str:
    """The project's HEAD, with "+dirty" when tracked files differ from it; "" outside a git repository."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10, check=False)
        return done.stdout.strip() if done.returncode == 0 else ""

    try:
        head = git("rev-parse", "--verify", "HEAD")
        dirty = head and git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return f"{head}+dirty" if dirty else head


def run_info(
    root: Path, settings: Mapping[str, Any], wall_s: float | None, fail_under: float, commit: str | None = None
) -> RunInfo:
    from verify.report.files import RunInfo

    commit = project_commit(root) if commit is None else commit
    return RunInfo(tool_version(), commit, str(Path(root).resolve()), dict(settings), wall_s, fail_under)


def repository_prefix(root: Path) -> str:
    """The project's folder inside its git repository ("" at the top or outside git): review annotations name
    files from the repository root."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--show-prefix"], cwd=root, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def write_reports(
    report: RunReport, details: Mapping[str, Detail], root: Path, info: RunInfo, outputs: Outputs
) -> list[str]:
    """Write each report file asked for; return the paths written."""
    from verify.report.annotations import write_codequality
    from verify.report.files import write_json
    from verify.report.html import write_html
    from verify.report.junit import write_junit
    from verify.report.stryker import to_stryker, write_stryker

    written = []
    for path, write in (
        (outputs.json, lambda p: write_json(report, p, details, info)),
        (outputs.junit, lambda p: write_junit(report, p, details, info)),
        (outputs.html, lambda p: write_html(report, p, details, info, root=root)),
        (outputs.stryker, lambda p: write_stryker(report, p, details, root, info)),
        (
            outputs.codequality,
            lambda p: write_codequality(to_stryker(report, details, root, info), p, repository_prefix(root)),
        ),
    ):
        if path is not None:
            write(path)
            written.append(str(path))
    return written


def print_annotations(
    report: RunReport, details: Mapping[str, Detail], root: Path, info: RunInfo, outputs: Outputs
) -> None:
    """The review annotations asked for, on standard output (where a CI step's workflow commands are read)."""
    if outputs.annotations != "github":
        return
    from verify.report.annotations import github_annotations
    from verify.report.stryker import to_stryker

    for line in github_annotations(to_stryker(report, details, root, info), repository_prefix(root)):
        typer.echo(line)


def save_last_report(
    report: RunReport, details: Mapping[str, Detail] | None, root: Path, info: RunInfo | None = None
) -> None:
    """Keep the run's report where `dflash verify show` finds it (beside the result cache), atomically."""
    from verify.report.files import write_json

    path = Path(root) / LAST_REPORT
    path.parent.mkdir(exist_ok=True)
    ignore = path.parent / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n")
    tmp = path.with_suffix(".tmp")
    write_json(report, tmp, details, info)
    tmp.replace(path)


def exit_code(report: RunReport, passed: bool) -> int:
    """130/143 interrupted by a signal; 4 a mutation without a verdict or harness trouble; 1 fail; 0 pass."""
    if report.interrupted_by:
        return EXIT_SIGNAL.get(report.interrupted_by, 130)
    if report.errors or report.harness_errors:
        return EXIT_ERROR
    return EXIT_OK if passed else EXIT_FAILED


def finish(
    report: RunReport,
    details: Mapping[str, Detail],
    root: Path,
    fail_under: float,
    started: float,
    settings: Mapping[str, Any],
    outputs: Outputs,
    by: str,
    save_last: bool = False,
    commit: str | None = None,
) -> int:
    """Write the reports, render the matrix and summary with the verdict as the last line; the exit code."""
    from verify.report.summary import judge
    from verify.report.terminal import render_error, render_report

    info = run_info(root, settings, round(time.monotonic() - started, 3), fail_under, commit)
    written = write_reports(report, details, root, info, outputs)
    print_annotations(report, details, root, info, outputs)
    if save_last:
        save_last_report(report, details, root, info)
    verdict = judge(report, fail_under)
    for problem in report.harness_errors:
        render_error(problem)
    if report.interrupted_by:
        done = sum(1 for r in report.mutations if r.status.is_judged or str(r.status) in ("stale", "skipped"))
        render_error(
            f"interrupted by {report.interrupted_by}: {done} mutations finished (cached; the next run resumes)"
        )
    render_report(report, verdict, time.monotonic() - started, written, by, details=details)
    return exit_code(report, verdict.passed)
