"""A source root of "." is the whole project: the self-check's no-op mutant serves every source file through the
import hook, as it does for a named root."""

from __future__ import annotations

from pathlib import Path

import pytest

from verify.config.settings import in_root, load_config
from verify.run.phases.pristine import _sources


@pytest.mark.parametrize(
    ("rel", "root", "inside"),
    [
        ("engine/core.py", "engine", True),
        ("engine/core.py", "engine/", True),
        ("engine/core.py", "./engine", True),
        ("engineer/core.py", "engine", False),
        ("engine.py", "engine.py", True),
        ("engine/core.py", ".", True),
        ("top.py", ".", True),
        ("top.py", "./", True),
        ("top.py", "engine", False),
    ],
)
def test_a_file_is_in_a_root(rel: str, root: str, inside: bool) -> None:
    assert in_root(rel, root) is inside


def _project(tmp_path: Path, roots: str) -> Path:
    (tmp_path / "engine").mkdir()
    (tmp_path / "engine" / "__init__.py").write_text("")
    (tmp_path / "engine" / "core.py").write_text("def step(x):\n    return x + 1\n")
    (tmp_path / "helpers.py").write_text("def twice(x):\n    return 2 * x\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_gate.py").write_text("def test_one():\n    assert True\n")
    (tmp_path / "pyproject.toml").write_text(
        f'[tool.dflash]\nmutation_modules = ["catalog"]\ngates = ["tests"]\nsource_roots = {roots}\n'
    )
    return tmp_path


def test_the_whole_project_as_a_root_serves_every_source(tmp_path: Path) -> None:
    served = {rel for rel, _ in _sources(load_config(_project(tmp_path, '["."]')))}
    assert {"engine/__init__.py", "engine/core.py", "helpers.py"} <= served


def test_a_named_root_serves_only_its_files(tmp_path: Path) -> None:
    served = {rel for rel, _ in _sources(load_config(_project(tmp_path, '["engine"]')))}
    assert served == {"engine/__init__.py", "engine/core.py"}
