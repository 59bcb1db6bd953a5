"""Which GPUs the children of one machine may use, which child gets which, and the check that the warm parent
never initialised CUDA.

The fork executor's parent imports torch once and forks every child from it; CUDA cannot be used in a child
forked from a process that initialised it, so the parent must only ever *list* devices, never touch them:
the list comes from the parent's `CUDA_VISIBLE_DEVICES` when set (which is also how tests fake a machine's
GPUs), else from `nvidia-smi` (a separate process), never from `torch.cuda.device_count()` (it may initialise
the CUDA runtime). Each child is handed its GPUs through its own `CUDA_VISIBLE_DEVICES`, and every child learns
the device the gates build their engines on from `DFLASH_DEVICE`. Knows nothing of jobs or pytest.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping

from verify.config.settings import ConfigError

__all__ = ["DeviceError", "DevicePool", "check_cuda_untouched", "child_environment", "visible_devices"]


class DeviceError(ConfigError):
    """`--device cuda` where no GPU is visible, or a warm parent that initialised CUDA (CLI exit code 2)."""


def visible_devices(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The GPUs this process may hand to children, as `CUDA_VISIBLE_DEVICES` entries (indices or UUIDs)."""
    environ = os.environ if environ is None else environ
    if "CUDA_VISIBLE_DEVICES" in environ:
        # CUDA stops at the first invalid entry ("-1" hides every device); so does this list.
        listed = []
        for entry in environ["CUDA_VISIBLE_DEVICES"].split(","):
            entry = entry.strip()
            if not entry or entry.startswith("-"):
                break
            listed.append(entry)
        return tuple(listed)
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return ()
    done = subprocess.run(
        [smi, "--query-gpu=index", "--format=csv,noheader"], capture_output=True, text=True, check=False, timeout=60
    )
    return tuple(line.strip() for line in done.stdout.splitlines() if line.strip()) if done.returncode == 0 else ()


def check_cuda_untouched() -> None:
    """Refuse a parent that initialised CUDA (a preload that moved a tensor to the GPU, say): every child forked
    from it would fail on its first CUDA call. `is_initialized` only reads torch's own flag."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        raise DeviceError(
            "CUDA was initialised in dflash's warm parent (by a module in [tool.dflash] preload, or one it imports), "
            "so no forked child could use the GPU: preload only modules that do not touch the device at import "
            "(import torch, but create no CUDA tensor), or drop the offending one from preload"
        )


class DevicePool:
    """Hands each starting child its own GPUs, round robin over the least used: with as many children as GPUs,
    each child has one to itself; with fewer children, each gets `len(devices) // num_jobs` of them."""

    def __init__(self, devices: tuple[str, ...], num_jobs: int) -> None:
        if not devices:
            raise DeviceError(
                "--device cuda, but no GPU is visible: CUDA_VISIBLE_DEVICES is empty or unset and nvidia-smi lists "
                "none (run on a machine with a GPU, or use --device cpu)"
            )
        per_child = max(1, len(devices) // max(1, num_jobs))
        self._groups = [devices[i : i + per_child] for i in range(0, len(devices) - per_child + 1, per_child)]
        self._users = [0] * len(self._groups)
        self._next = 0

    def acquire(self) -> int:
        """A group index for a starting child: the least used, the earliest after the last one handed out."""
        count = len(self._groups)
        order = [(self._next + k) % count for k in range(count)]
        index = min(order, key=lambda i: self._users[i])
        self._users[index] += 1
        self._next = (index + 1) % count
        return index

    def release(self, index: int) -> None:
        self._users[index] -= 1

    def devices(self, index: int) -> tuple[str, ...]:
        return self._groups[index]


def child_environment(device: str, gpus: tuple[str, ...] = ()) -> dict[str, str]:
    """What a child's environment must say: the gates' device, and on a GPU the devices it owns."""
    environment = {"DFLASH_DEVICE": device}
    if device == "cuda":
        environment["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
    return environment
