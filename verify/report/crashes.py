"""Why a crash happened, where a ceiling says it: the named kinds of `crashed` (a child past its memory, process,
file-size or output ceiling) and how an outcome is read as one. A leaf beside the verdict model: the executor names the
ceilings it enforces by these exception types, the judge records the kind, the renderers show it.
"""

from __future__ import annotations

from verify.compat import StrEnum
from verify.report.verdict import GateOutcome, Outcome

__all__ = ["CrashKind", "crash_kind"]


class CrashKind(StrEnum):
    """Why a crash happened, where a ceiling says it (PIT's MEMORY_ERROR is `memory`): a child past its memory
    ceiling, its process ceiling, its file-size ceiling or its output ceiling (what it wrote to its streams). A
    crash of no named kind has none."""

    MEMORY = "memory"
    PROCESSES = "processes"
    DISK = "disk"
    OUTPUT = "output"


# exc_type (what the executor or Python names it) -> kind; messages below name the kind where the type is generic.
_CRASH_TYPES = {
    "MemoryError": CrashKind.MEMORY,
    "MemoryCeiling": CrashKind.MEMORY,
    "OutOfMemoryError": CrashKind.MEMORY,
    "ProcessCeiling": CrashKind.PROCESSES,
    "DiskCeiling": CrashKind.DISK,
    "SIGXFSZ": CrashKind.DISK,
    "OutputCeiling": CrashKind.OUTPUT,
}
_CRASH_MESSAGES = (
    ("can't allocate memory", CrashKind.MEMORY),  # torch's CPU allocator (a RuntimeError)
    ("Cannot allocate memory", CrashKind.MEMORY),  # ENOMEM
    ("File too large", CrashKind.DISK),  # EFBIG: a write past the file-size ceiling
)


def crash_kind(outcome: GateOutcome) -> CrashKind | None:
    """The named kind of a red-by-exception outcome (a ceiling it went past), None for any other."""
    if outcome.outcome is not Outcome.EXCEPTION:
        return None
    if outcome.exc_type in _CRASH_TYPES:
        return _CRASH_TYPES[outcome.exc_type]
    return next((kind for text, kind in _CRASH_MESSAGES if text in outcome.message), None)
