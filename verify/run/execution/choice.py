"""The one place that picks the executor a run uses: forked children on this machine, or Ray tasks on a cluster.

Kept apart from the job records (`verify.run.execution.jobs`), which every executor imports, so that no executor imports
the picker and no import circle runs through it. The Ray executor is imported only when asked for.
"""

from __future__ import annotations

import importlib.util

from verify.config.settings import ConfigError, ProjectConfig
from verify.run.execution.jobs import JobExecutor

__all__ = ["open_executor"]


def open_executor(config: ProjectConfig, ray_address: str | None = None) -> JobExecutor:
    """The executor `config.executor` names (not yet entered). `ray_address` overrides RAY_ADDRESS."""
    if config.executor == "ray":
        if importlib.util.find_spec("ray") is None:
            raise ConfigError(
                "--executor ray needs Ray, which this environment lacks: pip install 'ray>=2.40' "
                "(on the driver and on every node of the cluster)"
            )
        from verify.run.execution.cluster.executor import RayExecutor

        return RayExecutor(config, ray_address)
    from verify.run.execution.fork import Executor

    return Executor(config)
