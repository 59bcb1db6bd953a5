"""`dflash verify` on users' projects: generated projects in flat, src/, several-root, single-module and
namespace-package layouts run through the real CLI (a subprocess), every verdict as expected; the catalog is
always the project's own, and a configuration that could only produce false survivals is exit 2.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DFLASH = [sys.executable, "-m", "verify"]

OPS = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n\n\ndef neg(a):\n    return -a\n"
FMT = "def label(x):\n    return f'<{x}>'\n"

# The catalog every layout gets (FILE is the ops module's path in that layout): one of each verdict a user
# meets first, and a declared survivor with its reason.
CATALOG = """\
from verify.mutation import Mutation, register

register(
    Mutation("add-off-by-one", "sum off by one", "{ops}", "return a + b", "return a + b + 1"),
    Mutation("mul-adds", "wrong operator", "{ops}", "return a * b", "return a + b"),
    Mutation("neg-identity", "negation lost (no gate checks neg)", "{ops}", "return -a", "return a",
             expect="survives", reason="known gap: no gate calls neg yet (issue 1)"),
)
"""
EXTRA = """
register(Mutation("label-brackets", "wrong brackets", "{fmt}", "f'<{{x}}>'", "f'[{{x}}]'"))
"""

GATES = """\
import pytest
from {pkg} import add, mul
{extra_import}

@pytest.mark.gate
def test_add():
    assert add(2, 3) == 5


@pytest.mark.gate
def test_mul():
    assert mul(4, 3) == 12
{extra_test}

def test_not_a_gate():
    assert True
"""
EXTRA_TEST = "\n\n@pytest.mark.gate\ndef test_label():\n    assert label(3) == '<3>'\n"

PYPROJECT = """\
[tool.pytest.ini_options]
addopts = "-q -p no:cacheprovider"
markers = ["gate: a gate", "release: a release gate"]

