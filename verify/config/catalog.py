"""A project's mutation catalog: importing the modules `[tool.dflash] mutation_modules` names (a fresh registry
each time) and checking that every mutation's file is one the source roots serve under the name the gates
import. It knows nothing of pytest, forking or reports.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

from verify.config.layout import mutation_file_problem, namespace_root_problem, resolves_inside
from verify.config.settings import ConfigError, ProjectConfig
from verify.mutation import Mutation, MutationError, all_mutations, reset_registry
from verify.mutation.apply import Stale, apply_mutation

__all__ = ["StaleAnchorError", "check_mutation_files", "load_mutations", "stale_anchors"]


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


class StaleAnchorError(ConfigError):
    """Mutations whose anchor no longer occurs exactly once in their file (each with the nearest lines)."""

    def __init__(self, stale: dict[str, str]) -> None:
        self.stale = stale
        lines = "\n".join(f"  {name}: {reason}" for name, reason in stale.items())
        super().__init__(f"stale anchor{'s' if len(stale) > 1 else ''} ({len(stale)}), found when the catalog "
                         f"loaded; each will be reported stale, never run:\n{lines}")  # fmt: skip


def stale_anchors(config: ProjectConfig, mutations: dict[str, Mutation]) -> dict[str, str]:
    """The mutations whose anchor does not occur exactly once in their file (or whose mutant does not compile),
    by name, with why and the nearest lines: checked when the catalog loads, before any gate runs."""
    found = {name: apply_mutation(mutation, config.root) for name, mutation in mutations.items()}
    return {name: applied.reason for name, applied in found.items() if isinstance(applied, Stale)}


def check_mutation_files(config: ProjectConfig, mutations: dict[str, Mutation]) -> None:
    """Every mutated file lies under a source root and imports, from the private copy, under a name the
    import hook serves; otherwise its mutant could never reach a gate and every verdict would be a survival."""
    problem = namespace_root_problem(config.root, config.gates, config.source_roots) or next(
        filter(None, (mutation_file_problem(config, m.name, m.file) for m in mutations.values())), None
    )
    if problem:
        raise ConfigError(problem)


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
