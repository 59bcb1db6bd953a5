"""The architecture as a test: import directions between the rooms, no import circle, small modules.

Imports are read from the source with `ast` (every `import`/`from` statement, at any depth, including
ones under `if TYPE_CHECKING:`), so a lazy import inside a function counts like a top-level one.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("runner", "verify", "mutations")
# A guideline, not a cap: a module's size follows its noun. Past SOFT_LINES it is usually two nouns, so a longer
# module says why on a `# size: REASON` line of its own (a file split only to get under a number is worse).
SOFT_LINES = 400


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "fixtures" in path.relative_to(ROOT).parts[:2] and package == "runner":
                continue
            found[_module_name(path)] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The project module an import names (its longest known prefix), or None for third-party code."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(module: str) -> set[str]:
    path = MODULES[module]
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    resolved = {_resolve(name) for name in names}
    return {name for name in resolved if name and name != module}


GRAPH = {module: _imports(module) for module in MODULES}


def _room(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "verify" and len(parts) > 1 else parts[0]


# (importer room prefix, forbidden imported room prefixes, why)
RULES = [
    ("runner", ("verify", "mutations"), "the runner knows nothing of the harness or the catalog"),
    ("mutations", ("runner", "verify.run", "verify.report", "verify.cli", "verify.sweep", "verify.fixtures"),
     "a catalog imports only the mutation record"),
    ("verify.report", ("verify.run", "verify.cli", "verify.sweep"), "the verdict model is a leaf below the run"),
    ("verify.mutation", ("verify.run", "verify.report", "verify.cli", "verify.sweep", "verify.fixtures", "runner"),
     "the mutation record is a leaf"),
    ("verify.fixtures", ("verify.run", "verify.cli", "verify.sweep"), "fixtures stand beside the run"),
    ("verify.run", ("verify.cli", "verify.sweep"), "the run never reaches up into the CLI or the sweep"),
    # Shared services below the run, observe and the sweep: configuration and the sandbox reach into none of them.
    ("verify.config", ("verify.run", "verify.sandbox", "verify.observe", "verify.sweep", "verify.cli"),
     "configuration is below the run, observe and the sweep"),
    ("verify.sandbox", ("verify.run", "verify.config", "verify.mutation", "verify.observe", "verify.sweep",
                        "verify.cli"), "the sandbox stands alone: the security boundary is one unit"),
    ("verify.mutation.apply", ("verify.config", "verify.sandbox", "verify.run", "verify.report"),
     "applying a mutation knows no run or report"),
    # Inside the run, imports point down: phases -> execution -> child.
    ("verify.run.harness_digest", ("verify.run.child", "verify.run.execution", "verify.run.phases"),
     "the harness digest is a leaf"),
    ("verify.run.child", ("verify.run.execution", "verify.run.phases"), "a child knows nothing of who started it"),
    ("verify.run.execution", ("verify.run.phases",), "an executor knows nothing of phases or verdicts"),
    ("verify.sweep", ("verify.cli",), "the sweep never reaches up into the CLI"),
    ("verify.gatekit", ("runner", "mutations", "verify.run", "verify.report", "verify.cli", "verify.sweep",
                        "verify.fixtures", "verify.observe"), "the gate kit is engine-agnostic: tensors and callables"),
    ("verify.templates", ("runner", "verify.run", "verify.report", "verify.cli", "verify.sweep", "verify.fixtures",
                          "verify.gatekit"), "a template knows source text and the mutation record"),
]  # fmt: skip


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


@pytest.mark.parametrize(("importer", "forbidden", "why"), RULES, ids=[rule[0] for rule in RULES])
def test_import_directions(importer: str, forbidden: tuple[str, ...], why: str) -> None:
    bad = sorted(
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        if _within(module, importer)
        for target in targets
        if any(_within(target, prefix) for prefix in forbidden)
    )
    assert not bad, f"{why}: " + "; ".join(bad)


def test_only_the_entry_point_imports_the_cli() -> None:
    bad = sorted(
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        if not _within(module, "verify.cli") and module != "verify.__main__"
        for target in targets
        if _within(target, "verify.cli")
    )
    assert not bad, "; ".join(bad)


def _cycle() -> list[str] | None:
    """One import circle among project modules (depth-first search), or None."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = finished
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for target in sorted(GRAPH[module]):
            # A package's __init__ importing its own submodules is how packages work, not a circle.
            if _within(target, module) or _within(module, target):
                continue
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (found := visit(target)):
                return found
        path.pop()
        state[module] = 2
        return None

    for module in sorted(GRAPH):
        if module not in state and (found := visit(module)):
            return found
    return None


