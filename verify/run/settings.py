"""A project's `[tool.dflash]` settings.

This module owns reading pyproject.toml into a validated, frozen `ProjectConfig`; importing the catalog it
names is `verify.run.catalog`'s, and the files a run copies are `verify.run.project`'s. It knows nothing of
pytest, forking or reports.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verify.compat import tomllib
from verify.run.confine import WRITABLE_DOC, check_writable

__all__ = ["DEVICES", "EXECUTORS", "ConfigError", "JobResources", "ProjectConfig", "load_config", "with_overrides"]

EXECUTORS = ("fork", "ray")
DEVICES = ("cpu", "cuda")


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


def _default_preload() -> tuple[str, ...]:
    # torch dominates a child's start-up; importing it once in the warm parent is the point of forking.
    return ("torch",) if importlib.util.find_spec("torch") is not None else ()


def _key(default: object, doc: str) -> Any:
    """A `[tool.dflash]` key: its default (a callable makes a fresh one) and the docs sentence shown for it."""
    if callable(default):
        return field(default_factory=default, metadata={"doc": doc})
    return field(default=default, metadata={"doc": doc})


@dataclass(frozen=True, slots=True)
class ProjectConfig:
    """The `[tool.dflash]` table. Every field but `root` is a key; its `metadata["doc"]` is its user docs."""

    root: Path
    mutation_modules: tuple[str, ...] = _key(
        ("mutations",),
        "Required: your catalog modules (a package means all its submodules). A module outside your project, "
        "one that fails to import or one that registers nothing is exit 2.",
    )
    gates: tuple[str, ...] = _key(("tests/gates",), "The paths (folders or files) that hold the gates.")
    gate_marker: str = _key(
        "gate", "The pytest marker expression that selects the gates under `gates`; when nothing is selected the "
        "error names both.",
    )  # fmt: skip
    source_roots: tuple[str, ...] = _key(
        ("runner",), 'What the gates import: `["src"]` in a src/ layout, `["mypkg"]` flat, `["engine.py"]`, or '
        "several; namespace packages work. A mutated file outside them is exit 2.",
    )  # fmt: skip
    jobs: int = _key(0, "Children run in parallel; 0 means one per CPU.")
    timeout_factor: float = _key(
        10.0, "A mutant's budget is this many times the baseline time of the gates it runs (at least "
        "timeout_min_s), stretched by the machine's measured load.",
    )  # fmt: skip
    timeout_min_s: float = _key(10.0, "The least budget, in seconds, a mutant's gates get.")
    baseline_timeout_s: float = _key(1800.0, "The budget, in seconds, of the unmutated baseline run of the gates.")
    preload: tuple[str, ...] = _key(
        _default_preload,
        'Modules the warm parent imports once before forking, e.g. `["torch", "transformers.models.qwen3"]`; '
        'default `["torch"]` where torch is installed.',
    )
    required: tuple[str, ...] | None = _key(
        None, "The mutations that must be killed or caught for exit 0; default: every registered mutation."
    )
    invariant_errors: tuple[str, ...] = _key(
        ("runner.errors.RunnerError",),
        'Your engine\'s named check exceptions (`"mypkg.errors.InvariantError"`, or a bare class name): a gate red '
        "by one of them, or a subclass, caught the bug (status `caught`).",
    )
    # Three in a row catch any gate that fails one run in three or more; one failing at random with
    # probability p escapes with (1 - p) ** 3.
    flake_reruns: int = _key(
        3, "Re-runs, in a row on the unmutated tree, of every gate that turned red: one red there is flaky and "
        "its kills do not count.",
    )  # fmt: skip
    executor: str = _key(
        "fork", "Where children run: `fork` (this machine) or `ray` (a Ray cluster; `pip install "
        "'dflash-verify[ray]'`). `--executor` overrides it.",
    )  # fmt: skip
    device: str = _key(
        "cpu", "The device the gates build their engines on (`cpu` or `cuda`; children see it as DFLASH_DEVICE, "
        "each forked child its own GPU). `--device` overrides it.",
    )  # fmt: skip
    job_resources: JobResources = _key(
        JobResources, "What each job reserves on a Ray cluster, e.g. {num_cpus = 1, num_gpus = 1}; only "
        "`--executor ray` reads it.",
    )  # fmt: skip
    writable: tuple[str, ...] = _key((), WRITABLE_DOC)  # see verify.run.confine
    observe: str = _key("", "Your engine's observer factory, 'module:function', for `dflash verify explain`.")

    def __post_init__(self) -> None:
        for name in ("mutation_modules", "gates", "source_roots", "preload", "invariant_errors"):
            value = getattr(self, name)
            if not isinstance(value, tuple) or not all(isinstance(item, str) and item for item in value):
                raise ConfigError(f"[tool.dflash] {name} must be a list of non-empty strings")
        if self.required is not None and not all(isinstance(item, str) for item in self.required):
            raise ConfigError("[tool.dflash] required must be a list of mutation names")
        if not self.gates or not self.source_roots or not self.mutation_modules:
            raise ConfigError("[tool.dflash] mutation_modules, gates and source_roots must not be empty")
        for rel in (*self.gates, *self.source_roots):
            if Path(rel).is_absolute() or ".." in Path(rel).parts:
                raise ConfigError(f"[tool.dflash] path {rel!r} must be relative and inside the project")
        if isinstance(self.jobs, bool) or not isinstance(self.jobs, int) or self.jobs < 0:
            raise ConfigError(f"[tool.dflash] jobs must be an integer >= 0, got {self.jobs!r}")
        if not isinstance(self.gate_marker, str) or not self.gate_marker.strip():
            raise ConfigError("[tool.dflash] gate_marker must be a non-empty pytest marker expression")
        if isinstance(self.flake_reruns, bool) or not isinstance(self.flake_reruns, int) or self.flake_reruns < 0:
            raise ConfigError(f"[tool.dflash] flake_reruns must be an integer >= 0, got {self.flake_reruns!r}")
        if self.executor not in EXECUTORS:
            raise ConfigError(f"[tool.dflash] executor must be one of {', '.join(EXECUTORS)}, got {self.executor!r}")
        if self.device not in DEVICES:
            raise ConfigError(f"[tool.dflash] device must be one of {', '.join(DEVICES)}, got {self.device!r}")
        if not isinstance(self.job_resources, JobResources):
            raise ConfigError("[tool.dflash] job_resources must be a table, e.g. {num_cpus = 1, num_gpus = 1}")
        if self.executor == "ray" and self.device == "cuda" and self.job_resources.num_gpus == 0:
            raise ConfigError(
                "device cuda on the ray executor needs a GPU per job: set [tool.dflash] job_resources = "
                "{num_cpus = 1, num_gpus = 1} (Ray hides every GPU from a task that reserves none)"
            )
        if not isinstance(self.observe, str) or (self.observe and not self.observe.partition(":")[2].isidentifier()):
            raise ConfigError(f"[tool.dflash] observe must be 'module:function', got {self.observe!r}")
        for name in ("timeout_factor", "timeout_min_s", "baseline_timeout_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ConfigError(f"[tool.dflash] {name} must be a positive number, got {value!r}")
        check_writable(self.root, self.writable, ConfigError)

    @property
    def num_jobs(self) -> int:
        return self.jobs or os.cpu_count() or 1

    @property
    def import_paths(self) -> tuple[str, ...]:
        """Folders (relative to the root, "." for the root) that go on sys.path so the source imports.

        A source root that is a package or a module (`runner`, `engine.py`) imports from its parent; a plain
        folder of packages (`src`, `lib`) is itself the import path. The root always comes first, so gates
        and catalog modules import as pytest's rootdir would import them.
        """
        paths = ["."]
        for rel in self.source_roots:
            path = self.root / rel
            is_package = path.suffix == ".py" or (path / "__init__.py").is_file()
            folder = Path(rel).parent.as_posix() if is_package else Path(rel).as_posix()
            if folder not in paths:
                paths.append(folder)
        return tuple(paths)

    @property
    def source_packages(self) -> tuple[str, ...]:
        """Top-level import names the source roots provide (what a mutated file is imported as)."""
        names: set[str] = set()
        for rel in self.source_roots:
            path = self.root / rel
            if path.suffix == ".py" or (path / "__init__.py").is_file():
                names.add(path.stem if path.suffix == ".py" else path.name)
            elif path.is_dir():
                # Modules and packages, namespace packages (a folder of .py files without __init__.py) included.
                names.update(
                    child.stem if child.suffix == ".py" else child.name
                    for child in path.iterdir()
                    if (child.suffix == ".py" and child.stem.isidentifier())
                    or (child.is_dir() and child.name.isidentifier() and any(child.rglob("*.py")))
                )
        return tuple(sorted(names))

    @property
    def top_level_names(self) -> tuple[str, ...]:
        """Import names that belong to the project: never trusted from the parent's sys.modules."""
        names = {Path(rel).parts[0].removesuffix(".py") for rel in self.gates} | set(self.source_packages)
        return tuple(sorted(names | {"conftest"}))


