"""The digest of the harness's own code: every module of the `verify` package that decides verdicts.

Which modules those are is derived from the code, never listed by hand: every module of the run (`verify.run`: its
phases, executors and children reach the verdicts, and any of them may be started by name, as a Ray node's server
is), of its configuration (`verify.config`) and of the sandbox the children run in (`verify.sandbox`) and of the
gate kit (`verify.gatekit`: the gates call it and its comparisons decide a gate's outcome, yet no project file
holds it) and, transitively, every module of `verify` one of them imports, read from their import statements with
`ast` (those inside functions and under `TYPE_CHECKING` included, and a string that names a module, as `python -m`
or `importlib` takes it), with the packages above each (their `__init__` runs on import). So the verdict model and
its decoder, how a crash is classified (`verify.report.crashes`), the seeds a confirmation uses (`verify.seeds`)
and the mutation record are covered today, and a module the verdict code starts importing tomorrow is covered with
no edit here; a renderer the run never imports (the HTML, the terminal) is not, so a change to how a report looks
re-runs nothing.

The result cache keys every entry on the digest (a change to how verdicts are reached re-runs everything) and
the Ray preflight compares it across nodes (a node running other harness code would reach other verdicts). A
leaf of `verify.run`: it reads files and imports nothing of the run.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from pathlib import Path

__all__ = ["harness_digest", "harness_digest_bytes", "harness_modules"]

_PACKAGE = Path(__file__).parents[1]  # the `verify` package this module belongs to
_ROOTS = ("run", "config", "sandbox", "gatekit")  # the sub-packages whose every module is verdict code


def _module_files(package: Path) -> dict[str, Path]:
    """Every module of `package` by its dotted name (`verify.report.crashes`; a package by its `__init__.py`)."""
    found = {}
    for file in sorted(package.rglob("*.py")):
        parts = file.relative_to(package.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = file
    return found


@functools.cache
def _named(module: str, is_package: bool, source: bytes) -> frozenset[str]:
    """Every dotted name `module` (with this source) imports, or names whole in a string: a module's imports are
    read once per process and content (a run digests its harness at its start and end)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package that holds `module` (or is it), up level - 1
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            # `from verify.report import crashes` imports the module verify.report.crashes
            found.update([base, *(f"{base}.{alias.name}" for alias in node.names)])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and not node.value.endswith(".__main__"):
            # A string naming a package's `__main__` names the program (the run asks whether it is the one
            # running), not code the run imports: the CLI behind it decides no verdict.
            found.add(node.value)
    return frozenset(found)


def _covered(package: Path) -> dict[str, bytes]:
    """The source of every module that decides verdicts, by dotted name, in name order: every module of
    `package`'s run and gate kit and everything of `package` they import, transitively, with the packages above
    each."""
    known = _module_files(package)
    roots = [f"{package.name}.{root}" for root in _ROOTS]
    todo = [name for name in known if any(name == root or name.startswith(f"{root}.") for root in roots)]
    covered: dict[str, bytes] = {}
    while todo:
        module = todo.pop()
        if module in covered:
            continue
        covered[module] = source = known[module].read_bytes()
        parts = module.split(".")
        todo += [name for i in range(1, len(parts)) if (name := ".".join(parts[:i])) in known]
        todo += [name for name in _named(module, known[module].name == "__init__.py", source) if name in known]
    return dict(sorted(covered.items()))


def harness_modules(package: Path = _PACKAGE) -> dict[str, Path]:
    """The modules that decide verdicts (see the module's docstring), by dotted name, in name order."""
    files = _module_files(package)
    return {name: files[name] for name in _covered(package)}


def harness_digest_bytes(package: Path = _PACKAGE) -> bytes:
    """sha256 over the name and bytes of every module that decides verdicts."""
    digest = hashlib.sha256()
    for name, source in _covered(package).items():
        digest.update(name.encode() + b"\0" + hashlib.sha256(source).digest())
    return digest.digest()


def harness_digest() -> str:
    """The digest as hex (what a Ray node's probe reports)."""
    return harness_digest_bytes().hex()