def test_no_import_circle() -> None:
    cycle = _cycle()
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_the_checker_sees_a_circle_and_a_wrong_direction() -> None:
    """The checks above can fail: a planted circle and a planted upward import are found."""
    saved = dict(GRAPH)
    try:
        GRAPH["runner.engine"] = {*GRAPH["runner.engine"], "verify.run.phases.run"}
        GRAPH["verify.run.phases.run"] = {*GRAPH["verify.run.phases.run"], "runner.engine"}
        assert _cycle() is not None
        with pytest.raises(AssertionError, match="runner.engine imports verify.run.phases.run"):
            test_import_directions("runner", ("verify",), "planted")
        sandbox = "verify.sandbox.confine"
        GRAPH[sandbox] = {*GRAPH[sandbox], "verify.config.settings"}
        with pytest.raises(AssertionError, match="verify.sandbox.confine imports verify.config.settings"):
            test_import_directions(*next(rule for rule in RULES if rule[0] == "verify.sandbox"))
        child = "verify.run.child.job"
        GRAPH[child] = {*GRAPH[child], "verify.run.execution.fork"}
        with pytest.raises(AssertionError, match="verify.run.child.job imports verify.run.execution.fork"):
            test_import_directions(*next(rule for rule in RULES if rule[0] == "verify.run.child"))
    finally:
        GRAPH.clear()
        GRAPH.update(saved)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_size(module: str) -> None:
    lines = MODULES[module].read_text().splitlines()
    reasons = [line for line in lines if line.startswith("# size: ") and len(line) > len("# size: ") + 10]
    assert len(lines) <= SOFT_LINES or reasons, (
        f"{module} has {len(lines)} lines; a module past {SOFT_LINES} is usually two nouns: split it by noun, or say "
        "why it is one on a `# size: REASON` line"
    )


RUN_PACKAGES = ("child", "execution", "phases")
MAX_FLAT_RUN_MODULES = 4


def test_the_run_is_laid_out_by_concern() -> None:
    """verify/run/ holds its sub-packages and at most four flat modules beside them."""
    run = ROOT / "verify" / "run"
    packages = sorted(p.name for p in run.iterdir() if p.is_dir() and (p / "__init__.py").is_file())
    assert set(RUN_PACKAGES) <= set(packages), packages
    flat = sorted(path.name for path in run.glob("*.py") if path.name != "__init__.py")
    assert len(flat) <= MAX_FLAT_RUN_MODULES, f"verify/run/ has {len(flat)} flat modules: {flat}"


def test_every_room_says_what_it_owns() -> None:
    rooms = ("verify.cli", "verify.run", "verify.config", "verify.sandbox", "verify.report", "verify.fixtures")
    rooms = (*rooms, "verify.sweep", "verify.gatekit")
    for room in (*rooms, *(f"verify.run.{package}" for package in RUN_PACKAGES)):
        doc = ast.get_docstring(ast.parse(MODULES[room].read_text()))
        assert doc and len(doc) > 40, f"{room}/__init__.py must open with a docstring saying what the room owns"


def _package_inits() -> list[Path]:
    return sorted(path for module, path in MODULES.items() if path.name == "__init__.py")


def _unmapped(init: Path) -> list[str]:
    """The modules and sub-packages of `init`'s package that its docstring (the package's map) never names."""
    doc = ast.get_docstring(ast.parse(init.read_text())) or ""
    package = init.parent
    members = [p.stem for p in package.glob("*.py") if p.stem not in ("__init__", "__main__")]
    members += [p.name for p in package.iterdir() if (p / "__init__.py").is_file()]
    # named as a word of its own: `record`, (record), record.py, cluster/ all count; recorder does not name record
    return sorted(name for name in members if not re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", doc))


@pytest.mark.parametrize("init", _package_inits(), ids=lambda path: _module_name(path))
def test_every_package_maps_its_modules(init: Path) -> None:
    missing = _unmapped(init)
    assert not missing, (
        f"{_module_name(init)}/__init__.py's docstring names no {', '.join(missing)}: add each to its map"
    )


def test_the_map_check_sees_a_missing_module(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text('"""The map: `recorder` (what it records)."""\n')
    (package / "recorder.py").write_text("")
    (package / "record.py").write_text("")
    assert _unmapped(package / "__init__.py") == ["record"]


def test_the_layout_page_names_every_package() -> None:
    page = (ROOT / "docs" / "reference" / "layout.md").read_text()
    missing = [
        name for name in (_module_name(init).replace(".", "/") + "/" for init in _package_inits()) if name not in page
    ]
    assert not missing, f"docs/reference/layout.md never mentions {', '.join(missing)}"
