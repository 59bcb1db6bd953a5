"""What every child of the harness gets before any of the project's code runs, however it was started (a forked
gate child here or on a Ray node, an observation child): a clean environment, no terminal input, the kernel's
first pick when memory runs out, and ceilings on memory and file size.

- Environment: the harness's own variables minus a denylist (`is_secret`): everything Ray sets (`RAY_*`, the
  cluster's auth token with it: a child holding it could submit unconfined tasks to the run's own cluster),
  and every name that carries a credential by convention (tokens, secrets, passwords, keys, cloud and CI
  credentials, the ssh and gpg agents' sockets), and any value holding a URL with a password in it. A
  denylist, not an allowlist: gates read their own settings from the environment (a data folder, a seed, a
  device), and an allowlist would silently drop them.
- The environment the kernel shows (`/proc/self/environ`: the block the process was exec'd with, which a fork
  inherits whatever Python's `os.environ` says) has every denylisted entry overwritten with NUL bytes in place
  (`scrub_environ_block`), so a child cannot read a secret there even where its parent was started with one.
  Its memory may still hold what its parent held; `verify.sandbox.secrets` keeps the CLI's parent clean.
- stdin is /dev/null: a gate that reads the terminal gets end of file, never the user's keystrokes.
- `oom_score_adj` 1000 (an unprivileged process may always raise its own): when the machine runs out of
  memory the kernel kills a child, never the harness above it.
- RLIMIT_DATA (private writable memory: the heap, anonymous mappings, thread stacks) and RLIMIT_FSIZE (the
  largest file it may write), per process and inherited by everything it starts. RLIMIT_DATA is a backstop,
  set to what the child was forked with plus its whole memory ceiling: the ceiling itself is the resident
  memory of the child's whole tree, which its parent polls (`verify.run.execution.fork`), because address space a
  process reserves and never touches (glibc's and torch's arenas, RLIMIT_AS's whole problem; thread stacks,
  which RLIMIT_DATA counts: 64 threads reserve 512 MiB) is not memory the machine lacks. Past RLIMIT_DATA the
  child sees MemoryError; past RLIMIT_FSIZE, EFBIG (SIGXFSZ is ignored so a write fails instead of killing the
  child with no word). The process count is watched by the parent too: RLIMIT_NPROC counts every process of
  the user, the harness's and other programs' included.

Knows nothing of jobs, pytest or verdicts.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import resource
import signal
import sys
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

__all__ = ["Ceilings", "SECRET_DOC", "clean_environment", "die_with_parent", "enter", "harden", "is_secret", "leave",
           "memory_bytes", "scrub_environ_block", "vm_data_bytes"]  # fmt: skip

# Names matched whole (case-insensitive) against each variable name; see the module docstring for why each.
_SECRET_NAMES = re.compile(
    r"^(RAY_.*|AWS_.*|AZURE_.*|GOOGLE_APPLICATION_CREDENTIALS|GCLOUD_.*|CLOUDSDK_.*|ACTIONS_(RUNTIME|ID_TOKEN)_.*"
    r"|CI_JOB_JWT.*|SSH_AUTH_SOCK|SSH_AGENT_PID|GPG_AGENT_INFO|KUBECONFIG|NETRC|PGPASS.*|DOCKER_AUTH_CONFIG"
    r"|.*(TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|API_?KEY|ACCESS_KEY|PRIVATE_KEY).*|(.*_)?AUTH(_.*)?)$",
    re.IGNORECASE,
)
_PASSWORD_URL = re.compile(r"[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@", re.IGNORECASE)

SECRET_DOC = (
    "RAY_*, AWS_*, AZURE_*, GCLOUD_*, CLOUDSDK_*, GOOGLE_APPLICATION_CREDENTIALS, GitHub Actions' and GitLab's "
    "job tokens, SSH_AUTH_SOCK, SSH_AGENT_PID, GPG_AGENT_INFO, KUBECONFIG, NETRC, PGPASS*, DOCKER_AUTH_CONFIG, any "
    "name containing TOKEN, SECRET, PASSWORD, PASSWD, CREDENTIAL, API_KEY, APIKEY, ACCESS_KEY or PRIVATE_KEY, "
    "any name with AUTH as a word of it (RAY_AUTH_TOKEN, AUTH_HEADER), and any variable whose value is a URL "
    "with a password in it"
)
_OOM_SCORE_ADJ = 1000  # the most the kernel allows: this process is its first choice


def is_secret(name: str, value: str) -> bool:
    """A variable no child may see: Ray's, or a credential by its name or its value."""
    return bool(_SECRET_NAMES.match(name) or _PASSWORD_URL.search(value))


