"""`dflash init` on a project that already has a pytest suite: find its test folders, collect the suite once (in
a process of its own) to learn which files cannot be collected in this environment, write a `[tool.dflash]`
that adopts the suite (every test a gate unless a marker is named, the failing files excluded). The check that
follows, the baseline run once as `dflash verify` would, is the run's (`verify.run.phases.pristine.check_baseline`):
this module writes configuration and imports nothing of the run.

The layout, the example mutation, the walk over the project's folders and the file writing are
`verify.config.scaffold`'s; this module adds what an existing suite needs. It never prints: the CLI renders what
it returns.
"""

from __future__ import annotations

import configparser
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verify.compat import tomllib
from verify.config.collect_probe import reason
from verify.config.kit_gates import statistical_gates
from verify.config.scaffold import GATES, Scaffold, ScaffoldError, walk_project
from verify.config.settings import ProjectConfig

__all__ = ["Adoption", "Suite", "collect", "find_suite", "project_config"]

_COLLECT_TIMEOUT_S = 600.0


@dataclass(frozen=True, slots=True)
class Suite:
    """Where a project's tests live: the folders (or root-level files) to adopt as `gates`."""

    paths: tuple[str, ...]
    found_by: str  # "testpaths" (the project's pytest configuration) or "test files"


def _is_test_file(path: Path) -> bool:
    return path.suffix == ".py" and (path.name.startswith("test_") or path.stem.endswith("_test"))


def _pyproject_pytest_options(root: Path) -> dict[str, Any]:
    """The project's `[tool.pytest.ini_options]` (what `testpaths` and `addopts` are read from); empty when
    pyproject.toml is absent, not valid TOML, or has no such table."""
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file():
        return {}
    try:
        options = tomllib.loads(pyproject.read_text()).get("tool", {}).get("pytest", {}).get("ini_options", {})
    except tomllib.TOMLDecodeError:
        return {}
    return options if isinstance(options, dict) else {}


def _testpaths(root: Path) -> list[str]:
    """The project's own pytest `testpaths` (pyproject.toml, pytest.ini, tox.ini, setup.cfg), if any."""
    paths = _pyproject_pytest_options(root).get("testpaths")
    if paths:
        return [paths] if isinstance(paths, str) else list(paths)
    for name, section in (("pytest.ini", "pytest"), ("tox.ini", "pytest"), ("setup.cfg", "tool:pytest")):
        parser = configparser.ConfigParser()
        try:
            parser.read(root / name)
        except configparser.Error:
            continue
        if parser.has_option(section, "testpaths"):
            return parser.get(section, "testpaths").split()
    return []


def find_suite(root: Path) -> Suite | None:
    """The project's test folders: its pytest `testpaths` where they exist, else the top-level folder (or root
    file) of every test file found, hidden folders and environments left out. None: the project has no tests."""
    root = Path(root).resolve()
    configured = [p for p in _testpaths(root) if (root / p).exists()]
    if configured:
        return Suite(tuple(configured), "testpaths")
    tops: set[str] = set()
    for here, subfolders, files in walk_project(root):
        if here != root and here.relative_to(root).parts[0] in tops:
            subfolders[:] = []  # inside a folder already adopted whole
            continue
        if any(_is_test_file(here / name) for name in files):
            relative = here.relative_to(root)
            tops.update([relative.parts[0]] if relative.parts else [n for n in files if _is_test_file(root / n)])
    return Suite(tuple(sorted(tops)), "test files") if tops else None


def _needed_args(root: Path) -> tuple[tuple[str, ...], str]:
    """pytest arguments every gate run needs, and why: a suite whose addopts spread it over pytest-xdist
    workers would run its tests outside the child that records them, so `-n 0` keeps them in it."""
    value = _pyproject_pytest_options(root).get("addopts", "")
    words = shlex.split(" ".join(value) if isinstance(value, list) else str(value))
    distributed = any(w in ("-n", "--numprocesses") or w.startswith(("-n", "--numprocesses=")) for w in words)
    if distributed and importlib.util.find_spec("xdist") is not None:
        return ("-n", "0"), "the project's addopts spread tests over pytest-xdist workers; each gate must run in " \
            "the child that records it"  # fmt: skip
    return (), ""


