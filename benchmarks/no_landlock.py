"""Run a command on a kernel without Landlock, as far as it can tell: `python benchmarks/no_landlock.py CMD...`.

A seccomp filter, installed here and inherited by everything the command starts, answers the three Landlock
system calls with ENOSYS, exactly as a kernel built without Landlock does; every other call passes. The tests
start one node of the local Ray cluster under it (benchmarks/ray_cluster.py), so that node really cannot
confine its children while the other can. Linux x86-64, aarch64 and riscv64 (the calls are 444-446 there).
"""

from __future__ import annotations

import ctypes
import os
import sys

_LANDLOCK_FIRST, _LANDLOCK_LAST = 444, 446
_ENOSYS = 38
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_LD_W_ABS, _JGE_K, _JGT_K, _RET_K = 0x20, 0x35, 0x25, 0x06  # classic BPF opcodes
_RET_ERRNO, _RET_ALLOW = 0x00050000, 0x7FFF0000


class _Instruction(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Instruction))]


def refuse_landlock() -> None:
    """From now on this process and its descendants get ENOSYS from every Landlock system call."""
    program = (_Instruction * 5)(
        _Instruction(_LD_W_ABS, 0, 0, 0),  # the system call's number (seccomp_data.nr)
        _Instruction(_JGE_K, 0, 2, _LANDLOCK_FIRST),  # below the first: allow
        _Instruction(_JGT_K, 1, 0, _LANDLOCK_LAST),  # above the last: allow
        _Instruction(_RET_K, 0, 0, _RET_ERRNO | _ENOSYS),
        _Instruction(_RET_K, 0, 0, _RET_ALLOW),
    )
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(_Program(5, program)), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")


if __name__ == "__main__":
    refuse_landlock()
    os.execvp(sys.argv[1], sys.argv[1:])