_LIST_KEYS = ("mutation_modules", "gates", "source_roots", "preload", "required", "invariant_errors", "writable")
_SCALAR_KEYS = (
    "gate_marker",
    "jobs",
    "timeout_factor",
    "timeout_min_s",
    "baseline_timeout_s",
    "flake_reruns",
    "executor",
    "device",
    "observe",
)
_TABLE_KEYS = ("job_resources",)


def load_config(root: Path) -> ProjectConfig:
    """Read `[tool.dflash]` from `root/pyproject.toml`.

    The table must name its catalog (`mutation_modules`): the embedded catalog mutates this repository's own
    runner and means nothing for another project, so it is never a default. `dflash init` writes the table.
    """
    root = Path(root).resolve()
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file():
        raise ConfigError(f"no pyproject.toml in {root}: run `dflash init` there to write one with [tool.dflash]")
    try:
        table = tomllib.loads(pyproject.read_text()).get("tool", {}).get("dflash")
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{pyproject}: {error}") from None
    if table is None:
        raise ConfigError(
            f"{pyproject} has no [tool.dflash] table: run `dflash init` to write one (with an example mutation "
            "module and gate), or add it by hand naming mutation_modules, gates and source_roots"
        )
    if not isinstance(table, dict):
        raise ConfigError(f"{pyproject}: tool.dflash must be a table")
    unknown = sorted(set(table) - set(_LIST_KEYS) - set(_SCALAR_KEYS) - set(_TABLE_KEYS))
    if unknown:
        raise ConfigError(f"[tool.dflash] unknown keys: {', '.join(unknown)}")
    if "mutation_modules" not in table:
        raise ConfigError(
            "[tool.dflash] names no mutation_modules: name the modules that register your mutations, e.g. "
            'mutation_modules = ["my_mutations"], or run `dflash init` to write an example one '
            "(the embedded catalog mutates dflash-verify's own runner, never your project)"
        )
    values: dict[str, object] = {}
    for key in _LIST_KEYS:
        if key in table:
            if not isinstance(table[key], list):
                raise ConfigError(f"[tool.dflash] {key} must be a list")
            values[key] = tuple(table[key])
    for key in _SCALAR_KEYS:
        if key in table:
            values[key] = table[key]
    if "job_resources" in table:
        values["job_resources"] = JobResources.from_table(table["job_resources"])
    config = ProjectConfig(root=root, **values)  # type: ignore[arg-type]
    for key, rels in (("gates", config.gates), ("source_roots", config.source_roots)):
        for rel in rels:
            if not (root / rel).exists():
                raise ConfigError(f"[tool.dflash] {key}: path {rel!r} does not exist in {root}")
    return config


def with_overrides(config: ProjectConfig, executor: str | None = None, device: str | None = None) -> ProjectConfig:
    """The config with the command line's --executor/--device in place of the table's (validated again)."""
    changes = {key: value for key, value in (("executor", executor), ("device", device)) if value is not None}
    return dataclasses.replace(config, **changes) if changes else config  # type: ignore[arg-type]
