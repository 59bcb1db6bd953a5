"""`dflash init`'s library: detect a project's layout and write a `[tool.dflash]` table, an example mutation
module and an example gate that fit it, so that `dflash verify` runs end to end right after.

Detection reads the tree (where the example mutation goes is `verify.config.example`'s); writing appends to
pyproject.toml (never rewrites what is there) and creates files that do not exist yet. Owns the walk over the
project's own folders (environments, hidden folders and build output pruned unentered), which the suite search of
`verify.config.adopt` shares. Knows nothing of pytest runs, forking or rendering.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from verify.compat import tomllib
from verify.config.example import Change, find_example

__all__ = ["Scaffold", "ScaffoldError", "detect", "walk_project", "write"]

_NOT_SOURCE = {"tests", "test", "docs", "doc", "examples", "example", "benchmarks", "scripts", "build", "dist"}
_NOT_MODULES = {"setup.py", "conftest.py", "noxfile.py", "tasks.py", "manage.py"}
GATES = "tests/gates"
GATE_FILE = f"{GATES}/test_gate_example.py"
GATE_CONFTEST = f"{GATES}/conftest.py"
# Folders that hold none of the project's own code: caches, build output, installed packages and environments by
# their usual names. Hidden folders (.git, .tox, .venv) are known by their dot and an environment of any other name
# by its pyvenv.cfg; a folder of these names that is a package (its __init__.py) is code (`_is_skipped_folder`).
_SKIPPED_FOLDERS = frozenset({"__pycache__", "build", "dist", "env", "node_modules", "site-packages", "venv"})


_NAMESPACE_INIT = (
    "# Written by `dflash init`: this folder of modules becomes a package, so that `dflash verify` can serve a\n"
    "# mutant to its modules (a namespace package's modules are imported past its import hook).\n"
)


class ScaffoldError(Exception):
    """The project cannot be scaffolded: it is already configured, or no Python source was found."""


@dataclass(frozen=True, slots=True)
class Scaffold:
    """What `dflash init` writes for one project."""

    root: Path
    layout: str  # "src", "flat" or "module"
    source_roots: tuple[str, ...]
    catalog: str  # the mutation module's import name, a file at the root
    target_file: str  # the source file the example mutation changes (posix, relative to root)
    target_module: str  # its import name
    function: str  # the function whose return the example mutation breaks
    anchor: str
    replacement: str
    change: Change
    namespace_inits: tuple[str, ...] = ()  # __init__.py files that make folders of plain modules packages
    proposed_catalog: str = ""  # the proposals' catalog module (`dflash mutations propose`), if any
    proposed_text: str = ""

    @property
    def catalogs(self) -> list[str]:
        """The catalog modules the table names: the example's, and the proposals' when there are any."""
        return [self.catalog, *([self.proposed_catalog] if self.proposed_catalog else [])]

    @property
    def mutation_name(self) -> str:
        return (re.sub(r"[^a-z0-9]+", "-", self.function.lower()).strip("-") or "example") + f"-returns-{self.change}"

    @property
    def effect(self) -> str:
        """The example mutation in words: `law returns its result negated`."""
        said = {
            Change.NEGATED: "returns its result negated",
            Change.INVERTED: "returns the opposite truth value",
            Change.NONE: "returns None instead of its result",
        }[self.change]
        return f"{self.function} {said}"

    @property
    def catalog_file(self) -> str:
        return f"{self.catalog}.py"

    def table(self) -> str:
        roots = json.dumps(list(self.source_roots))
        return (
            "\n[tool.dflash]\n"
            "# Written by `dflash init`. The catalog registers your engine's bug classes; the gates are the tests\n"
            "# (marked with gate_marker, under gates) that must catch them.\n"
            f"mutation_modules = {json.dumps(self.catalogs)}\n"
            f"source_roots = {roots}\n"
            f'gates = ["{GATES}"]\n'
            'gate_marker = "gate"\n'
            'invariant_errors = []  # your engine\'s named check exceptions, e.g. "mypkg.errors.InvariantError"\n'
        )

    def catalog_text(self) -> str:
        return (
            f'"""Mutations of {self.target_module}: each one a bug your gates must catch (see `dflash mutations '
            "show NAME`).\n\nStart from the bug classes no output token shows (in a speculative-decoding engine: what "
            "the drafter\nsees, the acceptance rule, KV-cache cropping). The anchor must occur exactly once in the "
            'file.\n"""\n\n'
            "from verify.mutation import Mutation, register\n\n"
            "register(\n"
            "    Mutation(\n"
            f'        "{self.mutation_name}",\n'
            f'        "{self.effect} (an example: replace it with a real bug)",\n'
            f"        {self.target_file!r},\n"
            f"        {self.anchor!r},\n"
            f"        {self.replacement!r},\n"
            "    ),\n"
            ")\n"
        )

    def gate_text(self) -> str:
        return (
            '"""An example gate. `dflash verify` runs every test marked `gate` under [tool.dflash] gates against each\n'
            "mutation. This one only imports the module, so the example mutation survives it: replace it with a\n"
            f'test that calls {self.function} and checks what it returns."""\n\n'
            "import importlib\n\nimport pytest\n\n\n"
            "@pytest.mark.gate\n"
            "def test_module_imports():\n"
            f'    assert importlib.import_module("{self.target_module}") is not None\n'
        )

    @staticmethod
    def conftest_text() -> str:
        return (
            '"""Registers the `gate` marker (written by `dflash init`; --strict-markers needs it)."""\n\n\n'
            "def pytest_configure(config):\n"
            '    config.addinivalue_line("markers", "gate: a gate that `dflash verify` runs mutations against")\n'
        )