def clean_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` less every variable `is_secret` names."""
    return {name: value for name, value in environ.items() if not is_secret(name, value)}


@dataclass(frozen=True, slots=True)
class Ceilings:
    """What one child may take; 0 means no ceiling. `memory_bytes`: the resident memory of its whole tree
    (watched by the parent; here, each process's RLIMIT_DATA backstop is what it was forked with plus that);
    `file_bytes`: the largest file; `processes`: its tree's size (watched by the parent, not here);
    `output_bytes`: what it writes to its streams over its job (`verify.run.child.streams`, and the parent)."""

    memory_bytes: int = 0
    file_bytes: int = 0
    processes: int = 0
    output_bytes: int = 0

    def __post_init__(self) -> None:
        for name in ("memory_bytes", "file_bytes", "processes", "output_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"ceiling {name} must be an integer >= 0, got {value!r}")


def memory_bytes() -> int:
    """This machine's memory (MemTotal), 0 when unknown."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return 0


def vm_data_bytes(pid: int | str = "self") -> int:
    """The private writable memory a process holds (`VmData`: what RLIMIT_DATA counts), 0 when unknown."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    return 0


def die_with_parent(parent: int) -> None:
    """The kernel SIGKILLs this child when the parent dies, however it dies (a SIGKILLed parent, a Ray worker
    killed with its task): a child in its own process group would otherwise run on, orphaned."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG (Linux)
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(70)


def scrub_environ_block() -> int:
    """Overwrite, in this process's memory, every denylisted entry of the environment block it was exec'd with
    (what `/proc/self/environ` reads) with NUL bytes, in place: the other entries keep their addresses (a library
    may hold a pointer into one). Returns the entries scrubbed; 0 where the block cannot be found."""
    try:
        fields = Path("/proc/self/stat").read_text().rpartition(")")[2].split()
        start, end = int(fields[47]), int(fields[48])  # env_start and env_end: the 50th and 51st fields
    except (OSError, ValueError, IndexError):
        return 0
    if not 0 < start < end:
        return 0
    block = ctypes.string_at(start, end - start)
    scrubbed, offset = 0, 0
    for entry in block.split(b"\0"):
        name, _, value = entry.partition(b"=")
        if entry and is_secret(name.decode(errors="replace"), value.decode(errors="replace")):
            ctypes.memset(start + offset, 0, len(entry))
            scrubbed += 1
        offset += len(entry) + 1
    return scrubbed


def harden(environment: Mapping[str, str], ceilings: Ceilings) -> None:
    """In a fresh child, before the project's code: the environment becomes `environment` cleaned (on top of
    the inherited one, cleaned) and the kernel's copy is scrubbed, stdin /dev/null, oom_score_adj raised, the
    ceilings set."""
    cleaned = clean_environment({**os.environ, **environment})
    os.environ.clear()
    os.environ.update(cleaned)
    scrub_environ_block()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    with contextlib.suppress(OSError, ValueError):
        sys.stdin = open(0, errors="replace", closefd=False)  # noqa: SIM115  (the fd lives as long as the child)
    with contextlib.suppress(OSError):
        Path("/proc/self/oom_score_adj").write_text(str(_OOM_SCORE_ADJ))
    # No backstop on a GPU: the CUDA driver's own mappings under RLIMIT_DATA were never measured (the parent's
    # watch of the memory the tree holds still applies).
    if ceilings.memory_bytes and cleaned.get("DFLASH_DEVICE") != "cuda":
        limit = vm_data_bytes() + ceilings.memory_bytes
        with contextlib.suppress(OSError, ValueError):
            resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    if ceilings.file_bytes:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the ceiling fails with EFBIG, named
        with contextlib.suppress(OSError, ValueError):
            resource.setrlimit(resource.RLIMIT_FSIZE, (ceilings.file_bytes, ceilings.file_bytes))


def enter(parent: int, environment: Mapping[str, str], ceilings: Ceilings, log: Path) -> None:
    """A forked child's first acts: its own process group, death with `parent`, `harden`, and both streams on
    `log`, where its parent reads its last words."""
    os.setpgid(0, 0)
    die_with_parent(parent)
    harden(environment, ceilings)
    log_fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    # The parent's sys.stdout may be an in-process capture (a CliRunner, pytest's): pytest's own words (a usage
    # error) must reach the log the parent reads, so both streams write to the fds.
    sys.stdout = open(1, "w", buffering=1, errors="replace", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, errors="replace", closefd=False)  # noqa: SIM115


def leave(body: Callable[[], int], failed: int = 70) -> NoReturn:
    """A forked child's life and end: `body`'s exit code, or `failed` with its traceback on stderr (the log its
    parent reads) if it raised; both streams flushed, then `os._exit`, never another line of the parent's code."""
    exit_code = failed
    try:
        exit_code = body()
    except BaseException:
        with contextlib.suppress(BaseException):
            os.write(2, traceback.format_exc().encode())
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(exit_code)
