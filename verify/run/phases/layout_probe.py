"""The layout probe: after the baseline, proof that the gates imported the project's source from the private
copy, before any mutation runs.

A mutant is served only to imports of the private copy's source roots. If the baseline's coverage (measured
over exactly those files) saw none of them, the gates import the source from somewhere else (an installed
copy, the working tree through a path a conftest adds) or not at all, and every mutation would "survive".
That is a configuration error, raised here with what to check. Knows nothing of forking or verdicts.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from verify.config.settings import ConfigError, ProjectConfig

__all__ = ["check_sources_imported"]


def _under(file: str, roots: tuple[str, ...]) -> bool:
    path = PurePosixPath(file)
    return any(path == PurePosixPath(r) or path.is_relative_to(PurePosixPath(r)) for r in roots)


def check_sources_imported(config: ProjectConfig, coverage: dict[str, Any]) -> None:
    """Raise ConfigError when the baseline executed no line of any file under the source roots."""
    lines_by_file = coverage.get("lines", {})
    if any(lines and _under(file, config.source_roots) for file, lines in lines_by_file.items()):
        return
    raise ConfigError(
        f"the gates never imported the source roots ({', '.join(config.source_roots)}) from dflash's private copy: "
        f"no line of them ran in the baseline, so no mutant could reach a gate. Check that [tool.dflash] "
        f"source_roots names the folder your gates import from (`src` in a src/ layout, the package folder in a "
        f"flat one; import names served: {', '.join(config.source_packages) or 'none'}), and that no conftest "
        "or installed copy hands the gates another copy of the code"
    )