def _is_source_folder(path: Path) -> bool:
    """A folder of the project's own modules: a package, or a folder of plain modules (no __init__.py) that is
    not tests, docs, hidden or a virtual environment."""
    if not path.is_dir() or not path.name.isidentifier() or path.name in _NOT_SOURCE or path.name.startswith("_"):
        return False
    if (path / "__init__.py").is_file():
        return True
    if (path / "pyvenv.cfg").exists():
        return False
    modules = [p for p in path.glob("*.py") if p.name not in _NOT_MODULES]
    return any(not (p.name.startswith("test_") or p.stem.endswith("_test")) for p in modules)


def _packages(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if _is_source_folder(p))


def _namespace_inits(root: Path, folders: list[Path]) -> tuple[str, ...]:
    """The `__init__.py` each folder of plain modules needs (posix, relative to root): the import hook serves a
    mutant to a package's modules, never to a namespace package's, so init makes the folder a package."""
    return tuple(
        sorted((f / "__init__.py").relative_to(root).as_posix() for f in folders if not (f / "__init__.py").exists())
    )


def _layout(root: Path) -> tuple[str, tuple[str, ...], list[Path]]:
    """(layout, source_roots, candidate files to mutate, most likely first)."""
    if (root / "src").is_dir() and (found := _packages(root / "src")):
        return "src", ("src",), [f for name in found for f in sorted((root / "src" / name).rglob("*.py"))]
    if found := _packages(root):
        # Packages first: a folder of plain modules beside them (a `utils/` the tests import) is a root too.
        found.sort(key=lambda name: not (root / name / "__init__.py").is_file())
        return "flat", tuple(found), [f for name in found for f in sorted((root / name).rglob("*.py"))]
    modules = sorted(
        p for p in root.glob("*.py") if p.name not in _NOT_MODULES and p.stem.isidentifier() and "test" not in p.stem
    )
    if modules:
        return "module", tuple(p.name for p in modules), modules
    raise ScaffoldError(
        f"no Python source found in {root} (looked for packages and folders of modules under src/ and at the root, "
        "and modules at the root): write [tool.dflash] by hand (docs: reference/configuration.md)"
    )


def _is_skipped_folder(folder: Path) -> bool:
    """A folder none of the project's code lives in: hidden, a virtual environment (whatever its name: it holds
    pyvenv.cfg), or named in _SKIPPED_FOLDERS and no package (an engine's own `env` or `build` subpackage, with
    its `__init__.py`, is code)."""
    if folder.name.startswith(".") or (folder / "pyvenv.cfg").exists():
        return True
    return folder.name in _SKIPPED_FOLDERS and not (folder / "__init__.py").is_file()


