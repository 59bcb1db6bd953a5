"""The checks a `[tool.dflash]` table must pass when it is read, each failure a `ConfigError` naming the key, what
it takes and, for a typo or a value of another form, the fix (CLI exit code 2). Values only: whether paths
exist and observers import is `settings`' and `factory`'s. Knows nothing of pytest, forking or reports.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

from verify.config.resources import ConfigError, JobResources
from verify.config.writable import check_writable

__all__ = [
    "CONFIG_PAGE", "COUNTS", "DEVICES", "EXECUTORS", "LIST_FORMS", "STRING_LISTS", "check_values", "not_a_list",
    "unknown_keys",
]  # fmt: skip

EXECUTORS = ("fork", "ray")
DEVICES = ("cpu", "cuda")
COUNTS = ("killed", "detected")  # what the CI gate counts as a catch (`count`)
STRING_LISTS = tuple(
    "mutation_modules gates source_roots preload invariant_errors exclude pytest_args statistical_gates".split()
)

# What each list key holds and an example of it, named in the error for a value of another form.
LIST_FORMS = {
    "mutation_modules": ("module names", '["my_mutations"]'),
    "gates": ("paths", '["tests"]'),
    "source_roots": ("paths", '["src"]'),
    "preload": ("module names", '["torch"]'),
    "invariant_errors": ("exception class names", '["mypkg.errors.InvariantError"]'),
    "exclude": ("paths or globs", '["tests/test_gpu_*.py"]'),
    "pytest_args": ("arguments", '["-p", "no:randomly"]'),
    "statistical_gates": ("node ids or their prefixes", '["tests/gates/test_law.py"]'),
    "required": ("mutation names", '["my-bug"]'),
    "writable": ("paths", '[".cache"]'),
}


def not_a_list(key: str, value: object) -> str:
    """The error for a list key given something else: the value as written, the form it takes and an example."""
    kind, example = LIST_FORMS.get(key, ("strings", '["..."]'))
    return f"[tool.dflash] {key} = {json.dumps(value, default=str)}: expected a list of {kind}, e.g. {example}"


CONFIG_PAGE = "docs/reference/configuration.md"  # every key, its default and meaning (in the docs site too)


def unknown_keys(unknown: list[str], keys: tuple[str, ...]) -> str:
    """The error for keys the table does not take: each with the closest valid one (a typo is the usual cause),
    then every valid key and the page that describes them."""
    named = []
    for key in unknown:
        close = difflib.get_close_matches(key, keys, n=1, cutoff=0.6)
        named.append(f"{key} (did you mean {close[0]}?)" if close else key)
    return f"[tool.dflash] unknown keys: {', '.join(named)}; the valid keys: {', '.join(sorted(keys))} ({CONFIG_PAGE})"


def check_values(config: Any) -> None:
    """Every key of a `ProjectConfig` has a value of its kind and range; raises ConfigError naming the first that
    does not."""
    for name in STRING_LISTS:
        value = getattr(config, name)
        if not isinstance(value, tuple) or not all(isinstance(item, str) and item for item in value):
            shown = list(value) if isinstance(value, tuple) else value
            raise ConfigError(f"{not_a_list(name, shown)} (a list of non-empty strings)")
    if config.required is not None and not all(isinstance(item, str) for item in config.required):
        raise ConfigError(not_a_list("required", list(config.required)))
    if not config.gates or not config.source_roots or not config.mutation_modules:
        raise ConfigError("[tool.dflash] mutation_modules, gates and source_roots must not be empty")
    for rel in (*config.gates, *config.source_roots, *config.exclude):
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise ConfigError(f"[tool.dflash] path {rel!r} must be relative and inside the project")
    if isinstance(config.jobs, bool) or not isinstance(config.jobs, int) or config.jobs < 0:
        raise ConfigError(f"[tool.dflash] jobs must be an integer >= 0, got {config.jobs!r}")
    if not isinstance(config.gate_marker, str) or (config.gate_marker and not config.gate_marker.strip()):
        raise ConfigError('[tool.dflash] gate_marker must be a pytest marker expression, or "" for every test')
    if config.count not in COUNTS:
        raise ConfigError(f"[tool.dflash] count must be one of {', '.join(COUNTS)}, got {config.count!r}")
    reruns = config.flake_reruns
    if reruns is not None and (isinstance(reruns, bool) or not isinstance(reruns, int) or reruns < 0):
        raise ConfigError(f"[tool.dflash] flake_reruns must be an integer >= 0, got {config.flake_reruns!r}")
    conclusive = config.conclusive_p_value
    if isinstance(conclusive, bool) or not isinstance(conclusive, int | float) or not 0 <= conclusive <= 1e-4:
        raise ConfigError(f"[tool.dflash] conclusive_p_value must be a number from 0 to 1e-4, got {conclusive!r}")
    if config.executor not in EXECUTORS:
        raise ConfigError(f"[tool.dflash] executor must be one of {', '.join(EXECUTORS)}, got {config.executor!r}")
    if config.device not in DEVICES:
        raise ConfigError(f"[tool.dflash] device must be one of {', '.join(DEVICES)}, got {config.device!r}")
    if not isinstance(config.job_resources, JobResources):
        raise ConfigError("[tool.dflash] job_resources must be a table, e.g. {num_cpus = 1, num_gpus = 1}")
    if config.executor == "ray" and config.device == "cuda" and config.job_resources.num_gpus == 0:
        raise ConfigError(
            "device cuda on the ray executor needs a GPU per job: set [tool.dflash] job_resources = "
            "{num_cpus = 1, num_gpus = 1} (Ray hides every GPU from a task that reserves none)"
        )
    if not isinstance(config.observe, str) or (config.observe and not config.observe.partition(":")[2].isidentifier()):
        raise ConfigError(f"[tool.dflash] observe must be 'module:function', got {config.observe!r}")
    for name in ("timeout_factor", "timeout_min_s", "baseline_timeout_s"):
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise ConfigError(f"[tool.dflash] {name} must be a positive number, got {value!r}")
    for name, kind in (("max_job_s", int | float), ("memory_factor", int | float), ("memory_min_mb", int),
                       ("processes_max", int), ("file_max_mb", int), ("output_max_mb", int)):  # fmt: skip
        if isinstance(value := getattr(config, name), bool) or not isinstance(value, kind) or not 0 <= value < 1e18:
            raise ConfigError(f"[tool.dflash] {name} must be a finite number >= 0, got {value!r}")
    check_writable(config.root, config.writable, ConfigError)
