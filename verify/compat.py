"""What dflash-verify takes from Python 3.11 and must also find on 3.10: `StrEnum` and `tomllib`.

A leaf: imports nothing internal, so the verdict model can use it and stay a leaf. An engine that pins
Python 3.10 installs dflash-verify beside it; the runner keeps its own `StrEnum` (runner/compat.py), since
it imports nothing of verify.
"""

from __future__ import annotations

import sys

__all__ = ["StrEnum", "tomllib"]

if sys.version_info >= (3, 11):
    from enum import StrEnum

    import tomllib
else:
    from enum import Enum

    # tomli is the library that became tomllib (same API); pyproject requires it on 3.10 only.
    import tomli as tomllib

    class StrEnum(str, Enum):
        """3.11's StrEnum: members are strings, and str() gives the value, not `Class.NAME` (3.10's Enum
        formats from str(), so f-strings follow)."""

        __str__ = str.__str__
