"""The system calls behind each namespace layer (`verify.sandbox.namespaces`), through ctypes: unshare(2),
the id maps of a user namespace, mount(2) of a private /proc and tmpfs, the loopback device brought up,
capabilities dropped, and what the processes above a job in its PID namespace need (descriptors closed, an end
that mirrors the job's). Each raises OSError naming the step and the errno. Knows nothing of children or jobs.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import resource
import signal
import socket
import struct
from pathlib import Path
from typing import NoReturn

__all__ = ["CLONE_NEWIPC", "CLONE_NEWNET", "CLONE_NEWNS", "CLONE_NEWPID", "close_all_but", "drop_capabilities",
           "end_as", "libc", "loopback_up", "make_root_private", "mount_proc", "own_user_namespace", "private_memory",
           "unshare"]  # fmt: skip

CLONE_NEWNS, CLONE_NEWIPC, _CLONE_NEWUSER = 0x00020000, 0x08000000, 0x10000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_BIND, _MS_REC, _MS_PRIVATE = 2, 4, 8, 4096, 16384, 1 << 18
_MNT_DETACH = 2
_PR_SET_PDEATHSIG, _PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 1, 24, 47, 4
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 1
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_STAGE = ".private"  # the tmpfs's first mount point, in the child's folder, empty again once it is bound
_SPENT = "private-memory"  # what the waiter found in the tmpfs when the job ended, for the executor


def libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)} ({errno.errorcode.get(code, code)})")


def unshare(flags: int, what: str) -> None:
    _check(libc().unshare(ctypes.c_int(flags)), f"unshare({what})")


def _mount(source: str | None, target: Path | str, kind: str | None, flags: int, data: str | None = None) -> None:
    def raw(text: str | None) -> bytes | None:
        return None if text is None else os.fsencode(text)

    result = libc().mount(raw(source), raw(str(target)), raw(kind), ctypes.c_ulong(flags), raw(data))
    _check(result, f"mount {kind or source} on {target}")


def own_user_namespace() -> None:
    """A user namespace of this process's own, its uid and gid mapped to themselves (read before: unmapped,
    they read as the overflow ids); setgroups denied first, as the kernel requires of an unprivileged writer
    of gid_map."""
    uid, gid = os.getuid(), os.getgid()
    unshare(_CLONE_NEWUSER, "user")
    Path("/proc/self/setgroups").write_text("deny")
    Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
    Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")


def loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14s", b"lo", 0, b"")
        flags = struct.unpack("16sH14s", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH14s", b"lo", flags | _IFF_UP, b""))


def private_memory(base: Path, tmp: Path, size: int) -> None:
    """One tmpfs of `size` bytes (0: the kernel's default, half the memory) mounted on `tmp` and /dev/shm, so
    both share one limit: staged at base/.private, its two folders bound, the stage unmounted."""
    stage = base / _STAGE
    stage.mkdir(mode=0o700, exist_ok=True)
    options = "mode=0700" + (f",size={size}" if size else "")
    _mount("tmpfs", stage, "tmpfs", _MS_NOSUID | _MS_NODEV, options)
    (stage / "shm").mkdir()
    os.chmod(stage / "shm", 0o1777)  # as /dev/shm is: anyone may create, only the owner remove
    (stage / "tmp").mkdir(mode=0o700)
    tmp.mkdir(exist_ok=True)
    _mount(str(stage / "tmp"), tmp, None, _MS_BIND)
    _mount(str(stage / "shm"), "/dev/shm", None, _MS_BIND)
    _check(libc().umount2(os.fsencode(str(stage)), _MNT_DETACH), f"umount {stage}")
    stage.rmdir()


def drop_capabilities() -> None:
    """Every capability this process holds in its user namespace, gone for good: the bounding set emptied
    (no exec regains one), the ambient set cleared, then the effective, permitted and inheritable sets. Without
    it a job could unmount its /proc and see the machine's beneath."""
    calls = libc()
    last = 63  # prctl refuses a capability this kernel lacks with EINVAL: nothing to drop
    with contextlib.suppress(OSError, ValueError):
        last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    for cap in range(last + 1):
        calls.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
    calls.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # two {effective, permitted, inheritable}: all zero
    _check(calls.capset(header, data), "capset")


def make_root_private() -> None:
    """Nothing mounted in this mount namespace from now on reaches the one it was copied from."""
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)


def mount_proc() -> None:
    """A /proc of this process's PID namespace over the machine's."""
    _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)


def close_all_but(keep: set[int]) -> None:
    """A helper holds no descriptor of the job's (the "confined" pipe, the log, sockets) beyond what it uses."""
    low = 3
    for fd in sorted(keep):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, resource.getrlimit(resource.RLIMIT_NOFILE)[0])


def end_as(status: int) -> NoReturn:
    """End this process as a waited-for process ended (`status` from waitpid): the same exit code, or killed
    by the same signal (with no core dump of its own)."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        with contextlib.suppress(OSError, ValueError):
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        with contextlib.suppress(OSError, ValueError):  # SIGKILL and SIGSTOP take no handler
            signal.signal(number, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {number})
        os.kill(os.getpid(), number)
        os._exit(128 + number)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 70)
