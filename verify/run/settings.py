"""A project's `[tool.dflash]` settings and its mutation catalog.

This module owns reading pyproject.toml into a validated, frozen `ProjectConfig` and importing the
catalog modules it names. It knows nothing of pytest, forking or reports.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from verify.mutation import Mutation, MutationError, all_mutations, reset_registry
from verify.run.confine import WRITABLE_DOC, check_writable
from verify.run.layout import imported_names, module_name, resolves_inside

__all__ = ["ConfigError", "ProjectConfig", "check_mutation_files", "load_config", "load_mutations", "project_files"]

_ROOT_FILES = ("pyproject.toml", "setup.cfg", "pytest.ini", "tox.ini", "conftest.py")
_SKIP_PARTS = ("__pycache__", ".pytest_cache")


class ConfigError(Exception):
    """The project's `[tool.dflash]` table, or a catalog it names, is unusable (CLI exit code 2)."""


def _default_preload() -> tuple[str, ...]:
    # torch dominates a child's start-up; importing it once in the warm parent is the point of forking.
    return ("torch",) if importlib.util.find_spec("torch") is not None else ()


@dataclass(frozen=True, slots=True)
class ProjectConfig:
    root: Path
    mutation_modules: tuple[str, ...] = ("mutations",)
    gates: tuple[str, ...] = ("tests/gates",)
    gate_marker: str = "gate"  # pytest marker expression that selects the gates under `gates`
    source_roots: tuple[str, ...] = ("runner",)
    jobs: int = 0  # 0: one child per CPU
    timeout_factor: float = 10.0  # a mutant may take this many times the baseline of the gates it runs
    timeout_min_s: float = 10.0
    baseline_timeout_s: float = 1800.0
    preload: tuple[str, ...] = field(default_factory=_default_preload)
    required: tuple[str, ...] | None = None  # None: every mutation is required to be killed
    # Exception types that are the project's own named checks (dotted "module.Class", or a bare class name):
    # a gate red by one of these (or a subclass) "caught" the bug rather than crashed on it.
    invariant_errors: tuple[str, ...] = ("runner.errors.RunnerError",)
    # Pristine re-runs, after the mutations, of every gate that turned red: a gate red on the unmutated tree
    # in any of them is flaky and its kills do not count. Three in a row catch any gate that fails one run in
    # three or more often; one failing at random with probability p escapes with (1 - p) ** 3.
    flake_reruns: int = 3
    writable: tuple[str, ...] = field(default=(), metadata={"doc": WRITABLE_DOC})  # see verify.run.confine

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
_SCALAR_KEYS = ("gate_marker", "jobs", "timeout_factor", "timeout_min_s", "baseline_timeout_s", "flake_reruns")


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
    unknown = sorted(set(table) - set(_LIST_KEYS) - set(_SCALAR_KEYS))
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
    config = ProjectConfig(root=root, **values)  # type: ignore[arg-type]
    for key, rels in (("gates", config.gates), ("source_roots", config.source_roots)):
        for rel in rels:
            if not (root / rel).exists():
                raise ConfigError(f"[tool.dflash] {key}: path {rel!r} does not exist in {root}")
    return config


def _purge(name: str) -> None:
    for loaded in [key for key in sys.modules if key == name or key.startswith(name + ".")]:
        del sys.modules[loaded]


def _import_catalog(config: ProjectConfig, name: str) -> int:
    """Import one catalog module (a package: every submodule) and return how many mutations it registered."""
    inside, where = resolves_inside(name, config.root, [str(config.root / p) for p in config.import_paths])
    if where == "not found":
        raise ConfigError(
            f"cannot import mutation module {name!r}: not found in {config.root} (nor under its source "
            "roots): check [tool.dflash] mutation_modules"
        )
    if not inside:
        raise ConfigError(
            f"mutation module {name!r} is not part of the project ({where}): a catalog is a module of your own "
            f'under {config.root}, e.g. mutation_modules = ["my_mutations"] for my_mutations.py there'
        )
    before = len(all_mutations())
    _purge(name)
    try:
        module = importlib.import_module(name)
        for info in pkgutil.walk_packages(getattr(module, "__path__", []), prefix=name + "."):
            importlib.import_module(info.name)
    except MutationError as error:
        raise ConfigError(f"mutation module {name!r}: {error}") from None
    except (Exception, SystemExit) as error:  # any crash of user code while registering is a config error
        raise ConfigError(f"mutation module {name!r} failed to import: {type(error).__name__}: {error}") from None
    added = len(all_mutations()) - before
    if added == 0:
        raise ConfigError(
            f"mutation module {name!r} registered no mutation: call verify.mutation.register(Mutation(...)) "
            "in it (an empty catalog proves nothing)"
        )
    return added


