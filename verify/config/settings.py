"""A project's `[tool.dflash]` settings.

This module owns reading pyproject.toml into a validated, frozen `ProjectConfig`; importing the catalog it
names is `verify.config.catalog`'s, and the files a run copies are `verify.config.project`'s. It knows
nothing of pytest, forking or reports.
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
from verify.config.factory import factory_problem
from verify.config.resources import ConfigError, JobResources
from verify.config.validation import DEVICES, EXECUTORS, STRING_LISTS, check_values, not_a_list, unknown_keys
from verify.config.writable import WRITABLE_DOC

__all__ = ["DEVICES", "EXECUTORS", "ConfigError", "JobResources", "ProjectConfig", "load_config", "with_overrides"]

# What a CI gate counts as a catch: `killed` (a gate's own check fired: killed or caught) or `detected` (any
# red, crashes and timeouts included, for a suite whose tests fail by raising rather than asserting).


def _default_preload() -> tuple[str, ...]:
    # torch dominates a child's start-up; importing it once in the warm parent is the point of forking.
    return ("torch",) if importlib.util.find_spec("torch") is not None else ()


def _key(default: object, doc: str) -> Any:
    """A `[tool.dflash]` key: its default (a callable makes a fresh one) and the docs sentence shown for it."""
    if callable(default):
        return field(default_factory=default, metadata={"doc": doc})
    return field(default=default, metadata={"doc": doc})


def in_root(rel: str, root: str) -> bool:
    """Whether the project file `rel` lies under `root` (a folder or file; "." or "" is the whole project)."""
    root = root.strip("/").removeprefix("./")
    return root in ("", ".") or rel == root or rel.startswith(root + "/")


@dataclass(frozen=True, slots=True)
class ProjectConfig:
    """The `[tool.dflash]` table. Every field but `root` is a key; its `metadata["doc"]` is its user docs."""

    root: Path
    mutation_modules: tuple[str, ...] = _key(
        ("mutations",),
        "Required: your catalog modules (a package means all its submodules). A module outside your project, "
        "one that fails to import or one that registers nothing is exit 2.",
    )
    gates: tuple[str, ...] = _key(
        ("tests/gates",), "The paths (folders or files) that hold the gates; a file's folder is copied with it, so "
        "its conftest and sibling helper modules import as under plain pytest.",
    )  # fmt: skip
    gate_marker: str = _key(
        "gate", 'The pytest marker expression that selects the gates under `gates`; `""` selects every test there '
        "(an existing suite, adopted whole). When nothing is selected the error names both.",
    )  # fmt: skip
    exclude: tuple[str, ...] = _key(
        (), 'Paths or globs, relative to the root, left out of the gates, e.g. `["tests/test_gpu_*.py"]` for test '
        "files whose collection needs packages this environment lacks. One that matches nothing is exit 2.",
    )  # fmt: skip
    pytest_args: tuple[str, ...] = _key(
        (), 'Extra arguments for every pytest run of the gates, e.g. `["-p", "no:randomly"]`.'
    )
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
    max_job_s: float = _key(
        0.0, "The most, in seconds of wall time, one mutant's child may run, whatever its budget (timeout_factor x "
        "its gates' baseline time x the load); past it the mutant is `timeout`. The harness's own children (the "
        "baseline, the flake check) are not capped. 0: no cap.",
    )  # fmt: skip
    memory_factor: float = _key(
        4.0, "A mutant's child may take this many times the memory the unmutated gates' child took (at least "
        "memory_min_mb, at most the machine's memory divided by the children running at once); past it the "
        "mutant is `crashed (memory)`. 0: no memory ceiling.",
    )  # fmt: skip
    memory_min_mb: int = _key(2048, "The least memory ceiling, in MiB, a mutant's child gets.")
    processes_max: int = _key(
        64, "Processes one child may have at once (itself and everything it started); past it the mutant is "
        "`crashed (processes)`. 0: no ceiling.",
    )  # fmt: skip
    file_max_mb: int = _key(
        1024, "The largest file, in MiB, a child may write; past it the mutant is `crashed (disk)`. 0: no ceiling."
    )
    output_max_mb: int = _key(
        64, "What one child may write to its stdout and stderr (pytest's capture of them included), in MiB, over its "
        "whole job; past it the mutant is `crashed (output)`. 0: no ceiling.",
    )  # fmt: skip
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
    # probability p escapes with (1 - p) ** 3 (one re-run: 1 - p). With --first-kill one re-run is the default:
    # three re-runs of every killing gate cost more than the mutations themselves there (docs/benchmarks.md).
    flake_reruns: int | None = _key(
        None, "Re-runs, in a row on the unmutated tree, of every gate that turned red (a statistical kill's killers "
        "are left to the second seed): one red there is flaky and its kills do not count. Default: 3 for the full "
        "matrix, 1 with `--first-kill` (its quick partial matrix); a value set here applies to both.",
    )  # fmt: skip
    executor: str = _key(
        "fork", "Where children run: `fork` (this machine) or `ray` (a Ray cluster; `pip install "
        "'ray>=2.40'`). `--executor` overrides it.",
    )  # fmt: skip
    device: str = _key(
        "cpu", "The device the gates build their engines on (`cpu` or `cuda`; children see it as DFLASH_DEVICE, "
        "each forked child its own GPU). `--device` overrides it.",
    )  # fmt: skip
    job_resources: JobResources = _key(
        JobResources, "What each job reserves on a Ray cluster, e.g. {num_cpus = 1, num_gpus = 1}; only "
        "`--executor ray` reads it.",
    )  # fmt: skip
    writable: tuple[str, ...] = _key((), WRITABLE_DOC)  # see verify.config.writable
    observe: str = _key(
        "", "Your engine's observer factory, 'module:function', for `dflash verify explain`. Its module must lie "
        "in a source root (or be installed), and define the function; otherwise exit 2.",
    )  # fmt: skip
    statistical_gates: tuple[str, ...] = _key(
        (), "Gates that pass or fail by chance at a stated false-alarm rate (node ids or node-id prefixes, e.g. "
        '`["tests/gates/test_law.py"]`). Each draws its seeds through `verify.reseed`; a mutant red only '
        "in these is run again on an independent seed (DFLASH_GATE_SEED), and its kill stands only if one is "
        "red again (docs/concepts/sampling-gates.md).",
    )  # fmt: skip
    conclusive_p_value: float = _key(
        1e-9, "A statistical gate's red whose own p-value is at most this stands on its first seed: no second seed, "
        "no pristine re-run of the gate. A gate states its p-value (the chance a correct engine goes this red) "
        'with pytest\'s `record_property("p_value", p)` before the check, or as a `p_value` attribute on its '
        "AssertionError, as the gate kit's checks do. The default is 1000 times below two independent reds at 1e-3 "
        "each, room for an approximate p-value's tail; 0 lets only reds a correct engine cannot produce stand "
        "(docs/concepts/sampling-gates.md).",
    )  # fmt: skip
    count: str = _key(
        "killed", "What the CI gate counts as a catch: `killed` (a gate's own check fired: killed or caught) or "
        "`detected` (also crashed and timeout: for a suite whose tests fail by raising). `--count` overrides it.",
    )  # fmt: skip

    def flake_reruns_for(self, first_kill: bool) -> int:
        """The flake check's re-runs for a run in this mode: the key when set, else 3 (1 with --first-kill)."""
        return self.flake_reruns if self.flake_reruns is not None else (1 if first_kill else 3)

    def __post_init__(self) -> None:
        check_values(self)

    @property
    def marker_args(self) -> tuple[str, ...]:
        """pytest's `-m` for the gate marker; none when every test is a gate."""
        return ("-m", self.gate_marker) if self.gate_marker else ()

    def excluded(self) -> dict[str, tuple[str, ...]]:
        """Each `exclude` entry and the paths (posix, relative to the root) it matches now, sorted."""
        return {
            pattern: tuple(sorted(p.relative_to(self.root).as_posix() for p in self.root.glob(pattern)))
            for pattern in self.exclude
        }

    def pytest_extra(self) -> tuple[str, ...]:
        """What every pytest run of the gates adds: an `--ignore` per excluded path, then `pytest_args`."""
        paths = sorted({path for matched in self.excluded().values() for path in matched})
        return (*(f"--ignore={path}" for path in paths), *self.pytest_args)

    @property
    def num_jobs(self) -> int:
        return self.jobs or os.cpu_count() or 1

    def is_source(self, rel: str) -> bool:
        """Whether the project file `rel` lies under a source root (what mutations change)."""
        return any(in_root(rel, root) for root in self.source_roots)

    def is_under_gates(self, rel: str) -> bool:
        """Whether the project file `rel` lies under a gate path."""
        return any(in_root(rel, gate) for gate in self.gates)

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


