"""What every `dflash verify` command does after it has a report: write the files, render, pick the exit code.

Shared options and exit codes of `verify`, `verify merge` and `verify show`; their report options come from the
registry of report formats (verify.report.formats), one option a format. Imports only typer and the
standard library at module level; the renderers load when a report is there to render.
"""

from __future__ import annotations

import functools
import inspect
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

if TYPE_CHECKING:
    from verify.report.json_report import Detail, RunInfo
    from verify.report.verdict import RunReport

R = TypeVar("R")

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_HARNESS, EXIT_ERROR = 0, 1, 2, 3, 4
EXIT_SIGNAL = {"SIGINT": 130, "SIGTERM": 143}
LAST_REPORT = Path(".dflash-cache") / "last-report.json"  # relative to the project root

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
    """The reports a command was asked for: a path per file format (verify.report.formats, in registration order;
    a format not asked for is absent) and the review annotations to print."""

    files: Mapping[str, Path] = field(default_factory=dict)
    annotations: str | None = None  # one of ANNOTATION_FORMATS

    @property
    def paths(self) -> tuple[Path, ...]:
        return tuple(self.files.values())


NO_OUTPUTS = Outputs()  # the placeholder default of a command's `outputs`; report_options replaces it


def report_options(*, rereading: bool = False) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """Give a command one `--NAME PATH` option per registered report format, and --annotations, in place of its
    `outputs: Outputs` parameter, which it then receives filled. `rereading`: the command reads a report
    (`verify show`), so it leaves out the format it reads."""
    from verify.report.formats import file_formats  # the registry alone: no writer loads here

    formats = file_formats(rereading=rereading)
    added = [
        inspect.Parameter(
            fmt.name,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            default=None,
            annotation=Annotated[Path | None, typer.Option(fmt.option, help=fmt.help)],
        )
        for fmt in formats
    ]
    added.append(
        inspect.Parameter(
            "annotations", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None, annotation=AnnotationsOption
        )
    )

    def decorate(command: Callable[..., R]) -> Callable[..., R]:
        signature = inspect.signature(command, eval_str=True)
        if "outputs" not in signature.parameters:
            raise TypeError(f"{command.__name__} takes no `outputs` parameter to put the report options in")
        parameters = [p for name, p in signature.parameters.items() for p in (added if name == "outputs" else [p])]

        @functools.wraps(command)
        def with_outputs(*args: Any, **kwargs: Any) -> R:
            paths = {fmt.name: kwargs.pop(fmt.name, None) for fmt in formats}
            files = {name: Path(path) for name, path in paths.items() if path is not None}
            outputs = Outputs(files, kwargs.pop("annotations", None))
            return command(*args, outputs=outputs, **kwargs)

        with_outputs.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        with_outputs.__annotations__ = {p.name: p.annotation for p in parameters}
        return with_outputs

    return decorate


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
    from verify.report.json_report import RunInfo

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
    """Write each report file asked for, by its registered format's writer; return the paths written."""
    if not outputs.files:
        return []
    from verify.report.formats import FORMATS
    from verify.report.json_report import ReportInputs

    inputs = ReportInputs(report, details, root, info, repository_prefix(root))
    for name, path in outputs.files.items():
        FORMATS[name].write(inputs, path)
    return [str(path) for path in outputs.files.values()]


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
    from verify.report.json_report import write_json

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
        from verify.report.verdict import Status

        done = sum(1 for r in report.mutations if r.status.is_judged or r.status in (Status.STALE, Status.SKIPPED))
        render_error(
            f"interrupted by {report.interrupted_by}: {done} mutations finished (cached; the next run resumes)"
        )
    render_report(report, verdict, time.monotonic() - started, written, by, details=details)
    return exit_code(report, verdict.passed)
