"""What runs inside a Ray worker: one job, handed to this worker's warm node server, its result returned as data.

A worker keeps its server (and so the warm imports) across the tasks it runs for the same tree and config;
a new tree or a dead server starts a fresh one. The tree is unpacked from the driver's archive the first
time a node needs it (`verify.run.execution.cluster.tree`): the archive's object reference is passed inside a list, so
Ray fetches it only when this node does not hold the tree yet. A job's task yields twice: first the moment it
starts on its node (the driver counts a task late only from then, never while it waits for a slot), then the
result. The same module answers the preflight probe with what this node has installed and the confinement
it gives a child. Imported by Ray on every worker; knows nothing of verdicts.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

import ray

from verify.config.settings import ProjectConfig
from verify.run.execution.cluster.server import NodeServer
from verify.run.execution.cluster.tree import touch, unpacked
from verify.run.execution.jobs import Job, JobResult
from verify.sandbox.confine import probe as landlock

__all__ = ["node_facts", "run_job"]

# (tree digest, config, confined, the GPUs Ray gave this task) -> this worker's server; one at a time (a worker
# runs one task at once). A worker reused for a task on other GPUs starts a fresh server: its children must see
# those.
_SERVERS: dict[tuple[str, ProjectConfig, bool, str], NodeServer] = {}


def _server(digest: str, archive: list[Any], config: ProjectConfig, confine: bool) -> NodeServer:
    key = (digest, config, confine, os.environ.get("CUDA_VISIBLE_DEVICES", ""))
    server = _SERVERS.get(key)
    if server is not None and server.alive:
        touch(digest)  # a tree in use is never idle: a sibling's prune keeps it
        return server
    for old in _SERVERS.values():
        old.close()
    _SERVERS.clear()
    tree = unpacked(digest, None) or unpacked(digest, ray.get(archive[0]))
    assert tree is not None
    _SERVERS[key] = server = NodeServer(config, tree, confine)
    return server


# max_calls=0: a worker is reused across tasks, GPU tasks included (Ray's default for those is a fresh worker each
# time, to free the GPU memory it holds; here only the child, which ends, ever touches the GPU).
@ray.remote(max_calls=0)
def run_job(
    digest: str, archive: list[Any], config: ProjectConfig, job: Job, confine: bool
) -> Iterator[float | JobResult]:
    yield time.time()  # started: from here on the driver's backstop counts
    yield _server(digest, archive, config, confine).run(job)


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def installed(distributions: tuple[str, ...], modules: tuple[str, ...]) -> dict[str, str]:
    """What this process has: Python, each distribution's version, whether each module imports, the harness
    code's digest (the same version number can hide a different checkout)."""
    from verify.run.harness_digest import harness_digest

    found = {"python": f"{sys.version_info.major}.{sys.version_info.minor}", "harness": harness_digest()}
    found.update({f"package {name}": _version(name) for name in distributions})
    for name in modules:
        try:
            importlib.import_module(name)
            found[f"module {name}"] = "imports"
        except Exception as error:  # any failure to import is what the driver must report
            found[f"module {name}"] = f"fails to import ({type(error).__name__}: {error})"[:160]
    return found


@ray.remote(num_cpus=0)
def node_facts(distributions: tuple[str, ...], modules: tuple[str, ...]) -> tuple[dict[str, str], int, str]:
    """(what `installed` says, the Landlock ABI a child here gets (0: none), why none)."""
    confinement = landlock()
    return installed(distributions, modules), confinement.abi, confinement.why
