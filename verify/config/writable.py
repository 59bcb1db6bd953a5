"""`[tool.dflash] writable`: the folders outside the project that gates may write, what the key means and the
checks that keep the project itself (and the private copies) out of it.

Configuration only: the settings validate the key with `check_writable`, and a child hands `writable_paths` to
its confinement (`verify.sandbox.confine`), which knows nothing of the key. Knows nothing of Landlock.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from pathlib import Path

__all__ = ["WRITABLE_DOC", "check_writable", "writable_paths"]

WRITABLE_DOC = (
    "Folders or files outside the project that gates may write (absolute or ~/...), beside each child's own "
    "copy and temp dir: confinement makes every other path read-only to a child."
)


def writable_paths(items: Iterable[str]) -> tuple[Path, ...]:
    """`[tool.dflash] writable`, with ~ expanded and links resolved (Landlock applies to the real folder)."""
    return tuple(Path(item).expanduser().resolve() if Path(item).expanduser().is_absolute() else Path(item)
                 for item in items)  # fmt: skip


def check_writable(root: Path, items: object, error: type[Exception]) -> None:
    """A writable path is the user's own choice outside the project: the project never is one. Raises `error`
    (the settings' ConfigError, handed in since the settings import this module)."""
    if not isinstance(items, tuple) or not all(isinstance(item, str) and item for item in items):
        raise error("[tool.dflash] writable must be a list of non-empty strings")
    root = Path(root).resolve()
    for item, path in zip(items, writable_paths(items), strict=True):
        if not path.is_absolute():
            raise error(f"[tool.dflash] writable: {item!r} must be absolute or start with ~/")
        if path.is_relative_to(root) or root.is_relative_to(path):
            raise error(
                f"[tool.dflash] writable: {item!r} holds or lies inside the project ({root}): the project is never "
                "writable to a child; name a folder outside it"
            )
        temp = Path(tempfile.gettempdir()).resolve()
        if temp.is_relative_to(path):
            raise error(
                f"[tool.dflash] writable: {item!r} holds the temp folder ({temp}) where dflash keeps the pristine "
                "copy and every child's folder: a mutant could rewrite them; name the subfolder your gates need "
                "(e.g. /tmp/torchinductor_USER), or run with TMPDIR set outside it"
            )
