"""A child's ceilings and the parent's watch over them: what memory, processes, file size and output a child may
take (scaled from the unmutated children, like its time), whether a running child is past one, and the load the
machine is under less what the child itself makes (so the child's own load cannot stretch its budget), and its
share of the cores (torch's threads: `threads_per_child`).

The child sets its own rlimits (`verify.sandbox.hardening`); the parent, which forked it, polls what only it
can see from outside: the size of the child's process tree, the memory the tree holds and what it wrote to its
streams (`verify.run.child.streams`). A breach is named by an exception type the verdict model reads as a crash
kind (`verify.report.crashes`). Knows nothing of pytest, jobs' results or verdicts.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Sequence
from pathlib import Path

from verify.config.settings import ProjectConfig
from verify.run.child.streams import OUTPUT_EXIT
from verify.sandbox import cgroups, hardening, namespaces, reaper

__all__ = ["check", "died_at", "for_child", "harness_job", "kernel", "load_scale", "output", "threads_per_child"]

_MEMORY_NEAR = 0.9  # a child that died with its peak this close to its memory ceiling died of it
NONE = ("", "")  # (exc_type, why): no breach


def harness_job(key: str) -> bool:
    """The harness's own job (baseline, self-check, flake check: keys "_..."), not a mutant's."""
    return key.startswith("_")


def for_child(config: ProjectConfig, key: str, sharing: tuple[int, int], pristine_peak: int) -> hardening.Ceilings:
    """The ceilings of the child for job `key`. Memory: at most the machine's share per child (`sharing`: the
    children this run holds at once, and the slots of the machine when more); a mutant's `max(memory_min_mb,
    memory_factor x the largest peak of the harness's own children)` once one was measured, else the share."""
    memory = 0
    if config.memory_factor:
        memory = hardening.memory_bytes() // max(1, *sharing)
        if not harness_job(key) and pristine_peak:
            wanted = max(config.memory_min_mb << 20, int(config.memory_factor * pristine_peak))
            memory = min(memory, wanted) if memory else wanted
    return hardening.Ceilings(memory, config.file_max_mb << 20, config.processes_max, config.output_max_mb << 20)


def check(
    pid: int, processes: list[int], ceilings: hardening.Ceilings, seldom: bool, streams: Sequence[Path] = (),
    group: cgroups.Group | None = None,
) -> tuple[str, str]:  # fmt: skip
    """(exc_type, why) when the child `pid`, whose tree is `processes`, whose streams are the files `streams` and
    whose cgroup is `group`, is past a ceiling (its tree is then ended), else NONE. A lone child's memory is read
    every time; a tree's (its processes' proportional sets, costlier) only when `seldom`."""
    breach = kernel(group, ceilings)
    if not breach[0]:
        breach = output(streams, ceilings)  # the cheapest to read
    if not breach[0] and ceilings.processes and len(processes) > ceilings.processes:
        breach = ("ProcessCeiling", f"{len(processes)} processes, past its ceiling of {ceilings.processes} "
                  "([tool.dflash] processes_max)")  # fmt: skip
    elif not breach[0] and ceilings.memory_bytes and group is None and (len(processes) == 1 or seldom):
        # Polled only where no cgroup holds it: the kernel's limit is exact, and counts only what the tree took
        # since its fork (the pages it shares with its parent are the parent's), where a poll races it.
        # Its private /dev/shm and TMPDIR are memory too (`verify.sandbox.namespaces`), held by no process
        # (in a cgroup the kernel charges them to it).
        resident = reaper.resident_bytes(processes) + namespaces.private_bytes(pid)
        if resident > ceilings.memory_bytes:
            breach = ("MemoryCeiling", f"{resident >> 20} MiB resident, past its ceiling of "
                      f"{ceilings.memory_bytes >> 20} MiB ([tool.dflash] memory_factor)")  # fmt: skip
    if breach[0]:
        reaper.end_tree(pid)
    return breach


def kernel(group: cgroups.Group | None, ceilings: hardening.Ceilings) -> tuple[str, str]:
    """(exc_type, why) when the kernel stopped something of the child's cgroup `group` at a ceiling: killed a
    process at its memory limit, or refused a fork or a thread at its task limit; else NONE."""
    if group is None:
        return NONE
    if group.oom_kills():
        return ("MemoryCeiling", f"killed by the kernel at its memory ceiling of {group.memory_bytes >> 20} MiB "
                f"(cgroup v{group.version}; [tool.dflash] memory_factor)")  # fmt: skip
    if refused := group.refused_tasks():
        return ("ProcessCeiling", f"the kernel refused {refused} new processes or threads past its ceiling of "
                f"{ceilings.processes * cgroups.TASKS_PER_PROCESS} tasks (cgroup pids.max; [tool.dflash] "
                "processes_max)")  # fmt: skip
    return NONE


def output(streams: Sequence[Path], ceilings: hardening.Ceilings, exit_code: int | None = None) -> tuple[str, str]:
    """(exc_type, why) when a child's streams (its log and capture files) hold more than its output ceiling, or it
    ended itself at the ceiling (`exit_code` `OUTPUT_EXIT`: pytest had read some of them back), else NONE."""
    if not ceilings.output_bytes:
        return NONE
    written = 0
    for path in streams:
        with contextlib.suppress(OSError):
            written += path.stat().st_size
    where = f"its output ceiling of {ceilings.output_bytes >> 20} MiB ([tool.dflash] output_max_mb)"
    if written > ceilings.output_bytes:
        return ("OutputCeiling", f"{written >> 20} MiB written to its stdout and stderr, past {where}")
    if exit_code == OUTPUT_EXIT:
        return ("OutputCeiling", f"wrote more to its stdout and stderr over its job than {where}")
    return NONE


def died_at(peak: int, ceilings: hardening.Ceilings, exit_code: int) -> tuple[str, str]:
    """A child that died (a signal, an abort in C code that could not allocate) with its peak resident memory
    at its memory ceiling died of it; else NONE."""
    memory = ceilings.memory_bytes
    if memory and peak >= _MEMORY_NEAR * memory:
        how = f"killed by {signal.Signals(-exit_code).name}" if exit_code < 0 else f"exited with code {exit_code}"
        return ("MemoryCeiling", f"died ({how}) at its memory ceiling of {memory >> 20} MiB")
    return NONE


def load_scale(own: int = 0) -> float:
    """How much slower than idle a CPU-bound child runs now: runnable tasks per core, at least 1.

    The 4th field of /proc/loadavg counts tasks runnable right now (not a 1-minute average, which lags a
    load that starts with the run). It includes the sampling process itself, hence the minus one. `own` is
    what the job being timed has runnable now: counted as one, whatever it is (a fork bomb's load must not
    stretch its own budget).
    """
    try:
        running = int(Path("/proc/loadavg").read_text().split()[3].partition("/")[0]) - 1
    except (OSError, ValueError, IndexError):
        running = int(os.getloadavg()[0])
    if own:
        running = max(0, running - own) + 1
    return max(1.0, running / (os.cpu_count() or 1))


def threads_per_child(children: int) -> int:
    """torch's threads for each of `children` run at once: an equal share of the cores this process may use,
    never more than OMP_NUM_THREADS where the user set it (plain pytest would run with that many), at least one."""
    cores = len(os.sched_getaffinity(0))
    share = max(1, cores // max(1, children))
    with contextlib.suppress(ValueError):
        share = min(share, int(os.environ.get("OMP_NUM_THREADS", "") or share))
    return max(1, share)
