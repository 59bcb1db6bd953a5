"""The pristine copy's bytecode: every source file compiled once, before any child, so a module a gate imports
only while it runs is loaded by each child, not compiled by each (`compile_sources`)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from verify.sandbox.private_copy import compile_sources


def _cache(source: Path) -> Path:
    return Path(importlib.util.cache_from_source(str(source)))


def test_each_source_is_compiled_once_and_a_broken_one_is_left_to_its_import(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    good, broken, data = tmp_path / "pkg/good.py", tmp_path / "pkg/broken.py", tmp_path / "pkg/data.txt"
    good.write_text("def f():\n    return 41 + 1\n")
    broken.write_text("def f(:\n")
    data.write_text("not python")
    names = ["pkg/good.py", "pkg/broken.py", "pkg/data.txt", "pkg/absent.py"]
    assert compile_sources(tmp_path, names) == 1
    assert _cache(good).is_file() and not _cache(broken).exists()
    before = _cache(good).read_bytes()
    assert compile_sources(tmp_path, names) == 0  # an existing cache is never replaced
    assert _cache(good).read_bytes() == before


def test_a_fresh_interpreter_loads_the_cache_instead_of_compiling(tmp_path: Path) -> None:
    (tmp_path / "lazy.py").write_text("VALUE = 7\n")
    compile_sources(tmp_path, ["lazy.py"])
    probe = (
        "import importlib.machinery as m, sys\n"
        "compiled = []\n"
        "original = m.SourceFileLoader.source_to_code\n"
        "m.SourceFileLoader.source_to_code = lambda self, *a, **k: compiled.append(1) or original(self, *a, **k)\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "import lazy\n"
        "print(lazy.VALUE, len(compiled))\n"
    )
    done = subprocess.run([sys.executable, "-B", "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["7", "0"]