_LIST_KEYS = (*STRING_LISTS, "required", "writable")
_SCALAR_KEYS: tuple[str, ...] = ("gate_marker", "jobs", "timeout_factor", "timeout_min_s", "baseline_timeout_s")
_SCALAR_KEYS += ("max_job_s", "memory_factor", "memory_min_mb", "processes_max", "file_max_mb", "output_max_mb")
_SCALAR_KEYS += ("flake_reruns", "executor", "device", "observe", "count", "conclusive_p_value")
_TABLE_KEYS = ("job_resources",)


_SOURCE_ROOTS_FIX = 'name what your tests import: ["src"] in a src/ layout, ["mypkg"] flat, or ["engine.py"]'


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
    keys = (*_LIST_KEYS, *_SCALAR_KEYS, *_TABLE_KEYS)
    unknown = sorted(set(table) - set(keys))
    if unknown:
        raise ConfigError(unknown_keys(unknown, keys))
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
                raise ConfigError(not_a_list(key, table[key]))
            values[key] = tuple(table[key])
    for key in _SCALAR_KEYS:
        if key in table:
            values[key] = table[key]
    if "job_resources" in table:
        values["job_resources"] = JobResources.from_table(table["job_resources"])
    config = ProjectConfig(root=root, **values)  # type: ignore[arg-type]
    fixes = {"gates": "name the folders or files that hold your tests", "source_roots": _SOURCE_ROOTS_FIX}
    for key, rels in (("gates", config.gates), ("source_roots", config.source_roots)):
        for rel in rels:
            if not (root / rel).exists():
                raise ConfigError(f"[tool.dflash] {key}: path {rel!r} does not exist in {root}: {fixes[key]}")
    copied = (*config.source_roots, *config.gates)
    if config.observe and (problem := factory_problem(root, config.import_paths, copied, config.observe)):
        raise ConfigError(f"[tool.dflash] observe = {config.observe!r}: {problem}")
    for pattern, matched in config.excluded().items():
        if not matched:
            raise ConfigError(
                f"[tool.dflash] exclude: {pattern!r} matches nothing in {root}: remove it, or write a path or glob "
                'relative to the project root (e.g. "tests/test_gpu_*.py")'
            )
    return config


def with_overrides(
    config: ProjectConfig, executor: str | None = None, device: str | None = None, count: str | None = None
) -> ProjectConfig:
    """The config with the command line's --executor/--device/--count in place of the table's (validated
    again)."""
    pairs = (("executor", executor), ("device", device), ("count", count))
    changes = {key: value for key, value in pairs if value is not None}
    return dataclasses.replace(config, **changes) if changes else config  # type: ignore[arg-type]
