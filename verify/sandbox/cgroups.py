"""The kernel's own ceilings on a child: a control group per child, with its memory and task limits, as systemd
and container runtimes set them.

`probe` finds the layer this machine offers: cgroup v2 where this process's own cgroup is a writable subtree
with the memory and pids controllers delegated to it, else cgroup v1's memory hierarchy (with pids' where
mounted) where this process may make groups in its own, else none (the parent's polling is then the only watch,
`verify.run.execution.ceilings`, and the run names it). `DFLASH_CGROUPS=off` asks for none.

A `Groups` holds one folder per run (`dflash-<pid>-<token>`) under this process's own cgroup, and one group per
child in it (`Group`): `memory.max` (v1: `memory.limit_in_bytes`, and the same for memory plus swap where swap is
accounted) at the child's memory ceiling, so the kernel reclaims and then kills inside the group before the
machine loses more than that, and `pids.max` at `TASKS_PER_PROCESS` times its process ceiling (the kernel
counts threads as tasks; the process count itself stays the parent's, which counts processes). A child joins
its group before any of the project's code runs; what it starts is born in it. The kernel's word on what it
did is read back: a kill by the group's OOM killer (`memory.events` oom_kill, v1 `memory.oom_control`), a
fork it refused (`pids.events`). A group is removed once its child is reaped, whatever is left in it killed
first; a run's folder goes with the run, and a folder left by a run that was killed is removed by the next.

Knows nothing of jobs, pytest or verdicts: it is handed bytes, counts and pids.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["SWITCH", "TASKS_PER_PROCESS", "Group", "Groups", "Layer", "probe"]

SWITCH = "DFLASH_CGROUPS"  # "off": no cgroups, the parent's polling only
TASKS_PER_PROCESS = 4  # pids.max per process of the ceiling: a process may run a few threads
_PREFIX = "dflash-"
_REMOVE_S = 2.0  # a group's last processes, killed, leave it within this
_CLOSE_S = 30.0  # at the run's end, how long a group the kernel was slow to empty is waited for


@dataclass(frozen=True, slots=True)
class Layer:
    """Which layer enforces the ceilings. `version` 2 or 1: the kernel's cgroups, children's groups made in
    `memory` (and `pids`; in v2 the same folder); 0: none, the parent's polling only, `why` says why."""

    version: int = 0
    memory: Path | None = None
    pids: Path | None = None
    why: str = ""

    @property
    def active(self) -> bool:
        return self.version > 0

    def describe(self) -> str:
        """The string the reports carry: "cgroup v1: memory.limit_in_bytes, pids.max", or "polled: why"."""
        if not self.active:
            return f"polled: {self.why}"
        limit = "memory.max" if self.version == 2 else "memory.limit_in_bytes"
        return f"cgroup v{self.version}: {limit}" + (", pids.max" if self.pids is not None else ", processes polled")


def _mounts() -> list[tuple[str, str, str, str]]:
    """(mount point, root within its hierarchy, fs type, super options) of each cgroup mount."""
    found = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            head, _, tail = line.partition(" - ")
            fields, rest = head.split(), tail.split()
            if len(fields) >= 5 and len(rest) >= 3 and rest[0] in ("cgroup", "cgroup2"):
                found.append((fields[4], fields[3], rest[0], rest[2]))
    return found


def _own(mount: str, root: str, path: str) -> Path:
    """This process's cgroup folder, from its path in the hierarchy (/proc/self/cgroup) and the mount's root."""
    if root != "/" and (path == root or path.startswith(root + "/")):
        path = path[len(root) :]
    return Path(mount, path.lstrip("/"))


def _writable(folder: Path) -> bool:
    """Whether a group can be made (and removed) in `folder`."""
    probe_dir = folder / f"{_PREFIX}probe-{os.getpid()}"
    try:
        probe_dir.mkdir()
    except OSError:
        return False
    with contextlib.suppress(OSError):
        probe_dir.rmdir()
    return True


def _read(path: Path) -> str:
    with contextlib.suppress(OSError):
        return path.read_text()
    return ""