@dataclass(frozen=True, slots=True)
class Adoption:
    """What `dflash init` learnt of an existing suite, and the `[tool.dflash]` table that adopts it."""

    scaffold: Scaffold
    suite: Suite
    marker: str  # "" : every test is a gate
    gate_ids: tuple[str, ...]  # the tests the table selects, as collected here
    excluded: tuple[tuple[str, str], ...]  # (path relative to the root, why its collection failed)
    pytest_args: tuple[str, ...] = ()
    pytest_args_why: str = ""
    statistical: tuple[str, ...] = ()  # gates that call the gate kit's statistical checks (kit_gates)

    def table(self) -> str:
        s = self.scaffold
        lines = [
            "",
            "[tool.dflash]",
            "# Written by `dflash init`, adopting the existing pytest suite: every test under `gates` that",
            '# gate_marker selects is a gate (gate_marker = "" selects them all). The catalog registers the bugs',
            "# the gates must catch; `dflash verify` runs each one against them.",
            f"mutation_modules = {json.dumps(s.catalogs)}",
            f"source_roots = {json.dumps(list(s.source_roots))}",
            f"gates = {json.dumps(list(self.suite.paths))}",
            f"gate_marker = {json.dumps(self.marker)}",
        ]
        if self.excluded:
            lines.append("# Test files whose collection fails in this environment (the reason beside each):")
            lines.append("exclude = [")
            lines += [f"    {json.dumps(path)},  # {why.replace(chr(10), ' ')}" for path, why in self.excluded]
            lines.append("]")
        if self.statistical:
            lines.append("# Gates that call the gate kit's statistical checks: a red only in them is confirmed on an")
            lines.append("# independent seed (docs/concepts/sampling-gates.md).")
            lines.append(f"statistical_gates = {json.dumps(list(self.statistical))}")
        if self.pytest_args:
            lines.append(f"# {self.pytest_args_why}")
            lines.append(f"pytest_args = {json.dumps(list(self.pytest_args))}")
        lines.append(
            'invariant_errors = []  # your engine\'s named check exceptions, e.g. "mypkg.errors.InvariantError"'
        )
        return "\n".join(lines) + "\n"


def project_config(scaffold: Scaffold, suite: Suite | None) -> ProjectConfig:
    """The settings the written table will give (before it is written): what the proposals are scanned with."""
    if suite is None:
        suite = Suite((GATES,), "scaffold")
    return ProjectConfig(
        root=scaffold.root, mutation_modules=(scaffold.catalog,), gates=suite.paths, source_roots=scaffold.source_roots
    )


def collect(scaffold: Scaffold, suite: Suite, marker: str = "") -> Adoption:
    """Collect the suite as the gate runs will see it (the source roots on sys.path, no bytecode written into
    the project) and adopt it: a file whose collection fails is excluded with its reason. Raises ScaffoldError
    when the suite cannot be collected at all or nothing is left to select."""
    root = scaffold.root
    pytest_args, why = _needed_args(root)
    import_paths = [str((root / rel).resolve()) for rel in project_config(scaffold, suite).import_paths]
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env["PYTHONPATH"] = os.pathsep.join([*import_paths, *filter(None, [os.environ.get("PYTHONPATH", "")])])
    with tempfile.TemporaryDirectory(prefix="dflash-init-") as tmp:
        out = Path(tmp) / "collected.json"
        marker_args = ["-m", marker] if marker else []
        command = [sys.executable, "-m", "verify.config.collect_probe", str(out), *suite.paths, *marker_args]
        command += ["--rootdir", str(root), *pytest_args]
        try:
            done = subprocess.run(
                command, cwd=root, env=env, capture_output=True, text=True, timeout=_COLLECT_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired:
            raise ScaffoldError(f"collecting the suite took over {_COLLECT_TIMEOUT_S:.0f}s: write [tool.dflash] "
                                "by hand (docs: reference/configuration.md)") from None  # fmt: skip
        if not out.is_file():
            tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
            raise ScaffoldError("pytest could not collect the suite:\n  " + "\n  ".join(tail))
        found = json.loads(out.read_text())
    errors: dict[str, str] = found["errors"]
    if "." in errors or found["exit"] in (3, 4):  # an internal or a usage error: pytest refused the session
        said = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("ERROR:")]
        refusal = errors.get(".") or (said[-1].removeprefix("ERROR:").strip() if said else reason(done.stderr))
        raise ScaffoldError(
            f"pytest could not collect the suite (exit {found['exit']}: {refusal}): fix it, or write [tool.dflash] "
            "by hand (docs: reference/configuration.md)"
        )
    excluded = tuple(sorted((path.split("::")[0], why) for path, why in errors.items()))
    gate_ids = tuple(found["ids"])
    if not gate_ids:
        where = f"marked {marker!r} " if marker else ""
        raise ScaffoldError(
            f"no test {where}collected under {', '.join(suite.paths)}"
            + (f" ({len(excluded)} files fail to collect)" if excluded else "")
            + ": nothing to adopt as gates"
        )
    statistical = statistical_gates(root, [gate.split("::")[0] for gate in gate_ids])
    return Adoption(scaffold, suite, marker, gate_ids, excluded, pytest_args, why, statistical)
