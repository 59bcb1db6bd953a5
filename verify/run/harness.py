"""The digest of the harness's own code: what decides verdicts (the run, the verdict model, the mutation record).

The result cache keys every entry on it (a change to how verdicts are reached re-runs everything) and the Ray
preflight compares it across nodes (a node running other harness code would reach other verdicts). A leaf of
`verify.run`: it reads files and imports nothing of the run.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["harness_digest", "harness_digest_bytes"]

_VERIFY = Path(__file__).parents[1]
_HARNESS = (
    _VERIFY / "run",
    _VERIFY / "report" / "verdict.py",
    _VERIFY / "report" / "decode.py",
    _VERIFY / "mutation.py",
)


def harness_digest_bytes() -> bytes:
    digest = hashlib.sha256()
    for path in _HARNESS:
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            digest.update(file.name.encode() + b"\0" + file.read_bytes())
    return digest.digest()


def harness_digest() -> str:
    """The digest as hex (what a Ray node's probe reports)."""
    return harness_digest_bytes().hex()
