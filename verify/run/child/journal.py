"""A child's journal: one JSON line per event, each sealed with an HMAC chained to the seal before it, and the
reader its parent uses, whole at the end or line by line while the child runs.

The events: a gate started (with when, on the machine's monotonic clock, and its deadline on an idle machine),
a gate finished (its outcome), the session stopped on purpose at a first kill, the harness found changed
(`verify.run.child.integrity`). The key is made by the parent for one job (`new_key`) and reaches the child in
memory only (a fork inherits it; a warm worker gets it with the job), never in a file or the environment. A line
written from the format alone, one dropped from the middle, or lines reordered or rewritten fail the parent's
check (`Reader.tampered`), and the job is `error`. What it does not stop: a mutant that searches its own
process's memory for the key can seal lines too (docs/how-to/confinement.md says what an in-process mutant can
forge). Without a key (a recorder run by hand, in tests) lines are written and read unsealed.

Knows nothing of pytest or verdicts beyond the outcome record.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verify.report.decode import outcome_from_dict
from verify.report.verdict import GateOutcome

__all__ = ["Entries", "Journal", "Reader", "new_key", "read_journal"]

_KEY_BYTES = 32
_SEAL = "seal"  # the field that carries a line's seal


def new_key() -> bytes:
    """A fresh key for one job's journal."""
    return secrets.token_bytes(_KEY_BYTES)


def _seal(key: bytes, previous: str, body: str) -> str:
    return hmac.new(key, (previous + "\n" + body).encode(), hashlib.sha256).hexdigest()


def _body(record: dict[str, Any]) -> str:
    return json.dumps(record, sort_keys=True)


class Journal:
    """The child's side: appends sealed lines, each closed at once, so it is in the kernel's page cache, where
    the parent reads it however the child ends (a SIGKILL included). No fsync: it guards only against the
    machine going down, which loses the run anyway (~3.5 ms a line on a busy disk, two lines a gate)."""

    def __init__(self, path: Path, key: bytes = b"") -> None:
        self.path = path
        self._key = key
        self._last = ""  # the seal of the line before

    def write(self, record: dict[str, Any]) -> None:
        body = _body(record)
        if self._key:
            self._last = _seal(self._key, self._last, body)
            body = _body({**record, _SEAL: self._last})
        with open(self.path, "a") as journal:
            journal.write(body + "\n")


@dataclass
class Entries:
    """What a journal says: gates started (in order), gates finished (their outcomes), whether the child
    stopped on purpose at a first kill, and why it is not to be trusted ("" when it is)."""

    started: list[str] = field(default_factory=list)
    finished: dict[str, GateOutcome] = field(default_factory=dict)
    stopped: bool = False
    tampered: str = ""


class Reader:
    """The parent's side: `feed` reads the lines appended since the last call, checks each one's seal against
    the chain, and returns the records that pass. The first line that fails ends the trust: `entries.tampered`
    says why, and nothing after it is read."""

    def __init__(self, path: Path, key: bytes = b"") -> None:
        self.path, self._key = path, key
        self._offset = 0
        self._last = ""
        self._count = 0
        self.entries = Entries()

    def feed(self) -> list[dict[str, Any]]:
        if self.entries.tampered:
            return []
        try:
            if os.stat(self.path).st_size <= self._offset:
                return []
            with open(self.path, "rb") as journal:
                journal.seek(self._offset)
                data = journal.read()
        except OSError:
            return []
        complete = data.rpartition(b"\n")[0]  # a line not ended yet is read once it is (or was cut by a kill)
        if not complete:
            return []
        self._offset += len(complete) + 1
        records = []
        for line in complete.decode(errors="replace").split("\n"):
            record = self._check(line)
            if self.entries.tampered:
                break
            if record is not None:
                records.append(record)
                self._take(record)
        return records

    def _check(self, line: str) -> dict[str, Any] | None:
        self._count += 1
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            record = None
        if not isinstance(record, dict):
            if self._key:  # a whole line, so not one cut short by a kill
                self.entries.tampered = f"journal line {self._count} is not a record the harness wrote"
            return None
        if not self._key:
            return record
        seal = record.pop(_SEAL, "")
        expected = _seal(self._key, self._last, _body(record))
        if not isinstance(seal, str) or not hmac.compare_digest(seal, expected):
            self.entries.tampered = f"journal line {self._count} does not carry the harness's seal (forged or moved)"
            return None
        self._last = seal
        return record

    def _take(self, record: dict[str, Any]) -> None:
        entries = self.entries
        if "started" in record:
            entries.started.append(str(record["started"]))
        elif "stopped" in record:
            entries.stopped = True
        elif "tampered" in record:
            entries.tampered = f"the harness found its own code changed: {record['tampered']}"[:300]
        elif "gate_id" in record:
            entries.finished[record["gate_id"]] = outcome_from_dict(record)

    def leftover(self) -> bool:
        """Whether the file holds bytes past the last whole line (a line cut short by a kill)."""
        try:
            return os.stat(self.path).st_size > self._offset
        except OSError:
            return False


def read_journal(path: Path, key: bytes = b"") -> Entries:
    """The whole journal at `path`, checked against `key` (b"": unsealed)."""
    reader = Reader(path, key)
    reader.feed()
    return reader.entries