[tool.dflash]
mutation_modules = ["calc_mutations"]
source_roots = {roots}
gates = ["tests"]
jobs = 2
preload = []
invariant_errors = []
timeout_min_s = 20.0
"""

# name: (files relative to the root, source_roots, ops module path, import for the gates, fmt module path)
LAYOUTS = {
    "flat": ({"calc/__init__.py": "from calc.ops import add, mul, neg\n", "calc/ops.py": OPS}, ["calc"],
             "calc/ops.py", "calc", None),
    "src": ({"src/calc/__init__.py": "from calc.ops import add, mul, neg\n", "src/calc/ops.py": OPS}, ["src"],
            "src/calc/ops.py", "calc", None),
    "src-package-root": ({"src/calc/__init__.py": "", "src/calc/ops.py": OPS}, ["src/calc"], "src/calc/ops.py",
                         "calc.ops", None),
    "single-module": ({"ops.py": OPS}, ["ops.py"], "ops.py", "ops", None),
    "namespace-package": ({"src/calc/ops.py": OPS}, ["src"], "src/calc/ops.py", "calc.ops", None),
    "several-roots": ({"src/calc/__init__.py": "", "src/calc/ops.py": OPS, "lib/fmt/__init__.py": "",
                       "lib/fmt/text.py": FMT}, ["src", "lib"], "src/calc/ops.py", "calc.ops", "lib/fmt/text.py"),
}  # fmt: skip

EXPECTED = {"add-off-by-one": "killed", "mul-adds": "killed", "neg-identity": "survived"}


def make_project(root: Path, layout: str) -> Path:
    files, roots, ops, pkg, fmt = LAYOUTS[layout]
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "tests").mkdir()
    extra_import = "from fmt.text import label" if fmt else ""
    (root / "tests" / "test_calc.py").write_text(
        GATES.format(pkg=pkg, extra_import=extra_import, extra_test=EXTRA_TEST if fmt else "")
    )
    (root / "calc_mutations.py").write_text(CATALOG.format(ops=ops) + (EXTRA.format(fmt=fmt) if fmt else ""))
    (root / "pyproject.toml").write_text(PYPROJECT.format(roots=json.dumps(roots)))
    return root


def dflash(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        [*DFLASH, *args, "--project", str(root)], capture_output=True, text=True, env=env, timeout=600, check=False
    )


def verdicts(report: Path) -> dict[str, str]:
    return {m["name"]: m["status"] for m in json.loads(report.read_text())["mutations"]}


@pytest.mark.slow
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_every_layout_gets_the_expected_verdicts(tmp_path: Path, layout: str) -> None:
    root = make_project(tmp_path / "project", layout)
    done = dflash(root, "verify", "--json", str(tmp_path / "report.json"))
    assert done.returncode == 0, done.stdout + done.stderr  # the declared survivor does not fail the run
    expected = dict(EXPECTED, **({"label-brackets": "killed"} if LAYOUTS[layout][4] else {}))
    assert verdicts(tmp_path / "report.json") == expected
    report = json.loads((tmp_path / "report.json").read_text())
    reason = "known gap: no gate calls neg yet (issue 1)"
    assert report["expected_survivors"] == [{"name": "neg-identity", "reason": reason}]
    assert re.search(r"neg-identity\s+survived", done.stdout), done.stdout  # its row in the matrix


def test_a_declared_survivor_that_is_killed_is_news_not_a_failure(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project", "flat")
    gates = root / "tests" / "test_calc.py"
    gates.write_text(gates.read_text() + "\n\n@pytest.mark.gate\ndef test_neg():\n    from calc import neg\n"
                     "    assert neg(2) == -2\n")  # fmt: skip
    done = dflash(root, "verify", "--json", str(tmp_path / "report.json"))
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert verdicts(tmp_path / "report.json")["neg-identity"] == "killed"
    assert report["surprises"] == ["neg-identity"]


def test_gates_that_import_the_working_tree_are_a_config_error_not_survivals(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project", "flat")
    # A gate that loads the module by its path in the working tree: the private copy is never imported.
    (root / "tests" / "test_calc.py").write_text(
        "import importlib.util\nimport pytest\n"
        f"spec = importlib.util.spec_from_file_location('ops_by_path', {str(root / 'calc' / 'ops.py')!r})\n"
        "ops = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(ops)\n\n\n"
        "@pytest.mark.gate\ndef test_add():\n    assert ops.add(2, 3) == 5\n"
    )
    done = dflash(root, "verify")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "never imported the source roots (calc)" in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("marker", "gates", "message"),
    [
        ("release", '["tests"]', "carries the pytest marker 'release'"),
        ("gate", '["tests/none"]', "path 'tests/none' does not exist"),
    ],
)
def test_no_selected_gate_names_the_marker_and_the_paths(tmp_path: Path, marker: str, gates: str, message: str) -> None:
    root = make_project(tmp_path / "project", "flat")
    text = (root / "pyproject.toml").read_text().replace('gates = ["tests"]', f"gates = {gates}")
    (root / "pyproject.toml").write_text(text + f'gate_marker = "{marker}"\n')
    done = dflash(root, "verify")
    assert done.returncode in (2, 3), done.stdout + done.stderr
    output = " ".join((done.stdout + done.stderr).split())
    assert message in output
    if marker == "release":
        assert "tests" in output and "gate_marker" in output


def _cli_verify(root: Path):
    from typer.testing import CliRunner

    from verify.cli.verify import verify_app

    return CliRunner().invoke(verify_app, ["--project", str(root)])


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: (r / "pyproject.toml").write_text("[project]\nname = 'x'\n"),
         "has no [tool.dflash] table: run `dflash init`"),
        (lambda r: _set(r, "mutation_modules", None), "names no mutation_modules"),
        (lambda r: _set(r, "mutation_modules", ["json"]), "mutation module 'json' is not part of the project"),
        (lambda r: _set(r, "mutation_modules", ["torch"]), "mutation module 'torch' is not part of the project"),
        (lambda r: _set(r, "mutation_modules", ["nowhere"]), "cannot import mutation module 'nowhere': not found"),
        (lambda r: (r / "calc_mutations.py").write_text("raise RuntimeError('boom')\n"),
         "'calc_mutations' failed to import: RuntimeError: boom"),
        (lambda r: (r / "calc_mutations.py").write_text("import sys\nsys.exit(3)\n"), "failed to import: SystemExit"),
        (lambda r: (r / "calc_mutations.py").write_text("X = 1\n"), "'calc_mutations' registered no mutation"),
        (lambda r: _replace(r, "calc_mutations.py", '"calc/ops.py"', '"tests/test_calc.py"'),
         "mutates tests/test_calc.py, outside [tool.dflash] source_roots (calc)"),
        (lambda r: _move(r, "calc", "calc-v2"), "does not import from the source roots"),
        (lambda r: (r / "calc" / "__init__.py").unlink(),
         "a folder without __init__.py that the gates import as `calc`"),
        (lambda r: _set(r, "exclude", ["tests/test_none_*.py"]), "exclude: 'tests/test_none_*.py' matches nothing"),
        (lambda r: _set(r, "source_roots", ["calc", "lib"]), "source_roots: path 'lib' does not exist"),
        (lambda r: _set(r, "gates", ["tests/test_none.py"]), "gates: path 'tests/test_none.py' does not exist"),
        (lambda r: _set(r, "observe", "nowhere_obs:make"), "observe = 'nowhere_obs:make': module 'nowhere_obs' "
         "does not import"),
        (lambda r: _observer(r, "obs.py", "obs:make"), "observe = 'obs:make': obs.py is outside the copied folders "
         "(calc, tests), so the private copies that are observed lack it: move it under a source root"),
        (lambda r: _observer(r, "calc/obs.py", "calc.obs:build"), "calc.obs defines no 'build'"),
        (lambda r: _observer(r, "calc/obs.py", "calc.nope:make"), "module 'calc.nope' does not exist"),
        (lambda r: _observer(r, "calc/obs.py", "calc.obs:LIMIT"), "calc.obs.LIMIT is a value, not callable"),
        (lambda r: _set(r, "count", "all"), "count must be one of killed, detected, got 'all'"),
    ],
    ids=["no-table", "no-mutation-modules", "stdlib", "torch", "missing", "crashes", "exits", "registers-nothing",
         "file-outside-roots", "not-importable", "namespace-root-imported-by-name", "exclude-matches-nothing",
         "source-root-missing", "gate-file-missing", "observer-not-found", "observer-outside-roots",
         "observer-without-factory", "observer-submodule-missing", "observer-not-callable", "count-unknown"],
)  # fmt: skip
def test_catalog_and_layout_errors_are_exit_2_before_any_run(tmp_path: Path, edit, message: str) -> None:
    root = make_project(tmp_path / "project", "flat")
    edit(root)
    result = _cli_verify(root)
    output = " ".join(result.output.split())
    assert result.exit_code == 2, output
    assert message in output
    assert "force-causal-block-mask" not in output  # never the embedded catalog
    assert not (root / ".dflash-cache").exists()  # nothing ran


def _observer(root: Path, rel: str, spec: str) -> None:
    (root / rel).write_text("raise AssertionError('never imported by the configuration check')\n\n\n"
                            "def make():\n    pass\n\n\nLIMIT = 3\n")  # fmt: skip
    _set(root, "observe", spec)


def _set(root: Path, key: str, value: object) -> None:
    lines = [line for line in (root / "pyproject.toml").read_text().splitlines() if not line.startswith(key)]
    if value is not None:
        lines.append(f"{key} = {json.dumps(value)}")
    (root / "pyproject.toml").write_text("\n".join(lines) + "\n")


def _replace(root: Path, rel: str, old: str, new: str) -> None:
    path = root / rel
    path.write_text(path.read_text().replace(old, new))


def _move(root: Path, old: str, new: str) -> None:
    (root / old).rename(root / new)
    _replace(root, "calc_mutations.py", f'"{old}/', f'"{new}/')
    _set(root, "source_roots", [new])


def test_the_embedded_catalog_still_loads_for_this_repository() -> None:
    from verify.config.catalog import load_mutations
    from verify.config.settings import load_config

    repo = Path(__file__).resolve().parents[2]
    assert len(load_mutations(load_config(repo))) >= 30


def test_probe_refuses_a_baseline_that_ran_no_source_line(tmp_path: Path) -> None:
    from verify.config.settings import ConfigError, load_config
    from verify.run.phases.layout_probe import check_sources_imported

    config = load_config(make_project(tmp_path / "project", "src"))
    check_sources_imported(config, {"lines": {"src/calc/ops.py": {"1": [""]}}})
    with pytest.raises(ConfigError, match="never imported the source roots"):
        check_sources_imported(config, {"lines": {"tests/test_calc.py": {"1": [""]}}})


def test_count_is_a_key_and_a_flag(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from verify.cli.verify import verify_app
    from verify.config.settings import load_config, with_overrides

    root = make_project(tmp_path / "project", "flat")
    assert load_config(root).count == "killed"
    _set(root, "count", "detected")
    config = load_config(root)
    assert config.count == "detected" and with_overrides(config, count="killed").count == "killed"
    assert "--count" in " ".join(CliRunner().invoke(verify_app, ["--help"], env={"COLUMNS": "200"}).output.split())


def test_a_gate_file_brings_its_folder_and_exclude_leaves_files_out_of_the_copy() -> None:
    import dataclasses

    from verify.config.project import project_files
    from verify.config.settings import load_config

    repo = load_config(Path(__file__).resolve().parents[2])
    one_file = dataclasses.replace(repo, gates=("tests/gates/test_gate_trace.py",))
    files = project_files(one_file)
    # Its conftest imports `gatekit`, a sibling module: plain pytest finds it, so must the private copy.
    assert {"tests/gates/conftest.py", "tests/gates/gatekit.py", "tests/gates/test_gate_trace.py"} <= set(files)
    assert "tests/test_layout.py" in files  # beside tests/conftest.py: importable under plain pytest too
    excluding = dataclasses.replace(repo, exclude=("tests/gates/test_gate_s*.py",))
    left = set(project_files(repo)) - set(project_files(excluding))
    assert left == {f for f in project_files(repo) if re.fullmatch(r"tests/gates/test_gate_s[^/]*\.py", f)} != set()
    assert "--ignore=tests/gates/test_gate_sampling.py" in excluding.pytest_extra()
