"""Confinement of one child: after it, the child and everything it starts may write only the paths it names.

Landlock (Linux 5.13+), driven through three system calls with ctypes: an unprivileged process restricts
itself and its future descendants, for good. Only the rights that change the file system are handled
(writing, truncating, creating, removing, linking and renaming files); reading and executing stay allowed
everywhere, so the interpreter, the virtualenv and the project are read as before. Each ABI version handles
what it knows: renames and links across folders from ABI 2 (before it the kernel refuses every one), truncate
from ABI 3, and from ABI 6 signals and abstract unix sockets that reach outside the child's own processes.
Landlock does not govern chmod, chown, utime or xattrs: the end-of-run inventory (`verify.sandbox.inventory`)
reports those in the project. Threads that exist when `confine` runs stay unconfined, so it runs first thing
in a single-threaded child.

Below ABI 6 a confined child can still signal processes outside its own (the harness that runs it included):
such confinement is described as "partial", with what it lacks. `DFLASH_CONFINE=off` in the environment turns
confinement off (the tests of the detection path use it). This module knows nothing of mutations, jobs or
reports.
"""

from __future__ import annotations

import ctypes
import glob
import os
import platform
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ConfineError", "Confinement", "confine", "device_files", "probe", "switched_off"]

SWITCH = "DFLASH_CONFINE"  # "off": no confinement (the detection path's tests); anything else: on where possible

# The three calls have one number on every architecture that has them (the unified table since 5.x).
_SYSCALLS = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446), "riscv64": (444, 445, 446)}
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

_WRITE_FILE, _REMOVE_DIR, _REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
_MAKE = sum(1 << bit for bit in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
_REFER, _TRUNCATE = 1 << 13, 1 << 14
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1
_ERRORS = {38: "the kernel has no Landlock system calls (ENOSYS)", 95: "Landlock is disabled at boot (EOPNOTSUPP)"}
SCOPED_ABI = 6  # the first ABI that keeps a child's signals and abstract unix sockets among its own processes


class ConfineError(Exception):
    """Landlock answered the probe but refused a rule or the restriction: the child must not run unconfined."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]  # fmt: skip


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # the kernel's struct is packed: 12 bytes
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


@dataclass(frozen=True, slots=True)
class Confinement:
    """What confinement this machine gives a child: `abi` 0 means none, and `why` says why."""

    abi: int
    why: str = ""

    @property
    def active(self) -> bool:
        return self.abi > 0

    @property
    def missing(self) -> tuple[str, ...]:
        """What this ABI leaves a confined child free to do that a full confinement (ABI 6 on) refuses."""
        if not self.active:
            return ()
        gaps = []
        if self.abi < 3:
            gaps.append("truncate by path (from ABI 3)")
        if self.abi < SCOPED_ABI:
            gaps.append(f"signals to processes outside the child's own, the harness included, nor abstract unix "
                        f"sockets outside them (from ABI {SCOPED_ABI})")  # fmt: skip
        return tuple(gaps)

    def describe(self) -> str:
        if not self.active:
            return f"off: {self.why}"
        if self.missing:
            return f"landlock ABI {self.abi}, partial: it does not govern {'; nor '.join(self.missing)}"
        return f"landlock ABI {self.abi}"


def switched_off() -> bool:
    """Confinement turned off for the run (`DFLASH_CONFINE=off`), whatever the kernel offers."""
    return os.environ.get(SWITCH, "").lower() == "off"


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def probe() -> Confinement:
    """The Landlock ABI this kernel offers, or why there is none (or the switch that turned it off)."""
    if switched_off():
        return Confinement(0, f"{SWITCH}=off")
    numbers = _SYSCALLS.get(platform.machine())
    if numbers is None:
        return Confinement(0, f"no Landlock system call numbers known for {platform.machine()}")
    abi = _libc().syscall(numbers[0], None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    if abi < 0:
        errno = ctypes.get_errno()
        why = _ERRORS.get(errno, f"landlock_create_ruleset failed: {os.strerror(errno)}")
        return Confinement(0, f"{why}; this run only detects changes to the project afterwards")
    return Confinement(int(abi))


def _handled(abi: int) -> int:
    rights = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE
    if abi >= 2:
        rights |= _REFER
    if abi >= 3:
        rights |= _TRUNCATE
    return rights


def device_files() -> list[Path]:
    """Device files a child opens for writing: the null devices, the terminal, and GPUs (CUDA opens its
    device files read-write)."""
    names = ["/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/random", "/dev/urandom"]
    names += glob.glob("/dev/nvidia*") + glob.glob("/dev/dri/*") + glob.glob("/dev/kfd")
    return [Path(name) for name in names]


def confine(writable: Iterable[Path], shared_memory: bool = True) -> Confinement:
    """Restrict this thread and every process it starts from now on to writing beneath `writable` (folders:
    anything inside them; files: writing only), plus /dev/shm (unless `shared_memory` is False: a sweep's
    mutant), this process's threads' /proc files and the device files. Paths that do not exist
    are left out. Returns what was applied; `probe()`'s answer without Landlock. Raises ConfineError when the
    kernel has Landlock and refuses a step, so a child never runs unconfined by accident."""
    found = probe()
    if not found.active:
        return found
    libc, (create, add_rule, restrict) = _libc(), _SYSCALLS[platform.machine()]
    handled = _handled(found.abi)
    attr = _RulesetAttr(handled, 0, _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if found.abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if found.abi >= 6 else 8  # older kernels know only the first field
    ruleset = libc.syscall(create, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise ConfineError(f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    try:
        # CUDA (glibc naming another thread) writes its threads' /proc files: this process's own, no one else's.
        own_threads = Path(f"/proc/{os.getpid()}/task")
        for path in [*writable, *([Path("/dev/shm")] if shared_memory else []), own_threads, *device_files()]:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # absent here: nothing to allow
            try:
                is_dir = os.path.isdir(path)
                rights = handled if is_dir else handled & (_WRITE_FILE | _TRUNCATE)
                rule = _PathBeneathAttr(rights, fd)
                if libc.syscall(add_rule, ctypes.c_int(ruleset), _RULE_PATH_BENEATH, ctypes.byref(rule), 0) < 0:
                    raise ConfineError(f"landlock_add_rule {path}: {os.strerror(ctypes.get_errno())}")
            finally:
                os.close(fd)
        # Without no_new_privs the kernel refuses an unprivileged restriction; it also keeps a set-user-id
        # program started by the child from running with more rights than the child.
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise ConfineError(f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(ctypes.get_errno())}")
        if libc.syscall(restrict, ctypes.c_int(ruleset), ctypes.c_uint32(0)) < 0:
            raise ConfineError(f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(ruleset)
    return found