def walk_project(root: Path) -> Iterator[tuple[Path, list[str], list[str]]]:
    """`os.walk` over the project's own folders: (folder, subfolders, files), top down. A skipped folder is pruned
    before it is entered, so an environment or a node_modules inside the project costs one stat, not a walk of
    thousands of files; the caller may prune `subfolders` further, in place, as with os.walk."""
    for folder, subfolders, files in os.walk(root):
        here = Path(folder)
        subfolders[:] = [name for name in subfolders if not _is_skipped_folder(here / name)]
        yield here, subfolders, files


def _project_files(root: Path) -> list[Path]:
    """The project's own Python files (source and tests), in `walk_project`'s folders."""
    return [folder / name for folder, _, files in walk_project(root) for name in files if name.endswith(".py")]


def detect(root: Path) -> Scaffold:
    """The scaffold for `root`; refuses a project whose pyproject.toml already has [tool.dflash]."""
    root = Path(root).resolve()
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        try:
            existing = tomllib.loads(pyproject.read_text())
        except tomllib.TOMLDecodeError as error:
            raise ScaffoldError(f"{pyproject} does not parse: {error}") from None
        if "dflash" in existing.get("tool", {}):
            raise ScaffoldError(f"{pyproject} already has [tool.dflash]; edit it, or remove it to start over")
    layout, roots, candidates = _layout(root)
    candidates.sort(key=lambda p: p.name == "__init__.py")  # a module's code before package glue
    found = find_example(candidates, _project_files(root))
    if found is None:
        raise ScaffoldError(
            f"no function with a one-line `return <value>` found under {', '.join(roots)} to write an example "
            "mutation of: write the catalog by hand (docs: how-to/write-a-mutation.md)"
        )
    rel = PurePosixPath(found.path.relative_to(root).as_posix())
    base = rel.parts[1:] if layout == "src" else rel.parts
    module = ".".join([*base[:-1], *([] if rel.stem == "__init__" else [rel.stem])])
    catalog = f"{module.partition('.')[0]}_mutations"
    folders = [root / "src" / r for r in _packages(root / "src")] if layout == "src" else [root / r for r in roots]
    inits = _namespace_inits(root, [f for f in folders if f.is_dir()])
    site = (found.function, found.anchor, found.replacement, found.change)
    return Scaffold(root, layout, roots, catalog, rel.as_posix(), module, *site, namespace_inits=inits)


def write(scaffold: Scaffold, table: str | None = None) -> tuple[str, ...]:
    """Append the table to pyproject.toml (created if missing) and create the catalog, the gate and its
    conftest; returns the paths written. Nothing is written when any file to create already exists.

    `table`: an existing suite's adopted table (`verify.config.adopt`) in place of the scaffold's; then only the
    catalog is created, the suite being the gates."""
    root = scaffold.root
    created = {scaffold.catalog_file: scaffold.catalog_text()}
    created |= dict.fromkeys(scaffold.namespace_inits, _NAMESPACE_INIT)
    if scaffold.proposed_catalog:
        created[f"{scaffold.proposed_catalog.replace('.', '/')}.py"] = scaffold.proposed_text
    if table is None:
        created[GATE_FILE] = scaffold.gate_text()
        if not (root / GATE_CONFTEST).exists():
            created[GATE_CONFTEST] = scaffold.conftest_text()
    clashes = [rel for rel in created if (root / rel).exists()]
    if clashes:
        raise ScaffoldError(f"not overwriting {', '.join(clashes)}: move it away or write [tool.dflash] by hand")
    pyproject = root / "pyproject.toml"
    before = pyproject.read_text() if pyproject.is_file() else ""
    after = before + ("" if not before or before.endswith("\n") else "\n") + (table or scaffold.table())
    try:
        tomllib.loads(after)
    except tomllib.TOMLDecodeError as error:  # e.g. `tool` written as an inline table
        raise ScaffoldError(f"appending [tool.dflash] would break {pyproject} ({error}): add it by hand") from None
    for rel, text in created.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    pyproject.write_text(after)
    return ("pyproject.toml", *created)
