"""`propose`: scan a project's source roots, check every proposal (applied, parsed, imported in a private copy),
and write those that pass as a catalog module. Returns a `ProposalRun`; never prints.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from verify.config.layout import module_name
from verify.config.scaffold import walk_project
from verify.config.settings import ProjectConfig
from verify.propose.check import import_failures
from verify.propose.edit import BugClass
from verify.propose.scanner import Proposal, Refused, scan_text
from verify.propose.writer import catalog_text, names, write_catalog

__all__ = ["DEFAULT_OUTPUT", "ProposalRun", "propose", "source_files"]

DEFAULT_OUTPUT = "proposed_mutations.py"


@dataclass(frozen=True, slots=True)
class ProposalRun:
    """What `dflash mutations propose` found, proposed, refused and wrote."""

    proposals: tuple[Proposal, ...]
    names: tuple[str, ...]
    refused: tuple[Refused, ...]
    num_files: int
    written: str = ""  # the catalog file, relative to the root ("" when nothing was proposed or written)
    module: str = ""  # its import name, for mutation_modules
    by_class: dict[str, int] = field(default_factory=dict)


def _is_observer(text: str) -> bool:
    """The module defines an observer of `verify explain`'s protocol: a class with `workloads` in its body and a
    `run(self, workload, emit)` method. Such a module drives the engine and records it; mutating it breaks the
    instrument, not the engine. Read by shape, because `dflash init` scans before any `observe` is configured."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        names = {
            t.id
            for s in node.body
            if isinstance(s, ast.Assign | ast.AnnAssign)
            for t in (s.targets if isinstance(s, ast.Assign) else [s.target])
            if isinstance(t, ast.Name)
        }
        runs = [s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "run" and len(s.args.args) == 3]
        if "workloads" in names and runs:
            return True
    return False


def source_files(config: ProjectConfig) -> list[str]:
    """The Python files under the source roots (posix, relative to the root), tests and hidden folders left out, and
    the observer's module (`[tool.dflash] observe`, or any module that defines a class of the observer protocol):
    it drives the engine for `verify explain`, it is not the engine. A source root of "." walks the project as
    `dflash init` does: an environment inside it (`venv/`, any folder with a pyvenv.cfg), `build/`, `dist/` and
    `node_modules/` are never entered, so no installed package is proposed as the engine."""
    observer = config.observe.partition(":")[0]
    found: set[str] = set()
    for rel in config.source_roots:
        path = config.root / rel
        candidates = [path] if path.suffix == ".py" else sorted(_python_files(path))
        for file in candidates:
            parts = file.relative_to(config.root).parts
            if any(p.startswith(".") or p in ("__pycache__", "tests", "test") for p in parts[:-1]):
                continue
            if file.name.startswith("test_") or file.name == "conftest.py":
                continue
            rel = file.relative_to(config.root).as_posix()
            if observer and module_name(rel, config.root, config.import_paths) == observer:
                continue
            if not _is_observer(file.read_text(errors="replace")):
                found.add(rel)
    return sorted(found)


def _python_files(folder: Path) -> list[Path]:
    return [here / name for here, _, files in walk_project(folder) for name in files if name.endswith(".py")]


def propose(
    config: ProjectConfig,
    output: str = DEFAULT_OUTPUT,
    classes: tuple[BugClass, ...] = tuple(BugClass),
    write: bool = True,
) -> ProposalRun:
    """Scan, check and (unless `write` is False) write the proposed catalog."""
    files = source_files(config)
    proposals: list[Proposal] = []
    refused: list[Refused] = []
    for rel in files:
        found, left = scan_text((config.root / rel).read_text(), rel, classes)
        proposals += found
        refused += left
    failures = import_failures(config.root, config.import_paths, proposals)
    refused += [Refused(p.bug_class, p.file, p.line, failures[i]) for i, p in enumerate(proposals) if i in failures]
    kept = tuple(p for i, p in enumerate(proposals) if i not in failures)
    written, module = "", ""
    if kept and write:
        path = write_catalog(config.root, output, catalog_text(kept, config.source_roots))
        written = path.relative_to(config.root).as_posix()
        module = ".".join(Path(written).with_suffix("").parts)
    by_class = {c.value: sum(p.bug_class is c for p in kept) for c in classes}
    return ProposalRun(kept, tuple(names(kept)), tuple(refused), len(files), written, module, by_class)
