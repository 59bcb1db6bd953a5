"""mutmut 3.8.1 as the sweep drives it: the command, the environment and `[tool.mutmut]` settings it runs
with, and its on-disk results (`mutants/<module>.meta` exit codes, generated function copies) read back.

The only module that knows mutmut's file formats and exit codes; knows nothing of budgets, reports or the
registered catalog. Works on a private copy of the project, never on the project itself.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import sys
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

import libcst as cst
from mutmut.mutation import diff_apply

from verify.compat import tomllib
from verify.report.verdict import Status
from verify.sweep import mutant as sweep_mutant
from verify.sweep import source as sweep_source
from verify.sweep.requirement import MUTMUT_VERSION
from verify.sweep.result import NO_TESTS, NOT_CHECKED, SweepMutant

ENVIRONMENT = {
    # mutmut's timeout is an RLIMIT_CPU, which counts the CPU time of every thread, so a gate using N
    # intra-op threads times out N times sooner than its wall time suggests: run gates single-threaded.
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    # Its children are forked and cannot initialise CUDA; the sweep runs CPU gates only.
    "CUDA_VISIBLE_DEVICES": "",
    "PYTHONUNBUFFERED": "1",
    "PYTHONIOENCODING": "utf-8",
}
PLUGIN = "_dflash_sweep_threads"
_PLUGIN_SOURCE = '''"""Written by `dflash sweep` into its private copy: one torch intra-op thread per gate, the
project's import paths inside mutants/ first on sys.path (mutmut itself adds only ./, src/ and source/), and each
mutant's ceilings, confinement and registration (dflash's verify/sweep/mutant.py, loaded by its path)."""
import importlib.util
import os
import sys

IMPORT_PATHS = __IMPORT_PATHS__
sys.path[:0] = [os.path.abspath(p) for p in IMPORT_PATHS if os.path.isdir(p)]
_spec = importlib.util.spec_from_file_location("_dflash_sweep_mutant", __MUTANT__)
_mutant = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _mutant
_spec.loader.exec_module(_mutant)


def pytest_configure(config):
    # The sweep deselects `gpu` gates; a project that never declared the marker must still accept `-m`.
    config.addinivalue_line("markers", "gpu: needs a CUDA device (deselected by dflash sweep)")
    _mutant.enter()


def pytest_runtest_makereport(item, call):
    _mutant.crashed(call.excinfo)


def pytest_unconfigure(config):
    _mutant.leave()


def pytest_runtest_setup(item):
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != 1:
        torch.set_num_threads(1)
'''

# mutmut 3.8.1, stats.py `status_by_exit_code` (anything else it calls suspicious), as the verdict model's
# statuses with mutmut's own word beside them.
_STATUS_BY_EXIT_CODE: dict[int | None, tuple[Status, str]] = {
    None: (Status.SKIPPED, NOT_CHECKED),
    0: (Status.SURVIVED, "survived"),
    1: (Status.KILLED, "killed"),
    # pytest's own trouble is never a kill: 2 interrupted, 3 internal error, 4 usage error.
    2: (Status.ERROR, "pytest interrupted"),
    3: (Status.ERROR, "pytest internal error"),
    4: (Status.ERROR, "pytest usage error"),
    5: (Status.SURVIVED, NO_TESTS),
    33: (Status.SURVIVED, NO_TESTS),
    34: (Status.SKIPPED, "skipped"),
    35: (Status.ERROR, "suspicious"),
    36: (Status.TIMEOUT, "timeout"),
    24: (Status.TIMEOUT, "timeout"),  # SIGXCPU from the CPU-time limit
    -24: (Status.TIMEOUT, "timeout"),
    152: (Status.TIMEOUT, "timeout"),
    255: (Status.TIMEOUT, "timeout"),
    37: (Status.STALE, "caught by type check"),  # rejected before any gate ran, like a mutant that cannot compile
    -11: (Status.CRASHED, "segfault"),
    -9: (Status.CRASHED, "killed by SIGKILL"),
}
# Verdicts a report shows a diff for; killed mutants need none and skipping them keeps big sweeps fast.
_DETAILED = {Status.SURVIVED, Status.ERROR, Status.TIMEOUT, Status.CRASHED}


def status_of(exit_code: int | None) -> tuple[Status, str]:
    """(status, mutmut's word) for a mutant's exit code."""
    return _STATUS_BY_EXIT_CODE.get(exit_code, (Status.ERROR, "suspicious"))


def function_of(key: str) -> str:
    """'runner.cache.xǁPagedCacheǁwrite__mutmut_3' -> 'PagedCache.write'; 'runner.x_f__mutmut_1' -> 'f'."""
    mangled = key.partition("__mutmut_")[0].rpartition(".")[2]
    if "ǁ" in mangled:
        _, class_name, name = mangled.split("ǁ")
        return f"{class_name}.{name}"
    return mangled.removeprefix("x_")


def command() -> list[str]:
    beside = Path(sys.executable).with_name("mutmut")
    found = str(beside) if beside.exists() else shutil.which("mutmut")
    if found is None:
        # mutmut is one of dflash-verify's own dependencies (pinned), not an extra.
        raise FileNotFoundError(f"mutmut is not installed: pip install 'mutmut=={MUTMUT_VERSION}'")
    return [found]


def read_available(stream: IO[bytes], timeout_s: float) -> bytes:
    readable, _, _ = select.select([stream], [], [], timeout_s)
    return os.read(stream.fileno(), 65536) if readable else b""


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # JSON escapes are valid TOML basic-string escapes
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    raise ValueError(f"unsupported [tool.mutmut] value {value!r}")


def _without_gpu(args: list[str]) -> list[str]:
    """Add `not gpu` to the marker expression (pytest honours only the last -m)."""
    if "-m" not in args:
        return [*args, "-m", "not gpu"]
    where = len(args) - 1 - args[::-1].index("-m")
    return [*args[: where + 1], f"({args[where + 1]}) and not gpu", *args[where + 2 :]]


def write_settings(
    copy: Path,
    modules: tuple[str, ...],
    gates: tuple[str, ...] = ("tests/gates",),
    gate_marker: str = "gate",
    import_paths: tuple[str, ...] = (".",),
    extra_args: tuple[str, ...] = (),
) -> None:
    """Rewrite the copy's `[tool.mutmut]`: the project's settings, narrowed to `modules`, CPU gates only. A
    project without its own test selection or marker gets its [tool.dflash] `gates` and `gate_marker` (no
    marker: every test, none deselected); `extra_args` (its `exclude` as --ignore, its `pytest_args`) go to
    every test run."""
    pyproject = copy / "pyproject.toml"
    text = pyproject.read_text("utf-8") if pyproject.exists() else ""
    settings = dict(tomllib.loads(text).get("tool", {}).get("mutmut", {}))
    settings.pop("paths_to_mutate", None)  # deprecated spelling of source_paths
    # Whole top-level packages are copied into mutants/ so they import; only `modules` get mutants.
    settings["source_paths"] = sorted({module.split("/")[0] for module in modules})
    settings["only_mutate"] = list(modules)
    settings.setdefault("pytest_add_cli_args_test_selection", list(gates))
    settings["pytest_add_cli_args"] = [
        # No marker: every test, as the verify run selects them (an `-m "not gpu"` would name a marker that a
        # project under --strict-markers may not register).
        *(
            _without_gpu(list(settings["pytest_add_cli_args"]))
            if "pytest_add_cli_args" in settings
            else _without_gpu(["-m", gate_marker])
            if gate_marker
            else []
        ),
        *extra_args,
        "-p",
        PLUGIN,
    ]
    settings.setdefault("process_isolation", "forkserver")
    others = [p.name for p in copy.iterdir() if not p.name.startswith(".") and p.name not in settings["source_paths"]]
    settings["also_copy"] = sorted({*settings.get("also_copy", []), *others, f"{PLUGIN}.py"})
    plugin = _PLUGIN_SOURCE.replace("__IMPORT_PATHS__", json.dumps([p for p in import_paths if p not in ("", ".")]))
    plugin = plugin.replace("__MUTANT__", json.dumps(sweep_mutant.__file__))
    (copy / f"{PLUGIN}.py").write_text(plugin, "utf-8")

    kept, skipping = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("["):
            skipping = line.strip().split("#")[0].strip() in ("[tool.mutmut]",)
        if not skipping:
            kept.append(line)
    section = ["", "[tool.mutmut]", *(f"{key} = {_toml_value(value)}" for key, value in settings.items())]
    pyproject.write_text("\n".join(kept + section) + "\n", "utf-8")


def _function_sources(key: str, mutated_file: Path) -> tuple[str, str]:
    # diff_apply joins "mutants/" with the path it is given; an absolute path makes that join a no-op.
    pair = diff_apply.read_functions_from_index(key, mutated_file)
    if pair is None:
        module = diff_apply.read_mutants_module(mutated_file)
        pair = diff_apply.read_original_function(module, key), diff_apply.read_mutant_function(module, key)
    orig, mutant = (cst.Module([fn.with_changes(leading_lines=[])]).code for fn in pair)
    return orig, mutant


def _gates_by_function(copy: Path) -> dict[str, tuple[str, ...]]:
    """mutmut's stats: the tests (the gates' node ids) that call each mangled function, the ones it runs against
    that function's mutants; empty when mutmut never got as far as its stats run."""
    try:
        stats = json.loads((copy / "mutants" / "mutmut-stats.json").read_text("utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    return {name: tuple(sorted(tests)) for name, tests in stats.get("tests_by_mangled_function_name", {}).items()}


def read_mutants(
    copy: Path, modules: tuple[str, ...], originals: Mapping[str, str] | None = None
) -> tuple[SweepMutant, ...]:
    """Every mutant of `modules` in `copy/mutants`, with the gates that ran against it, and a diff and anchor for
    the ones a report shows, placed in `originals` (the project's own text, module -> source) when given: the
    copy's text may differ from the project's (decorators spelt as assignments), the function bodies never do."""
    mutants = []
    gates = _gates_by_function(copy)
    for module in modules:
        meta = copy / "mutants" / f"{module}.meta"
        if not meta.is_file():
            continue
        source = originals[module] if originals is not None else (copy / module).read_text("utf-8")
        for key, exit_code in json.loads(meta.read_text("utf-8"))["exit_code_by_key"].items():
            (status, word), function = status_of(exit_code), function_of(key)
            change = None
            if status in _DETAILED:
                orig, mutant = _function_sources(key, (copy / "mutants" / module).resolve())
                change = sweep_source.change(module, source, function, orig, mutant)
            details: dict[str, Any] = asdict(change) if change is not None else {}
            reason = f"{word} (exit code {exit_code})" if status is Status.ERROR else ""
            ran = gates.get(key.partition("__mutmut_")[0], ()) if word != NO_TESTS else ()
            mutants.append(
                SweepMutant(key, module, function, status, exit_code, **details, reason=reason, mutmut=word, gates=ran)
            )
    return tuple(mutants)