def _check_namespace_roots(config: ProjectConfig) -> None:
    """A source root folder without __init__.py is a folder of import roots (`src`); if the gates import it by
    its own name, it is a namespace package and its modules would be imported past the import hook."""
    gate_files = [f for rel in config.gates for f in ([config.root / rel] if rel.endswith(".py") else
                  sorted((config.root / rel).rglob("*.py")))]  # fmt: skip
    imported = imported_names(gate_files)
    for rel in config.source_roots:
        path = config.root / rel
        if path.is_dir() and not (path / "__init__.py").is_file() and path.name in imported:
            raise ConfigError(
                f"[tool.dflash] source_roots names {rel!r}, a folder without __init__.py that the gates import as "
                f"`{path.name}`: add {rel}/__init__.py, or name the folder that holds it "
                f"(source_roots = [{str(Path(rel).parent.as_posix())!r}] with the package alone in it)"
            )


def check_mutation_files(config: ProjectConfig, mutations: dict[str, Mutation]) -> None:
    """Every mutated file lies under a source root and imports, from the private copy, under a name the
    import hook serves; otherwise its mutant could never reach a gate and every verdict would be a survival."""
    packages = set(config.source_packages)
    roots = ", ".join(config.source_roots)
    _check_namespace_roots(config)
    for mutation in mutations.values():
        file = PurePosixPath(mutation.file)
        if not any(file == PurePosixPath(r) or file.is_relative_to(PurePosixPath(r)) for r in config.source_roots):
            raise ConfigError(
                f"mutation {mutation.name!r} mutates {mutation.file}, outside [tool.dflash] source_roots ({roots}): "
                "only files under the source roots are copied and served to the gates"
            )
        if not (config.root / mutation.file).is_file():
            continue  # stale: the run reports it
        name = module_name(mutation.file, config.root, config.import_paths)
        if name is None or name.partition(".")[0] not in packages:
            raise ConfigError(
                f"mutation {mutation.name!r}: {mutation.file} does not import from the source roots ({roots}) as a "
                f"module of {', '.join(sorted(packages)) or 'any package'}: name the folder that holds your "
                "top-level packages (`src` in a src/ layout) or the package itself in source_roots"
            )


def load_mutations(config: ProjectConfig) -> dict[str, Mutation]:
    """Import the catalog afresh (a package means all its submodules) and return the registry by name.

    The registry is cleared first and the modules are re-imported, so the result is exactly what the
    catalog of `config.root` registers, whatever was imported before. No bytecode is written into the
    user's tree. A module outside the project, one that fails to import, or one that registers nothing is a
    ConfigError, and so is a mutation of a file the gates could not import from the source roots.
    """
    reset_registry()
    saved_path, saved_flag = list(sys.path), sys.dont_write_bytecode
    sys.path[:0] = [str((config.root / p).resolve()) for p in config.import_paths]
    sys.dont_write_bytecode = True
    try:
        for name in config.mutation_modules:
            _import_catalog(config, name)
    finally:
        sys.path[:] = saved_path
        sys.dont_write_bytecode = saved_flag
    mutations = all_mutations()
    check_mutation_files(config, mutations)
    return mutations


def project_files(config: ProjectConfig) -> list[str]:
    """Files the gates run against, relative to the root: the private copy holds exactly these.

    The source roots and gate paths, the `__init__.py` and `conftest.py` files above a gate (they
    decide how pytest names and imports it), and the root's pytest configuration. The same list keys
    the result cache, so an edit to any of them re-runs the mutations.
    """
    root, found = config.root, set()
    for rel in (*config.source_roots, *config.gates):
        path = root / rel
        candidates = path.rglob("*") if path.is_dir() else [path]
        for file in candidates:
            relative = file.relative_to(root)
            if file.is_file() and not file.name.endswith(".pyc") and not set(relative.parts) & set(_SKIP_PARTS):
                found.add(relative.as_posix())
        for parent in Path(rel).parents:
            found.update(
                (parent / m).as_posix() for m in ("__init__.py", "conftest.py") if (root / parent / m).is_file()
            )
    found.update(name for name in _ROOT_FILES if (root / name).is_file())
    return sorted(found)
