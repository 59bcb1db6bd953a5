"""`dflash init`: it detects the layout, appends [tool.dflash] without touching what is there, writes an
example catalog and gate, refuses to run twice, and `dflash verify` right after gives a real verdict."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verify.cli import app
from verify.compat import tomllib
from verify.run.scaffold import ScaffoldError, detect

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
    assert "dflash verify" in first.output and "scale-returns-none" in first.output
    second = runner.invoke(app, ["init", "--project", str(root)])
    assert second.exit_code == 2 and "already has [tool.dflash]" in second.output
    assert (root / "pyproject.toml").read_text() == text


def test_init_refuses_a_project_without_python_source(tmp_path) -> None:
    (tmp_path / "README.md").write_text("nothing here")
    with pytest.raises(ScaffoldError, match="no Python package found"):
        detect(tmp_path)


@pytest.mark.slow
def test_verify_right_after_init_gives_a_real_verdict(tmp_path) -> None:
    root = _project(tmp_path / "calc", "src")
    assert CliRunner().invoke(app, ["init", "--project", str(root)]).exit_code == 0

    def verify() -> tuple[int, dict[str, str]]:
        report = tmp_path / "report.json"
        done = subprocess.run(
            [sys.executable, "-m", "verify", "verify", "--project", str(root), "--json", str(report), "--no-cache"],
            capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"}, timeout=600, check=False,
        )  # fmt: skip
        assert report.is_file(), done.stdout + done.stderr
        return done.returncode, {m["name"]: m["status"] for m in json.loads(report.read_text())["mutations"]}

    # The example gate only imports the module: the example mutation survives, and the run says so (exit 1).
    assert verify() == (1, {"scale-returns-none": "survived"})
    # A gate that checks the result, as the next steps say: now it is killed (exit 0).
    gate = root / "tests" / "gates" / "test_gate_scale.py"
    gate.write_text("import pytest\nfrom calc.ops import scale\n\n\n@pytest.mark.gate\ndef test_scale():\n"
                    "    assert scale(3, 2) == 6\n")  # fmt: skip
    assert verify() == (0, {"scale-returns-none": "killed"})
