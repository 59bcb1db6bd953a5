"""Namespaces of one child, where the kernel allows them: what a child cannot see, as Landlock is what it cannot
write. Modelled on Bazel's linux-sandbox and nsjail, driven through unshare(2) and mount(2) with ctypes.

Each layer, and what it takes from a child:

- `user`: a user namespace of its own, its uid and gid mapped to themselves. It is what lets an unprivileged
  process take the others; a child in it holds no capability outside it (root's CAP_SYS_PTRACE, CAP_KILL and
  CAP_DAC_OVERRIDE on the machine included), and the job drops the ones it holds inside before any gate.
- `pid`: a PID namespace with its own /proc: no process of the run, nor the one that started it, nor any other
  on the machine, is visible, so no other process's environment, memory or descriptors can be read. Taken only
  with `mount` (a PID namespace that kept the machine's /proc would see, and its reaper would signal, every
  process of the user).
- `mount`: a mount namespace with one private tmpfs, its size the child's memory ceiling, mounted on its
  `TMPDIR` and on /dev/shm: what a child writes there is counted in its memory (`private_bytes`, `spent`) and
  gone with it. The mounts propagate nowhere (the root is made private first).
- `ipc`: System V shared memory, semaphores and message queues of its own, freed with it.
- `net`: a network namespace with only a loopback device, up: nothing outside the child answers, the harness's
  and the machine's listeners and abstract unix sockets included.

`unshare(CLONE_NEWPID)` moves the caller's children, not the caller, and PID 1 of a namespace ignores signals
it has no handler for (a mutant's `os.kill(os.getpid(), SIGKILL)` or `abort()` would not end it). So `enter`
splits the child in three: the process the executor forked (or was handed by a warm worker) stays outside and
waits, then ends exactly as the job did (the same exit code or signal), so its parent reaps, times and kills it
by pid as before; its child is PID 1 inside, reaps what comes to it and reports the job's status; the job is
PID 2 and returns from `enter` to run the gates. The executor's watch over the tree skips the first two
(`HELPERS`). When PID 1 ends, the kernel kills whatever is left in the namespace.

`probe` tries every layer once in a throwaway process (cached, by the switch's value) and says which the kernel
refused and why; a child takes only the layers the probe found, and a step that fails there raises
`NamespaceError` (the child runs no gate, as when Landlock is refused). `DFLASH_NAMESPACES=off` turns them off.
Where `mount` is missing, `SharedMemory` removes what a child left in /dev/shm. Knows nothing of jobs or pytest.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import platform
import select
import shutil
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from verify.sandbox import layers, reaper, scratch

__all__ = ["HELPERS", "LAYERS", "SWITCH", "NamespaceError", "Namespaces", "enter", "entered", "helpers",
           "private_bytes", "probe", "spent"]  # fmt: skip

SWITCH = "DFLASH_NAMESPACES"  # "off": no namespaces (the fallbacks' tests use it)
LAYERS = ("user", "pid", "mount", "ipc", "net")
HELPERS = 2  # the waiter outside and PID 1 inside, above the job in its tree, when `pid` is taken

_PR_SET_PDEATHSIG = 1
_FLAGS = (("mount", layers.CLONE_NEWNS), ("ipc", layers.CLONE_NEWIPC), ("net", layers.CLONE_NEWNET),
          ("pid", layers.CLONE_NEWPID))  # fmt: skip
_SPENT = "private-memory"  # what the waiter found in the tmpfs when the job ended, for the executor


class NamespaceError(Exception):
    """The probe found a layer and this child could not take it: the child must not run without it."""


@dataclass(frozen=True, slots=True)
class Namespaces:
    """The layers this machine gives a child (`LAYERS`), and (layer, why) for each it refused."""

    layers: tuple[str, ...] = ()
    refused: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if unknown := [layer for layer in self.layers if layer not in LAYERS]:
            raise ValueError(f"unknown namespace layers {unknown}; known: {', '.join(LAYERS)}")

    def has(self, layer: str) -> bool:
        return layer in self.layers

    @property
    def full(self) -> bool:
        return set(self.layers) == set(LAYERS)

    def describe(self) -> str:
        """ "namespaces user, pid, mount, ipc, net", or which are on and why each other one is not."""
        text = "namespaces " + (", ".join(self.layers) if self.layers else "off")
        return text + "".join(f"; {layer} refused: {why}" for layer, why in self.refused)


def _wait_outside(init: int, said: int, base: Path, private: bool) -> NoReturn:
    """The waiter, outside the job's PID namespace: PID 1's report of the job's status once it ends, the memory
    the private tmpfs still held then (`private`: there is one; for `spent`), then this process ends as the job
    did."""
    _, own = os.waitpid(init, 0)
    with os.fdopen(said, "rb") as pipe:
        report = pipe.read().decode(errors="replace").strip()
    with contextlib.suppress(OSError):
        (base / _SPENT).unlink(missing_ok=True)  # written by the job, if at all: only ours counts
        if private:
            stat = os.statvfs("/dev/shm")
            (base / _SPENT).write_text(str((stat.f_blocks - stat.f_bfree) * stat.f_frsize))
    layers.end_as(int(report) if report.lstrip("-").isdigit() else own)


def _split(base: Path, private: bool) -> None:
    """The three processes (see the module docstring); returns in the job only."""
    said, say = os.pipe()
    alive, living = os.pipe()  # its write end dies with the waiter: PID 1 checks it before it serves
    init = os.fork()
    if init:
        layers.close_all_but({said, living})
        _wait_outside(init, said, base, private)
    os.close(said)
    os.close(living)
    layers.libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if select.select([alive], [], [], 0)[0]:  # the waiter died before the request took effect
        os._exit(70)
    os.close(alive)
    job = os.fork()
    if job:  # PID 1: everything orphaned in the namespace comes here; it ends when the job does
        layers.close_all_but({say})
        while True:
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                os._exit(70)  # the job gone unseen: the waiter ends as PID 1 did
            if pid == job:
                os.write(say, str(status).encode())
                os._exit(0)
    os.close(say)


def enter(base: Path, tmp: Path, memory_bytes: int, found: Namespaces | None = None) -> Namespaces:
    """In a freshly forked, single-threaded child, right before Landlock: take every layer `found` (the probe's
    answer by default) names. `base` is the child's own folder, `tmp` its TMPDIR (made here), `memory_bytes` its
    memory ceiling (the tmpfs's size; 0: none). Returns what it took; raises NamespaceError if a step fails."""
    found = probe() if found is None else found
    if not found.layers:
        return found
    subreaper = reaper.is_subreaper()
    try:
        if found.has("user"):
            layers.own_user_namespace()
        flags = sum(flag for layer, flag in _FLAGS if found.has(layer))
        layers.unshare(flags, ", ".join(layer for layer in found.layers if layer != "user"))
        if found.has("mount"):
            layers.make_root_private()  # nothing mounted here reaches the machine's namespace
        if found.has("net"):
            layers.loopback_up()
        if found.has("pid"):
            _split(base, found.has("mount"))
            layers.mount_proc()
        if found.has("mount"):
            layers.private_memory(base, tmp, memory_bytes)
        if found.has("user") or found.has("pid") or found.has("mount"):
            layers.drop_capabilities()  # its own /proc and tmpfs stay over the machine's: it can unmount neither
    except OSError as error:
        raise NamespaceError(str(error)) from error
    if subreaper:
        reaper.become_subreaper()  # not inherited across fork: the job ends what it starts, as before
    return found


def _private_mounts(stage: Path) -> None:
    layers.unshare(layers.CLONE_NEWNS, "mount")
    layers.make_root_private()
    layers.private_memory(stage, stage / "tmp", 1 << 20)


def _network() -> None:
    layers.unshare(layers.CLONE_NEWNET, "net")
    layers.loopback_up()


def _own_proc() -> None:
    """A PID namespace, and its /proc mounted by its first process (a container's masked /proc refuses it)."""
    layers.unshare(layers.CLONE_NEWPID, "pid")
    child = os.fork()
    if child == 0:
        code = 1
        try:
            layers.mount_proc()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    if status != 0:
        raise OSError(errno.EPERM, "its own /proc could not be mounted (a container's masked /proc?)")


def entered(base: Path, tmp: Path, memory_bytes: int) -> bool:
    """`enter` with the probe's layers, in a forked child; False, having said why on stderr (the log its parent
    reads), when a step failed: the child must then run no gate."""
    try:
        enter(base, tmp, memory_bytes)
    except NamespaceError as error:
        os.write(2, f"not confined, so no gate ran: {error}\n".encode())
        return False
    return True


def helpers() -> int:
    """The processes above a job in its tree (the waiter, PID 1) where children get a PID namespace, else 0."""
    return HELPERS if probe().has("pid") else 0


def _try_layers(report: int, stage: Path) -> None:
    """The probe's body, in a throwaway child: each layer in turn, the answer as JSON on `report`."""
    found: list[str] = []
    refused: list[tuple[str, str]] = []

    def attempt(layer: str, step: Callable[[], None]) -> None:
        try:
            step()
        except OSError as error:
            refused.append((layer, str(error)))
            return
        found.append(layer)

    attempt("user", layers.own_user_namespace)
    attempt("mount", lambda: _private_mounts(stage))
    attempt("ipc", lambda: layers.unshare(layers.CLONE_NEWIPC, "ipc"))
    attempt("net", _network)
    if "mount" in found:
        attempt("pid", _own_proc)
    else:
        refused.append(("pid", "a PID namespace is taken only with its own /proc, which needs the mount namespace"))
    order = [layer for layer in LAYERS if layer in found]
    os.write(report, json.dumps({"layers": order, "refused": refused}).encode())


@functools.cache
def _probe(switch: str) -> Namespaces:
    if switch.lower() == "off":
        return Namespaces((), (("all", f"{SWITCH}=off"),))
    if platform.system() != "Linux":
        return Namespaces((), (("all", f"no namespaces on {platform.system()}"),))
    read, write = os.pipe()
    stage = scratch.make("dflash-probe-")  # mounted on in the probe's namespace only
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            os.close(read)
            _try_layers(write, stage)
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        answer = pipe.read()
    os.waitpid(pid, 0)
    shutil.rmtree(stage, ignore_errors=True)
    try:
        data = json.loads(answer)
        return Namespaces(tuple(data["layers"]), tuple((str(k), str(v)) for k, v in data["refused"]))
    except (ValueError, KeyError, TypeError):
        return Namespaces((), (("all", "the probe died before it answered"),))


def probe() -> Namespaces:
    """The layers this kernel gives a child, tried once per value of the switch in a throwaway child (call it
    before forking children, so they inherit the answer)."""
    return _probe(os.environ.get(SWITCH, ""))


def private_bytes(pid: int) -> int:
    """What the private tmpfs of the child `pid` (the waiter, outside its namespaces) holds now; 0 when it has
    none (its /dev/shm is the machine's) or is gone."""
    with contextlib.suppress(OSError):
        theirs = f"/proc/{pid}/root/dev/shm"
        if os.stat(theirs).st_dev != os.stat("/dev/shm").st_dev:
            stat = os.statvfs(theirs)
            return (stat.f_blocks - stat.f_bfree) * stat.f_frsize
    return 0


def spent(base: Path) -> int:
    """What the private tmpfs of the child whose folder is `base` held when its job ended (the waiter's note),
    0 when it had none."""
    with contextlib.suppress(OSError, ValueError):
        return int((base / _SPENT).read_text())
    return 0
