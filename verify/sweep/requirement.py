"""The one mutmut version `dflash sweep` can drive, checked before anything of mutmut is imported.

The sweep reads mutmut's private state (its `mutants/*.meta` files, `mutmut-stats.json`, its exit codes and
`mutmut.mutation.diff_apply`), which changes between releases without notice, so exactly one version is
supported: the one pyproject.toml's `sweep` extra pins (`dflash verify` needs no mutmut). A missing one, or
another one installed beside an engine, is refused by name with the command that fixes it, never left to fail
later as a traceback or, worse, as misread verdicts. Knows nothing of the sweep itself; reads only installed
package metadata.
"""

from __future__ import annotations

from importlib import metadata

__all__ = ["MUTMUT_VERSION", "MutmutVersionError", "require_mutmut"]

# tests/sweep/test_requirement.py checks that pyproject.toml pins this same version.
MUTMUT_VERSION = "3.8.1"


class MutmutVersionError(Exception):
    """mutmut is missing, or is another version than the one the sweep reads (CLI exit code 2)."""


def require_mutmut() -> None:
    """Return when the installed mutmut is MUTMUT_VERSION; otherwise say which is needed and how to get it."""
    # The extra is named with the path a user installed from: dflash-verify is not on PyPI, so its bare name would
    # ask PyPI for someone else's package.
    fix = f"pip install 'mutmut=={MUTMUT_VERSION}' (the sweep extra: pip install '/path/to/dflash-verify[sweep]')"
    try:
        found = metadata.version("mutmut")
    except metadata.PackageNotFoundError:
        raise MutmutVersionError(f"dflash sweep needs mutmut {MUTMUT_VERSION}, which is not installed: {fix}") from None
    if found != MUTMUT_VERSION:
        raise MutmutVersionError(
            f"dflash sweep needs mutmut {MUTMUT_VERSION} (it reads that version's result files), found {found}: {fix}"
        )
