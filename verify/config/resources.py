"""What one job reserves on a Ray cluster (`[tool.dflash] job_resources`), and `ConfigError`, the error every
unusable `[tool.dflash]` value raises (CLI exit code 2).

A leaf below `verify.config.settings`, which re-exports both; it knows nothing of the rest of the table.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ConfigError", "JobResources"]


class ConfigError(Exception):
    """The project's `[tool.dflash]` table, or a catalog it names, is unusable (CLI exit code 2)."""


@dataclass(frozen=True, slots=True)
class JobResources:
    """What one job (one child) reserves on a Ray cluster: Ray schedules a job only where these are free."""

    num_cpus: float = 1.0
    num_gpus: float = 0.0

    def __post_init__(self) -> None:
        for name in ("num_cpus", "num_gpus"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ConfigError(f"[tool.dflash] job_resources.{name} must be a number >= 0, got {value!r}")
        if self.num_cpus == 0 and self.num_gpus == 0:
            raise ConfigError("[tool.dflash] job_resources must reserve some num_cpus or num_gpus")

    @classmethod
    def from_table(cls, table: object) -> JobResources:
        if not isinstance(table, dict):
            raise ConfigError("[tool.dflash] job_resources must be a table, e.g. {num_cpus = 1, num_gpus = 1}")
        unknown = sorted(set(table) - {"num_cpus", "num_gpus"})
        if unknown:
            raise ConfigError(f"[tool.dflash] job_resources: unknown keys {', '.join(unknown)} (num_cpus, num_gpus)")
        return cls(**table)
