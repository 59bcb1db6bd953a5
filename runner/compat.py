"""`StrEnum` on Python 3.10 as well as 3.11+: the runner's one use of a 3.11 feature.

The runner imports nothing of verify, so it keeps this copy of the shim verify/compat.py also holds.
"""

from __future__ import annotations

import sys

__all__ = ["StrEnum"]

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:
    from enum import Enum

    class StrEnum(str, Enum):
        """3.11's StrEnum: members are strings, and str() gives the value, not `Class.NAME` (3.10's Enum
        formats from str(), so f-strings follow)."""

        __str__ = str.__str__