def probe(root: Path | None = None) -> Layer:
    """The layer this process's children get. `root` replaces the mounts found in /proc/self/mountinfo by one
    folder treated as this process's own v2 cgroup (tests point it at a folder it cannot use)."""
    if os.environ.get(SWITCH, "").lower() == "off":
        return Layer(why=f"{SWITCH}=off")
    if root is not None:
        return _v2(root)
    paths = {}  # controller (or "" for v2) -> this process's path in that hierarchy
    for line in _read(Path("/proc/self/cgroup")).splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            paths[name] = path
    mounts = _mounts()
    v2 = Layer(why="no cgroup v2 hierarchy")
    for mount, mount_root, kind, _ in mounts:
        if kind == "cgroup2" and "" in paths and (v2 := _v2(_own(mount, mount_root, paths[""]))).active:
            return v2
    v1 = {}
    for mount, mount_root, kind, options in mounts:
        for name in ("memory", "pids"):
            if kind == "cgroup" and name in options.split(",") and name in paths:
                v1[name] = _own(mount, mount_root, paths[name])
    if "memory" not in v1:
        return Layer(why=f"{v2.why}, and no cgroup v1 memory hierarchy")
    if not _writable(v1["memory"]):
        return Layer(why=f"{v2.why}, and cannot make a cgroup v1 group in {v1['memory']} (not root, none delegated)")
    pids = v1.get("pids")
    return Layer(1, v1["memory"], pids if pids is not None and _writable(pids) else None)


def _v2(own: Path) -> Layer:
    """v2 where `own` gives memory and pids to its children (a subtree delegated to this user with them enabled,
    or one this process may enable them in), else none and why."""
    if not {"memory", "pids"} <= set(_read(own / "cgroup.controllers").split()):
        return Layer(why=f"cgroup v2 at {own} has no memory and pids controllers to give")
    if not {"memory", "pids"} <= set(_read(own / "cgroup.subtree_control").split()):
        with contextlib.suppress(OSError):
            (own / "cgroup.subtree_control").write_text("+memory +pids")
        if not {"memory", "pids"} <= set(_read(own / "cgroup.subtree_control").split()):
            # v2 lets a group that holds processes (this one, at least) give no controller to its children.
            return Layer(why=f"cgroup v2 at {own} cannot give its children memory and pids (not delegated, or it "
                         "holds processes)")  # fmt: skip
    return Layer(2, own, own) if _writable(own) else Layer(why=f"cannot make a cgroup v2 group in {own}")


def _count(text: str, key: str) -> int:
    """The value of `key` in a flat keyed file (`memory.events`, `memory.oom_control`, `pids.events`)."""
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return 0


@dataclass
class Group:
    """One child's group: a folder per hierarchy (one in v2; memory's and pids' in v1)."""

    version: int
    memory: Path
    pids: Path | None
    memory_bytes: int = 0

    @property
    def folders(self) -> list[Path]:
        return [self.memory, *([self.pids] if self.pids is not None and self.pids != self.memory else [])]

    def join(self, pid: int = 0) -> None:
        """Move `pid` (0: this process) into the group; what it starts from then on is born in it."""
        for folder in self.folders:
            (folder / "cgroup.procs").write_text(str(pid or os.getpid()))

    def leave(self, pid: int) -> None:
        """Move `pid` back to the cgroup the group was made in (a warm worker, once its job's child is born there)."""
        for folder in self.folders:
            with contextlib.suppress(OSError):
                (folder.parent.parent / "cgroup.procs").write_text(str(pid))

    def oom_kills(self) -> int:
        """Processes of the group the kernel killed at its memory limit."""
        if self.version == 2:
            return _count(_read(self.memory / "memory.events"), "oom_kill")
        return _count(_read(self.memory / "memory.oom_control"), "oom_kill")

    def refused_tasks(self) -> int:
        """Forks and threads the kernel refused at the group's pids.max."""
        return _count(_read(self.pids / "pids.events"), "max") if self.pids is not None else 0

    def peak_bytes(self) -> int:
        """The most memory the group held (v2 kernels before 5.19 keep no peak: 0)."""
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        text = _read(self.memory / name).strip()
        return int(text) if text.isdigit() else 0

    def _pids(self) -> set[int]:
        return {int(p) for folder in self.folders for p in _read(folder / "cgroup.procs").split() if p.isdigit()}

    def remove(self, within_s: float = _REMOVE_S) -> bool:
        """Kill what is left in the group, then remove it; False if it could not be removed in time."""
        deadline = time.monotonic() + within_s
        while True:
            for pid in self._pids():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            for folder in self.folders:
                with contextlib.suppress(FileNotFoundError, OSError):
                    folder.rmdir()
            if not any(folder.exists() for folder in self.folders) or time.monotonic() > deadline:
                return not any(folder.exists() for folder in self.folders)
            time.sleep(0.01)


