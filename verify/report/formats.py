"""The report file formats a run can write: one registered `ReportFormat` each (its option, its help, its writer).

`dflash verify`, `verify merge` and `verify show` take one `--NAME PATH` option per registered format, and the
run leaves every file asked for out of the tree it hashes and guards, all from this registry. A new format is
its own module under verify/report/ with a writer `write(inputs: ReportInputs, path: Path) -> None`
(verify.report.json_report.ReportInputs: the report, its details, the project's folder, the run's facts), plus one
`register_format(...)` line at the end of this module.

Writers are named "module:function" and imported only when a report is written, so the CLI's `--help` loads
none of them. Knows nothing of typer or of the run; review annotations, printed rather than written, are not a
file format (`--annotations`, verify/cli/reporting.py).
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from verify.report.json_report import ReportInputs

__all__ = ["FORMATS", "ReportFormat", "file_formats", "register_format"]

_NAME = re.compile(r"^[a-z][a-z0-9]*$")
_WRITER = re.compile(r"^[a-z_][\w.]*:[a-z_]\w*$")


@dataclass(frozen=True, slots=True)
class ReportFormat:
    """One file format: written to the path given with `--NAME`, by `writer` ("module:function")."""

    name: str  # the option (--NAME) and the key commands pass paths under
    help: str  # the option's help, written for users
    writer: str  # "module:function", called as function(inputs: ReportInputs, path: Path)
    reread: bool = False  # the format `verify show` reads a report from (--json), so never one it writes again

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"report format name {self.name!r} must be lower-case letters and digits")
        if not _WRITER.match(self.writer):
            raise ValueError(f"report format {self.name!r}: writer {self.writer!r} must be 'module:function'")
        if not self.help.strip():
            raise ValueError(f"report format {self.name!r} needs a help line")

    @property
    def option(self) -> str:
        return f"--{self.name}"

    def write(self, inputs: ReportInputs, path: Path) -> None:
        module, _, function = self.writer.partition(":")
        getattr(importlib.import_module(module), function)(inputs, path)


FORMATS: dict[str, ReportFormat] = {}


def register_format(fmt: ReportFormat) -> ReportFormat:
    """Add a format; a name registered twice is an error, not an override."""
    if fmt.name in FORMATS:
        raise ValueError(f"report format {fmt.name!r} is registered twice")
    FORMATS[fmt.name] = fmt
    return fmt


def file_formats(*, rereading: bool = False) -> list[ReportFormat]:
    """The registered formats in registration order; `rereading`: a command that reads a report (`verify show`
    takes --json as its input) and so writes every format but the one it reads."""
    return [fmt for fmt in FORMATS.values() if not (rereading and fmt.reread)]


# In the order the options are listed in `--help`.
register_format(
    ReportFormat(
        "json", "Write the JSON report (dflash-verify/1) here.", "verify.report.json_report:write_report", True
    )
)
register_format(
    ReportFormat("junit", "Write JUnit XML here (one testcase a mutation).", "verify.report.junit:write_report")
)
register_format(
    ReportFormat(
        "html",
        "Write the HTML report here: one offline page, the source with each mutant inline (Stryker's viewer), "
        "the gates, the mutation x gate matrix.",
        "verify.report.html:write_report",
    )
)
register_format(
    ReportFormat(
        "stryker", "Write a Stryker mutation-testing-elements JSON report here.", "verify.report.stryker:write_report"
    )
)
register_format(
    ReportFormat(
        "codequality",
        "Write GitLab's code-quality JSON here: each survivor on its mutated line.",
        "verify.report.annotations:write_report",
    )
)
