"""One job's own streams: the files its stdout and stderr land in, and the ceiling on what it writes there.

pytest captures a gate's output with `--capture=fd`: it points fds 1 and 2 at temp files for each phase of a
gate, then reads them back whole and truncates them. A warm worker (`verify.run.child.zygote`) made those files
before forking, so every job forked from it would share them (one open file, one offset): a mutant that
flooded them left them grown for the next job of the worker to read, and deleted-but-open in the worker until
the run ended. So each job's child points pytest's capture at files of its own, in its own folder (`own`), the
worker's never written by a job; they go with the folder when the job ends, and only the job's processes ever
held them.

What a job writes to its streams (its log, where they point outside a gate's phases, and the capture files) is
bounded by its output ceiling (`[tool.dflash] output_max_mb`), counted over its whole job. The parent watches
the files' sizes (`verify.run.execution.ceilings`) and ends a child past it; `JobStreams`, the child's plugin,
checks after every phase, before pytest reads the capture back, and ends the child with `OUTPUT_EXIT` rather
than let pytest load a flood into memory. Knows nothing of verdicts or of how the child was started.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any

import pytest

__all__ = ["OUTPUT_EXIT", "JobStreams", "captures", "own"]

OUTPUT_EXIT = 74  # the child wrote past its output ceiling and ended itself before pytest read it back (EX_IOERR)


def captures(config: pytest.Config) -> list[Any] | None:
    """pytest's fd captures of stdout and stderr (each writes a temp file), [] when pytest captures no fd (`-s`,
    `--capture=sys`: nothing of the kind is shared by a fork), None when its capture is not one this module knows
    (a pytest whose internals moved): a warm worker then serves no job."""
    manager = config.pluginmanager.getplugin("capturemanager")
    if manager is None or getattr(manager, "_method", "") != "fd":
        return []
    found = [getattr(getattr(manager, "_global_capturing", None), name, None) for name in ("out", "err")]
    if not all(hasattr(capture, "tmpfile") and hasattr(capture, "targetfd") for capture in found):
        return None
    return found


def own(config: pytest.Config, files: Sequence[Path]) -> None:
    """Point pytest's capture of stdout and stderr at `files` (created here, in the job's own folder): each new
    file is put on the capture's own descriptor number, so pytest's objects write and read it unchanged, and the
    file they held before (a warm worker's) is no longer reachable from this process."""
    for capture, path in zip(captures(config) or (), files, strict=False):
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        target = capture.tmpfile.fileno()
        os.dup2(fd, target, inheritable=False)
        os.close(fd)
        with contextlib.suppress(OSError, ValueError):
            capture.tmpfile.seek(0)  # the text layer forgets the old file's position


class JobStreams:
    """The pytest plugin of a job's child that owns its streams and bounds them. `files`: the job's log, then the
    files its stdout and stderr are captured in."""

    def __init__(self, files: Sequence[Path], ceiling_bytes: int) -> None:
        self.files, self.ceiling_bytes = tuple(files), ceiling_bytes
        self.read_bytes = 0  # captured output pytest read back (and truncated) after earlier phases

    def pytest_configure(self, config: pytest.Config) -> None:
        # A historic hook: a plugin registered after pytest's configure (a warm worker's job child registers this
        # one) is called at once, so both kinds of child own their streams before any gate runs.
        own(config, self.files[1:])

    def _sizes(self) -> list[int]:
        sizes = []
        for path in self.files:
            try:
                sizes.append(os.stat(path).st_size)
            except OSError:
                sizes.append(0)
        return sizes

    def check(self) -> None:
        if not self.ceiling_bytes:
            return
        log, *captured = self._sizes()
        if self.read_bytes + sum(captured) + log > self.ceiling_bytes:
            os._exit(OUTPUT_EXIT)  # before pytest reads a flood into memory; the parent names the crash
        self.read_bytes += sum(captured)

    def _bounded(self) -> Generator[None, Any, Any]:
        try:
            return (yield)
        finally:
            self.check()

    # trylast: the innermost wrapper of each phase, inside pytest's capture, which reads the output back after it.
    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, Any, Any]:
        return (yield from self._bounded())

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, Any]:
        return (yield from self._bounded())

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_teardown(self, item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, Any]:
        return (yield from self._bounded())
