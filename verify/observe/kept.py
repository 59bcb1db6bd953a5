"""Explanations kept across verify runs: a survivor's explanation is re-used while nothing it depends on changed.

A verify run explains its survivors at its end (each reaching gate run again, beside the pristine tree, in
children of its own): minutes on a large engine, for an answer that is the same on the next run of the same
tree. The key holds everything an explanation depends on: the tree digest of the result cache (every file the
gates run against, the run settings, Python's and torch's versions and the harness's own code), this package's
code (the observation and its wording), the observer the project names, and the mutant's text. So an edit to
the engine, its gates, the catalog entry or dflash itself explains again; nothing else does. Only explanations
are kept, never a failure to explain (the next run tries again). The entries live beside the verdicts in
`.dflash-cache/`, under the same `--no-cache` and `--clear-cache`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from verify.config.project import CACHE_DIR
from verify.config.settings import ProjectConfig

__all__ = ["KeptExplanation", "KeptExplanations"]

_FORMAT = "dflash-explanation/1"
_PACKAGE = Path(__file__).resolve().parent


@dataclass(frozen=True, slots=True)
class KeptExplanation:
    """What a report shows of an explanation: its one line and its full text."""

    summary: str
    text: str


def _package_digest() -> bytes:
    digest = hashlib.sha256()
    for path in sorted(_PACKAGE.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.digest()


class KeptExplanations:
    """The explanations of one tree, read and written by mutant text."""

    def __init__(self, config: ProjectConfig, tree: str, enabled: bool = True) -> None:
        self.directory = Path(config.root) / CACHE_DIR
        self.enabled = enabled
        self._base = hashlib.sha256(_FORMAT.encode() + tree.encode() + _package_digest() + config.observe.encode())

    def key(self, files: Mapping[str, str]) -> str:
        """The entry of a mutant given as {relative file: mutated text}."""
        digest = self._base.copy()
        digest.update(json.dumps(sorted(files.items())).encode())
        return digest.hexdigest()

    def _path(self, files: Mapping[str, str]) -> Path:
        return self.directory / f"explanation-{self.key(files)}.json"

    def get(self, files: Mapping[str, str]) -> KeptExplanation | None:
        path = self._path(files)
        if not self.enabled or not path.is_file():
            return None
        try:
            data = json.loads(path.read_text())
            return KeptExplanation(str(data["summary"]), str(data["text"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None  # a torn or foreign entry is a miss, never an error

    def put(self, files: Mapping[str, str], explanation: KeptExplanation) -> None:
        if not self.enabled:
            return
        self.directory.mkdir(exist_ok=True)
        ignore = self.directory / ".gitignore"
        if not ignore.exists():
            ignore.write_text("*\n")
        path = self._path(files)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"summary": explanation.summary, "text": explanation.text}))
        tmp.replace(path)
