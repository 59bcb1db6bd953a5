"""`dflash init`: it detects the layout, appends [tool.dflash] without touching what is there, writes an
example catalog and gate (or adopts the existing suite: every test a gate, the files that cannot be collected
excluded), refuses to run twice, and `dflash verify` right after gives a real verdict."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.builders import verify_statuses
from verify.cli import app
from verify.compat import tomllib
from verify.config.scaffold import ScaffoldError, detect

OPS = "def scale(x, k):\n    if k == 0:\n        return 0\n    return x * k\n"
PYPROJECT = '[project]\nname = "calc"\nversion = "0.1"\n\n[tool.pytest.ini_options]\naddopts = "--strict-markers -q"\n'


def _project(root: Path, layout: str) -> Path:
    files = {
        "src": {"src/calc/__init__.py": "", "src/calc/ops.py": OPS},
        "flat": {"calc/__init__.py": "", "calc/ops.py": OPS, "tests/test_x.py": "def test_x():\n    pass\n"},
        "module": {"ops.py": OPS, "setup.py": "", "test_ops.py": ""},
    }[layout]
    for rel, text in {**files, "pyproject.toml": PYPROJECT}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.mark.parametrize(
    ("layout", "roots", "file", "module"),
    [
        ("src", ("src",), "src/calc/ops.py", "calc.ops"),
        ("flat", ("calc",), "calc/ops.py", "calc.ops"),
        ("module", ("ops.py",), "ops.py", "ops"),
    ],
)
def test_detect_finds_the_layout_and_an_example_to_mutate(tmp_path, layout, roots, file, module) -> None:
    scaffold = detect(_project(tmp_path, layout))
    assert (scaffold.layout, scaffold.source_roots, scaffold.target_file) == (layout, roots, file)
    assert (scaffold.target_module, scaffold.function, scaffold.anchor) == (module, "scale", "return x * k")


def test_init_appends_and_refuses_a_second_time(tmp_path) -> None:
    root = _project(tmp_path, "src")
    runner = CliRunner()
    first = runner.invoke(app, ["init", "--project", str(root)])
    assert first.exit_code == 0, first.output
    text = (root / "pyproject.toml").read_text()
    assert text.startswith(PYPROJECT)  # what was there is kept byte for byte
    table = tomllib.loads(text)["tool"]["dflash"]
    assert table["mutation_modules"] == ["calc_mutations"] and table["source_roots"] == ["src"]
    assert "dflash verify" in first.output and "scale-returns-negated" in first.output
    second = runner.invoke(app, ["init", "--project", str(root)])
    assert second.exit_code == 2 and "already has [tool.dflash]" in second.output
    assert (root / "pyproject.toml").read_text() == text


def test_init_refuses_a_project_without_python_source(tmp_path) -> None:
    (tmp_path / "README.md").write_text("nothing here")
    with pytest.raises(ScaffoldError, match="no Python source found"):
        detect(tmp_path)


@pytest.mark.slow
def test_verify_right_after_init_gives_a_real_verdict(tmp_path) -> None:
    root = _project(tmp_path / "calc", "src")
    assert CliRunner().invoke(app, ["init", "--project", str(root), "--no-check"]).exit_code == 0

    def verify() -> tuple[int, dict[str, str]]:
        return verify_statuses(root, tmp_path / "report.json")

    # The example gate only imports the module: the example mutation survives, and the run says so (exit 1).
    assert verify() == (1, {"scale-returns-negated": "survived"})
    # A gate that checks the result, as the next steps say: now it is killed (exit 0).
    gate = root / "tests" / "gates" / "test_gate_scale.py"
    gate.write_text("import pytest\nfrom calc.ops import scale\n\n\n@pytest.mark.gate\ndef test_scale():\n"
                    "    assert scale(3, 2) == 6\n")  # fmt: skip
    assert verify() == (0, {"scale-returns-negated": "killed"})


# An existing, unmarked suite: a conftest importing a sibling helper module (as plain pytest allows), two tests,
# and a file whose collection fails on a package this environment lacks.
SUITE = {
    "tests/helper.py": "def expected(x, k):\n    return x * k\n",
    "tests/conftest.py": "import pytest\nfrom helper import expected\n\n\n@pytest.fixture\ndef k():\n"
    "    return expected(1, 2)\n",
    "tests/test_ops.py": "from calc.ops import scale\nfrom helper import expected\n\n\ndef test_scale(k):\n"
    "    assert scale(3, k) == expected(3, k)\n\n\ndef test_zero():\n    assert scale(3, 0) == 0\n",
    "tests/test_gpu.py": "import not_installed_pkg_xyz\n\n\ndef test_gpu():\n    assert not_installed_pkg_xyz\n",
}


def _suite(root: Path) -> Path:
    _project(root, "src")
    for rel, text in SUITE.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_init_adopts_an_existing_suite_whole_and_excludes_what_cannot_be_collected(tmp_path) -> None:
    root = _suite(tmp_path / "calc")
    result = CliRunner().invoke(app, ["init", "--project", str(root)])
    assert result.exit_code == 0, result.output
    table = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["dflash"]
    assert table["gates"] == ["tests"] and table["gate_marker"] == "" and table["source_roots"] == ["src"]
    assert table["exclude"] == ["tests/test_gpu.py"] and "pytest_args" not in table
    output = " ".join(result.output.split())
    assert "2 gates collected (every test, no marker)" in output
    assert "excluded tests/test_gpu.py: ModuleNotFoundError: No module named 'not_installed_pkg_xyz'" in output
    assert "baseline: green, 2 gates ran" in output
    assert not (root / "tests" / "gates").exists() and (root / "calc_mutations.py").is_file()
    assert "fixture" not in output.lower()  # the next steps are not DFlash-shaped
    assert not list(root.rglob("__pycache__"))  # collecting wrote no bytecode into the project
    again = CliRunner().invoke(app, ["init", "--project", str(root)])
    assert again.exit_code == 2 and "already has [tool.dflash]" in again.output


def test_init_marker_adopts_only_the_marked_tests(tmp_path) -> None:
    root = _suite(tmp_path / "calc")
    test = root / "tests" / "test_ops.py"
    test.write_text("import pytest\n" + test.read_text().replace("def test_zero", "@pytest.mark.fast\ndef test_zero"))
    conftest = root / "tests" / "conftest.py"  # --strict-markers: the project registers its marker
    conftest.write_text(conftest.read_text() + "\n\ndef pytest_configure(config):\n"
                        '    config.addinivalue_line("markers", "fast: quick")\n')  # fmt: skip
    result = CliRunner().invoke(app, ["init", "--project", str(root), "--marker", "fast", "--no-check"])
    assert result.exit_code == 0, result.output
    assert tomllib.loads((root / "pyproject.toml").read_text())["tool"]["dflash"]["gate_marker"] == "fast"
    assert "1 gates collected (marked 'fast')" in result.output and "baseline" not in result.output


def test_init_keeps_a_suite_spread_over_xdist_workers_in_one_process(tmp_path) -> None:
    root = _suite(tmp_path / "calc")
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('addopts = "--strict-markers -q"', 'addopts = "-q -n 2"'))
    result = CliRunner().invoke(app, ["init", "--project", str(root), "--no-check"])
    assert result.exit_code == 0, result.output
    assert tomllib.loads(pyproject.read_text())["tool"]["dflash"]["pytest_args"] == ["-n", "0"]
    assert "pytest-xdist workers" in result.output


def test_init_refuses_a_suite_whose_conftest_fails_and_writes_nothing(tmp_path) -> None:
    root = _suite(tmp_path / "calc")
    (root / "tests" / "conftest.py").write_text("import not_installed_conftest_dep\n")
    before = (root / "pyproject.toml").read_text()
    result = CliRunner().invoke(app, ["init", "--project", str(root), "--no-check"])
    assert result.exit_code == 2, result.output
    assert "No module named 'not_installed_conftest_dep'" in result.output
    assert (root / "pyproject.toml").read_text() == before and not (root / "calc_mutations.py").exists()


def test_init_refuses_a_marker_pytest_rejects_and_writes_nothing(tmp_path) -> None:
    root = _suite(tmp_path / "calc")
    before = (root / "pyproject.toml").read_text()
    result = CliRunner().invoke(app, ["init", "--project", str(root), "--marker", "nowhere", "--no-check"])
    assert result.exit_code == 2 and "Unknown marker(s) in '-m' expression: nowhere" in result.output
    assert (root / "pyproject.toml").read_text() == before and not (root / "calc_mutations.py").exists()


@pytest.mark.slow
def test_verify_after_adoption_with_a_gate_file_whose_conftest_imports_a_sibling(tmp_path) -> None:
    root = _suite(tmp_path / "calc")
    assert CliRunner().invoke(app, ["init", "--project", str(root), "--no-check"]).exit_code == 0

    # The whole suite's baseline ran green in init's own check (the adoption test above). One file as the gates:
    # its folder's conftest still imports the sibling helper module, as under plain pytest.
    text = (root / "pyproject.toml").read_text().replace('gates = ["tests"]', 'gates = ["tests/test_ops.py"]')
    (root / "pyproject.toml").write_text(text.replace('    "tests/test_gpu.py",', '    "tests/test_g*.py",'))
    report = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "verify", "verify", "--project", str(root), "--json", str(report), "--no-cache"],
        capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"}, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert {m["name"]: m["status"] for m in json.loads(report.read_text())["mutations"]} == {
        "scale-returns-negated": "killed"
    }


@pytest.mark.parametrize(
    ("files", "suite"),
    [
        ({"tests/unit/test_a.py": "", "tests/helper.py": "", "bench/b_test.py": ""}, ("bench", "tests")),
        ({"test_ops.py": "", "venv2/pyvenv.cfg": "", "venv2/lib/test_x.py": "", ".tox/test_y.py": ""},
         ("test_ops.py",)),
        ({"tests/test_a.py": "", "checks/test_b.py": "",
          "pytest.ini": "[pytest]\ntestpaths = checks missing\n"}, ("checks",)),
        ({"tests/helper.py": ""}, None),
    ],
    ids=["folders", "root-file-beside-environments", "testpaths", "no-tests"],
)  # fmt: skip
def test_find_suite_finds_the_test_folders(tmp_path, files, suite) -> None:
    from verify.config.adopt import find_suite

    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    found = find_suite(tmp_path)
    assert (found.paths if found else None) == suite


def test_the_project_walk_never_enters_an_environment_or_a_hidden_folder(tmp_path) -> None:
    """A virtualenv (known by its pyvenv.cfg, whatever its name), a hidden folder and a node_modules are pruned
    before they are entered: their files neither make the suite nor steer the example mutation."""
    from verify.config.adopt import find_suite
    from verify.config.scaffold import walk_project

    unpacks = "from spec.accept import accept\n\n\ndef test_pair():\n    a, b = accept(1, 2)\n"
    files = {
        "spec/__init__.py": "",
        "spec/accept.py": "def accept(p, q):\n    return p + q\n\n\ndef scale(x, k):\n    return x * k\n",
        "tests/test_spec.py": "def test_nothing():\n    pass\n",
        "pyproject.toml": PYPROJECT,
        "myenv/pyvenv.cfg": "home = /usr/bin\n",
        "myenv/lib/site/test_env.py": unpacks,
        ".hidden/deep/test_hidden.py": unpacks,
        "node_modules/pkg/test_node.py": unpacks,
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    walked = {folder.relative_to(tmp_path).as_posix() for folder, _, _ in walk_project(tmp_path)}
    assert walked == {".", "spec", "tests"}
    found = find_suite(tmp_path)
    assert found is not None and found.paths == ("tests",)
    # Were they walked, `a, b = accept(...)` there would steer the example away from accept.
    assert detect(tmp_path).function == "accept"
