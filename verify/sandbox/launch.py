"""The confined launcher: confine this process to a few writable folders, then run a command under it as the
keeper of every process the command starts. The sweep runs mutmut through it (`verify.sweep.driver`), and
`dflash mutations propose` its import probe (`verify.propose.check`): the processes where mutants or the project's
own module-level code run outside `dflash verify`'s children.

Run as `python .../verify/sandbox/launch.py COMMAND...` with the folders in `WRITABLE` (os.pathsep-separated): a
fresh interpreter is single-threaded, so Landlock (`verify.sandbox.confine`) covers every thread, and what it
restricts passes through fork and `exec` to the command, its forked workers and every process it starts. A kernel
that has Landlock and refuses a step ends the launcher with REFUSED, its line starting with REFUSAL, before the
command runs, so nothing runs unconfined by accident; a kernel without it runs the command as it is (the caller's
inventory still checks the project afterwards).

Then it stays, as the command's reaper: it is the subreaper of everything beneath it, so a process whose parent
dies (a mutant's fork once the mutant ended or was killed for a ceiling, a daemon that called setsid) comes back
to it, and it ends each at once with everything under it; the command dies with it (PR_SET_PDEATHSIG), and it dies
with its caller (a SIGTERM when the caller's process ends, however it ends: a SIGKILL too), and then ends every
process beneath it before it exits. So a killed caller leaves no process behind. A SIGINT (the caller's clean
stop) is passed to the command. Its exit status is the command's (128 + the signal that ended it). Knows nothing
of mutmut, proposals or their results.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time
from pathlib import Path

from verify.sandbox import reaper
from verify.sandbox.confine import ConfineError, confine

WRITABLE = "DFLASH_LAUNCH_WRITABLE"
REFUSED = 75  # EX_TEMPFAIL: its caller reports it as harness trouble, naming the refused step
NOT_RUN = "; it was not run"
REFUSAL = "dflash launch: the kernel refused to confine the command"  # how a caller tells its line from the command's
_PR_SET_PDEATHSIG = 1
_POLL_S = 0.2  # how often orphans that came back are looked for
_END_S = 10.0  # to end every process beneath the launcher, however deep its chain of forks


def refused(exit_status: int, output: str) -> str:
    """ "(why)" when the launcher ended with `exit_status` because the kernel refused the confinement and said so
    in `output` (its streams, the command's among them), else "". The last such line counts."""
    lines = [line for line in output.splitlines() if line.startswith(REFUSAL)]
    if exit_status != REFUSED or not lines:
        return ""
    return lines[-1].removeprefix(REFUSAL).removesuffix(NOT_RUN).strip()


class _Ended(Exception):
    """The driver is gone (or asked for the end): every process beneath the launcher is ended now."""


def _die_with_parent(parent: int, sig: int) -> None:
    """The kernel sends `sig` to this process when `parent` (the one that started it) dies."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, sig)
    if os.getppid() != parent:  # it died before the request took effect
        os.kill(os.getpid(), sig)


def _start(argv: list[str], keeper: int) -> int:
    pid = os.fork()
    if pid == 0:  # the command: killed with the keeper, whatever kills it
        try:
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, signal.SIG_DFL)
            _die_with_parent(keeper, signal.SIGKILL)
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)  # exec failed
    return pid


def _exit_status(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def keep(command: int) -> int:
    """Reap and end orphans until `command` exits, then end whatever is left; its exit status."""
    status = None
    while status is None:
        try:
            while (done := os.waitpid(-1, os.WNOHANG)) != (0, 0):
                if done[0] == command:
                    status = _exit_status(done[1])
        except ChildProcessError:
            break
        # Every child but the command came back to this subreaper: its parent died. None of them outlives it.
        if reaper.has_strays({command}):  # cheap; the full scan only when there is one
            for pid in set(reaper.children()) - {command}:
                reaper.end_tree(pid)
        if status is None:
            time.sleep(_POLL_S)
    reaper.end_children(within_s=_END_S)
    return 70 if status is None else status


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: launch.py COMMAND [ARG...]", file=sys.stderr)
        return 2
    folders = [Path(p) for p in os.environ.get(WRITABLE, "").split(os.pathsep) if p]
    try:
        confine(folders)
    except ConfineError as error:
        print(f"{REFUSAL} ({error}){NOT_RUN}", file=sys.stderr)
        return REFUSED
    command = 0

    def end(signum: int, frame: object) -> None:
        raise _Ended

    def stop(signum: int, frame: object) -> None:
        if command:
            with contextlib.suppress(ProcessLookupError):
                os.kill(command, signal.SIGINT)

    signal.signal(signal.SIGTERM, end)
    signal.signal(signal.SIGINT, stop)
    reaper.become_subreaper()
    _die_with_parent(os.getppid(), signal.SIGTERM)
    try:
        command = _start(argv, os.getpid())
        return keep(command)
    except _Ended:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        reaper.end_children(within_s=_END_S)
        return 128 + signal.SIGTERM


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
