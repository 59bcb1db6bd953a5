"""The public API is one import point: every name `verify` exports is importable, lazy and documented on
docs/reference/api.md, and the docs, the examples and the catalog import nothing else of dflash-verify."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import verify

ROOT = Path(__file__).resolve().parents[2]
API_PAGE = ROOT / "docs" / "reference" / "api.md"
# A documented name is the first cell of a table row: | `name` | what it is |
DOCUMENTED = re.compile(r"^\| `(?P<name>\w+)` \|", re.MULTILINE)
# An import of a dflash-verify module below the public one, as a code block shows it (text blocks need not parse).
PRIVATE_IMPORT = re.compile(r"^\s*(?:from\s+(verify\.[\w.]+)\s+import\b|import\s+(verify\.[\w.]+))", re.MULTILINE)
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _private_imports(code: str) -> list[str]:
    return [match.group(1) or match.group(2) for match in PRIVATE_IMPORT.finditer(code)]


def _python_private_imports(path: Path) -> list[str]:
    """Every `verify.*` module a Python file imports, at any depth (a lazy import inside a function counts)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("verify."):
            found.append(node.module or "")
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.startswith("verify.")]
    return found


def _user_python_files() -> list[Path]:
    files = sorted((ROOT / "examples").rglob("*.py")) + sorted((ROOT / "mutations").glob("*.py"))
    return [path for path in files if not any(part.startswith(".") for part in path.relative_to(ROOT).parts)]


def _pages() -> list[Path]:
    return [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md", *sorted((ROOT / "examples").rglob("*.md"))]


@pytest.mark.parametrize("name", verify.__all__)
def test_every_public_name_is_importable_and_documented(name: str) -> None:
    assert getattr(verify, name) is not None
    assert name in {m.group("name") for m in DOCUMENTED.finditer(API_PAGE.read_text("utf-8"))}, (
        f"verify.{name} is public but has no row on docs/reference/api.md"
    )


def test_the_page_documents_only_public_names() -> None:
    documented = [m.group("name") for m in DOCUMENTED.finditer(API_PAGE.read_text("utf-8"))]
    assert sorted(documented) == sorted(set(documented)), "a name is documented twice"
    assert set(documented) == set(verify.__all__)


def test_what_runs_is_what_type_checkers_see() -> None:
    """`__all__`, the lazy table and the TYPE_CHECKING imports name the same objects from the same modules."""
    tree = ast.parse((ROOT / "verify" / "__init__.py").read_text("utf-8"))
    checked = {
        (alias.asname or alias.name): (node.module, alias.name)
        for block in tree.body
        if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"
        for node in ast.walk(block)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert checked == verify._EXPORTS
    assert sorted(verify.__all__) == sorted(verify._EXPORTS)
    for name, (module, attribute) in verify._EXPORTS.items():
        assert getattr(verify, name) is getattr(__import__(module, fromlist=[attribute]), attribute), name


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'assert_everything'"):
        verify.assert_everything  # noqa: B018


def test_importing_the_record_loads_nothing_else() -> None:
    """A catalog's `from verify import Mutation, register` loads the record alone: no torch, no gate kit."""
    code = (
        "import json, sys\nfrom verify import Mutation, register\nimport mutations.sampling\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('verify', 'torch', 'runner'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert json.loads(done.stdout) == ["verify", "verify.mutation"]


@pytest.mark.parametrize("page", _pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_docs_code_imports_only_the_public_api(page: Path) -> None:
    blocks = FENCE.findall(page.read_text("utf-8"))
    bad = sorted({module for block in blocks for module in _private_imports(block)})
    assert not bad, f"{page.relative_to(ROOT)} shows imports of private modules {bad}: import from `verify`"


@pytest.mark.parametrize("path", _user_python_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_examples_and_catalog_import_only_the_public_api(path: Path) -> None:
    bad = _python_private_imports(path)
    assert not bad, f"{path.relative_to(ROOT)} imports private modules {bad}: import from `verify`"


def test_gates_take_public_names_from_the_public_api() -> None:
    """This repository's gates may reach private helpers, but a public name comes from `verify`."""
    public = set(verify.__all__)
    bad = []
    for path in sorted((ROOT / "tests" / "gates").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("verify."):
                bad += [f"{path.name}: {alias.name} from {node.module}" for alias in node.names if alias.name in public]
    assert not bad, "; ".join(bad)


def test_the_checks_see_a_private_import(tmp_path: Path) -> None:
    """The scanners above can fail: a planted private import is found in a text block and in a Python file."""
    planted = tmp_path / "catalog.py"
    planted.write_text("from verify import register\n\n\ndef late():\n    from verify.mutation import Mutation\n")
    assert _python_private_imports(planted) == ["verify.mutation"]
    block = (
        "```text\nfrom verify.gatekit.rule import law_power\nimport verify.seeds as s\nfrom verify import reseed\n```\n"
    )
    assert _private_imports(FENCE.findall(block)[0]) == ["verify.gatekit.rule", "verify.seeds"]
    assert _private_imports("from verify import Mutation\nobserve = 'verify.observe.x:make'\n") == []
