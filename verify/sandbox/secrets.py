"""The harness's secrets: out of every process that forks a child, and out of every report.

A forked child inherits its parent's memory and the environment block its parent was exec'd with (what
`/proc/<pid>/environ` shows), whatever `os.environ` says. So cleaning a child's `os.environ`
(`verify.sandbox.hardening`) is not enough: the `dflash` program re-executes itself once, at the start of a
run that forks its children here, with the denylisted variables (`hardening.is_secret`) removed
(`reexec_clean`), before torch, pytest or the project is imported. From then on no process of the run holds a
secret, in its environment block or in its memory. The values themselves never cross the exec: only their
digests (keyed BLAKE2b, a random key per run), through a pipe the new image reads once, so the reports can
still be redacted (`Secrets.redact`: every stretch of a message whose digest is a secret's becomes
`[redacted]`). A run started from Python rather than the program (a `CliRunner`, `run_verify`) cannot
re-execute its caller: its children's environment blocks are scrubbed, and their memory is its own.

The Ray driver needs its `RAY_*` variables, so a run with `--executor ray` is not re-executed; its node
servers start by exec with the clean environment. Knows nothing of jobs or reports' shapes.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import secrets as random_source
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from verify.sandbox.hardening import clean_environment, is_secret

__all__ = ["MIN_LENGTH", "REDACTED", "Secrets", "is_program", "known", "reexec_clean", "start"]

FD_ENV = "DFLASH_REDACTION_FD"  # the pipe the re-executed image reads the digests from (a number, no secret)
REDACTED = "[redacted]"
MIN_LENGTH = 6  # shorter values ("1", "true") are no secret, and redacting them would garble every message
_URL_PASSWORD = re.compile(r"[a-z][a-z0-9+.-]*://[^/\s:@]+:([^/\s@]+)@", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Secrets:
    """Keyed digests of the secret values a run knows (`key`: 32 random bytes), by their UTF-8 length."""

    key: bytes = b""
    digests: frozenset[bytes] = frozenset()
    lengths: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.digests and len(self.key) != 32:
            raise ValueError(f"a secrets key is 32 bytes, got {len(self.key)}")

    def _digest(self, value: bytes) -> bytes:
        return hashlib.blake2b(value, key=self.key, digest_size=16).digest()

    @classmethod
    def of(cls, values: list[str], key: bytes | None = None) -> Secrets:
        key = key or random_source.token_bytes(32)
        raw = {value.encode() for value in values if len(value.encode()) >= MIN_LENGTH}
        probe = cls(key, frozenset({b"x"}))
        return cls(key, frozenset(probe._digest(v) for v in raw), tuple(sorted({len(v) for v in raw}, reverse=True)))

    def with_values(self, values: list[str]) -> Secrets:
        more = Secrets.of(values, self.key or None)
        lengths = tuple(sorted({*self.lengths, *more.lengths}, reverse=True))
        return Secrets(more.key, self.digests | more.digests, lengths)

    def redact(self, text: str) -> str:
        """`text` with every stretch that is one of the secrets replaced by `REDACTED`."""
        if not self.digests or not text:
            return text
        data = text.encode(errors="surrogateescape")
        spans: list[tuple[int, int]] = []
        for length in self.lengths:  # the longest first: a secret holding a shorter one is redacted whole
            start = 0
            while start + length <= len(data):
                if self._digest(data[start : start + length]) in self.digests and not any(
                    a < start + length and start < b for a, b in spans
                ):
                    spans.append((start, start + length))
                    start += length
                else:
                    start += 1
        if not spans:
            return text
        out, last = bytearray(), 0
        for a, b in sorted(spans):
            out += data[last:a] + REDACTED.encode()
            last = b
        return (bytes(out) + data[last:]).decode(errors="surrogateescape")


def _values(environ: Mapping[str, str]) -> list[str]:
    """The secret values of `environ`: each denylisted variable's, and the password of a URL holding one."""
    found = []
    for name, value in environ.items():
        if is_secret(name, value):
            found.append(value)
            found += _URL_PASSWORD.findall(value)
    return found


def _inherited() -> Secrets:
    """The digests the image before the re-exec passed on, read once from their pipe."""
    fd = os.environ.pop(FD_ENV, "")
    if not fd.isdigit():
        return Secrets()
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError), os.fdopen(int(fd), "rb") as pipe:
        data = json.loads(pipe.read())
        return Secrets(bytes.fromhex(data["key"]), frozenset(bytes.fromhex(d) for d in data["digests"]),
                       tuple(int(n) for n in data["lengths"]))  # fmt: skip
    return Secrets()


@functools.cache
def _from_start() -> Secrets:
    return _inherited()


def known() -> Secrets:
    """Every secret this run knows: those of the image before the re-exec, and those in this process's
    environment now (a run started from Python keeps its caller's)."""
    return _from_start().with_values(_values(os.environ))


def is_program() -> bool:
    """This process is the `dflash` program (`python -m verify`, or the console script), not a caller that
    imported it (a test's CliRunner): only the program may re-execute itself."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return (spec is not None and spec.name == "verify.__main__") or Path(sys.argv[0]).name == "dflash"


def reexec_clean() -> None:
    """Re-execute this program with the same arguments and its environment less every secret, passing the
    secrets' digests on through a pipe; returns at once when there is no secret to remove (so after the re-exec
    too) or this process is not the program."""
    if not is_program() or not sys.orig_argv or FD_ENV in os.environ or not _values(os.environ):
        return  # once at most: the image after the exec finds its pipe named (and no secret)
    digests = known()
    read, write = os.pipe()
    payload = {"key": digests.key.hex(), "digests": sorted(d.hex() for d in digests.digests),
               "lengths": list(digests.lengths)}  # fmt: skip
    os.write(write, json.dumps(payload).encode())  # a few KiB at most: within the pipe's buffer
    os.close(write)
    os.set_inheritable(read, True)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, sys.orig_argv, {**clean_environment(os.environ), FD_ENV: str(read)})


def start(reexec: bool) -> Secrets:
    """A run's first act once its settings are read: re-execute without secrets where `reexec` (its children fork
    here), then the secrets it knows, the digests the image before the exec passed on read before any child
    exists (a forked child would inherit their pipe)."""
    if reexec:
        reexec_clean()
    return known()