@dataclass
class Groups:
    """A run's groups: one folder per hierarchy under this process's own cgroup, a group per child in it."""

    layer: Layer
    made: dict[str, Group] = field(default_factory=dict)
    stuck: list[Group] = field(default_factory=list)  # released, but not yet empty enough to remove
    _count: int = 0
    # The run's folder: this process's pid (what a later run checks before it removes a folder left behind) and a
    # token, so runs in other pid namespaces that share a hierarchy (the pids root) never share a folder.
    name: str = field(default_factory=lambda: f"{_PREFIX}{os.getpid()}-{secrets.token_hex(4)}")

    def __post_init__(self) -> None:
        if self.layer.active:
            self._sweep()
            try:
                for folder in self._folders():
                    folder.mkdir()
                    if self.layer.version == 2:  # its children get the controllers it was given
                        (folder / "cgroup.subtree_control").write_text("+memory +pids")
            except OSError as error:
                self.layer = Layer(why=f"cannot make the run's cgroup: {error.strerror or error}")

    def _folders(self) -> list[Path]:
        return [root / self.name for root in self._roots()]

    def _roots(self) -> list[Path]:
        """This process's own cgroup in each hierarchy the layer uses (one in v2)."""
        roots = [self.layer.memory, self.layer.pids]
        return [root for k, root in enumerate(roots) if root is not None and root not in roots[:k]]

    def _sweep(self) -> None:
        """Remove the empty folders of runs whose process is gone (a run that was SIGKILLed)."""
        for root in self._roots():
            with contextlib.suppress(OSError):
                for folder in root.glob(f"{_PREFIX}*"):
                    owner = folder.name.removeprefix(_PREFIX).partition("-")[0]
                    if not owner.isdigit() or Path(f"/proc/{owner}").exists():
                        continue
                    for group in [*(g for g in folder.iterdir() if g.is_dir()), folder]:
                        with contextlib.suppress(OSError):
                            group.rmdir()

    def make(self, memory_bytes: int, processes: int) -> Group | None:
        """A group for a child with these ceilings (0: none), or None where the kernel's layer is missing or
        refused to make it (the parent's polling still watches that child)."""
        if not self.layer.active or not (memory_bytes or processes):
            return None
        self._count += 1
        folders = self._folders()
        memory = folders[0] / str(self._count)
        pids = (folders[-1] / str(self._count)) if self.layer.pids is not None else None
        group = Group(self.layer.version, memory, pids, memory_bytes)
        try:
            for folder in group.folders:
                folder.mkdir()
            if memory_bytes:
                self._limit_memory(group, memory_bytes)
            if processes and pids is not None:
                (pids / "pids.max").write_text(str(processes * TASKS_PER_PROCESS))
        except OSError:
            group.remove()
            return None
        self.made[str(memory)] = group
        return group

    def _limit_memory(self, group: Group, memory_bytes: int) -> None:
        if group.version == 2:
            (group.memory / "memory.max").write_text(str(memory_bytes))
            with contextlib.suppress(OSError):  # no swap accounting: nothing to bound
                (group.memory / "memory.swap.max").write_text("0")
            return
        (group.memory / "memory.limit_in_bytes").write_text(str(memory_bytes))
        with contextlib.suppress(OSError):  # memory plus swap, where swap is accounted: no way round by swapping
            (group.memory / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))

    def release(self, group: Group | None) -> None:
        """The group's child was reaped: the group goes, whatever is left in it killed. One the kernel is slow to
        empty (a killed hog's pages still being freed on a loaded machine) is tried again at `close`, so the run
        never waits long on it here."""
        if group is not None and self.made.pop(str(group.memory), None) is not None and not group.remove():
            self.stuck.append(group)

    def close(self) -> None:
        for group in list(self.made.values()):
            self.release(group)
        for group in self.stuck:  # the run is over: worth waiting for the kernel, so no folder outlives it
            group.remove(_CLOSE_S)
        self.stuck.clear()
        if self.layer.active:
            for folder in self._folders():
                with contextlib.suppress(OSError):
                    folder.rmdir()
