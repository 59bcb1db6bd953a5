"""Before any job: every node of the cluster has what the driver has and confines its children, or the run
stops with a named error.

A worker with another dflash-verify, torch or pytest than the driver would run other code and reach other
verdicts; one that cannot import a preload module would crash every child. One probe task per alive node
(pinned to it) reports Python's version, the versions of the distributions the children use, the harness
code's digest, whether each preload module imports, and the Landlock ABI a child there gets; any difference
from the driver is a `ClusterError` (CLI exit code 2) naming the node, the thing and both values. So is a node
whose children could not be confined (no Landlock there), unless the run's confinement is off
(DFLASH_CONFINE=off on the driver): a run must never say "confined" of children that were not. The
confinement each node gives is returned, for the report's per-node line. Knows nothing of jobs.
"""

from __future__ import annotations

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from verify.config.settings import ConfigError, ProjectConfig
from verify.run.execution.cluster.task import installed, node_facts
from verify.sandbox.confine import SWITCH, Confinement

__all__ = ["ClusterError", "check_nodes"]

DISTRIBUTIONS = ("dflash-verify", "torch", "pytest", "coverage", "ray")
_PROBE_TIMEOUT_S = 300.0  # a node that cannot start a worker in this long is not usable for the run


class ClusterError(ConfigError):
    """The Ray cluster cannot serve this run: no node, or a node without what the driver has (exit code 2)."""


def _modules(config: ProjectConfig) -> tuple[str, ...]:
    return tuple(dict.fromkeys(("pytest", *config.preload)))


def check_nodes(config: ProjectConfig, confine: bool = True) -> tuple[tuple[str, str], ...]:
    """Probe every alive node; return (node, the confinement its children get) for each. Raises ClusterError on
    the first difference, and on a node that cannot confine while `confine` is on."""
    nodes = [node for node in ray.nodes() if node.get("Alive")]
    if not nodes:
        raise ClusterError("the Ray cluster has no alive node")
    modules = _modules(config)
    expected = installed(DISTRIBUTIONS, modules)
    refs = {
        node["NodeManagerAddress"] + f" ({node['NodeID'][:8]})": node_facts.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
        ).remote(DISTRIBUTIONS, modules)
        for node in nodes
    }
    confinement: list[tuple[str, str]] = []
    for where, ref in refs.items():
        try:
            found, abi, why = ray.get(ref, timeout=_PROBE_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            raise ClusterError(
                f"node {where} did not answer the environment probe in {_PROBE_TIMEOUT_S:.0f}s"
            ) from None
        except ray.exceptions.RayError as error:
            first = (str(error).strip().splitlines() or [""])[-1][:200]
            raise ClusterError(
                f"node {where} cannot run dflash's jobs ({type(error).__name__}: {first}): install the driver's "
                f"dflash-verify {expected['package dflash-verify']} there, from the same wheel or checkout, with Ray"
            ) from None
        for thing, value in expected.items():
            if found.get(thing) != value:
                raise ClusterError(
                    f"node {where} differs from this machine in {thing}: {found.get(thing, 'missing')} there, "
                    f"{value} here. Every Ray worker needs the driver's dflash-verify (same code), Python, torch, "
                    "pytest and coverage, and must import every [tool.dflash] preload module"
                )
        confinement.append((where, _confinement(where, Confinement(abi, why.partition("; ")[0]), confine)))
    return tuple(confinement)


def _confinement(where: str, found: Confinement, confine: bool) -> str:
    """What a child on this node gets, as the report says it; a node without Landlock refuses a confined run."""
    if not confine:
        there = found.describe() if found.active else f"none there: {found.why}"
        return f"off: {SWITCH}=off on the driver ({there})"
    if not found.active:
        raise ClusterError(
            f"node {where} cannot confine its children ({found.why}): a mutant there could write wherever the "
            f"node's user can. Run where every node has Landlock (Linux 5.13+), or set {SWITCH}=off on this "
            "machine to run every child unconfined (the project is still checked for changes after the run)"
        )
    return found.describe()
