"""The sweep's pieces without running mutmut: budgets, mutmut's names and exit codes, settings, anchors,
equivalents, grouping, and the CLI's answers to bad input."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verify.cli.sweep import sweep_app
from verify.compat import tomllib
from verify.mutation import Mutation
from verify.report.verdict import Status
from verify.sweep import equivalents
from verify.sweep import mutmut_run as sweep_mutmut
from verify.sweep import source as sweep_source
from verify.sweep.driver import SweepInputError, parse_budget, resolve_modules
from verify.sweep.report import result_from_json, summarise, tables, to_json, write_json
from verify.sweep.result import NO_TESTS, NOT_CHECKED, SweepMutant, SweepOutcome, SweepResult
from verify.sweep.undecorate import PREFIX, undecorate


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("10m", 600), ("1h30m", 5400), ("45", 45), ("1.5m", 90), ("2h", 7200)],
    ids=["seconds", "minutes", "hours-minutes", "bare", "fraction", "hours"],
)
def test_parse_budget(text: str, seconds: float) -> None:
    assert parse_budget(text) == seconds


@pytest.mark.parametrize("text", ["", "10x", "m", "0s", "-5m", "10 minutes"])
def test_bad_budget_is_a_named_error(text: str) -> None:
    with pytest.raises(SweepInputError, match="bad budget"):
        parse_budget(text)


@pytest.mark.parametrize(
    ("exit_code", "status"),
    [
        (0, (Status.SURVIVED, "survived")),
        (1, (Status.KILLED, "killed")),
        (2, (Status.ERROR, "pytest interrupted")),  # never a kill
        (3, (Status.ERROR, "pytest internal error")),
        (4, (Status.ERROR, "pytest usage error")),
        (33, (Status.SURVIVED, NO_TESTS)),  # scored against, as `dflash verify` scores an unreached mutation
        (36, (Status.TIMEOUT, "timeout")),
        (-24, (Status.TIMEOUT, "timeout")),
        (-11, (Status.CRASHED, "segfault")),
        (37, (Status.STALE, "caught by type check")),
        (None, (Status.SKIPPED, NOT_CHECKED)),
        (99, (Status.ERROR, "suspicious")),  # an exit code mutmut cannot classify: no verdict
    ],
)
def test_mutmut_exit_codes(exit_code: int | None, status: tuple[Status, str]) -> None:
    assert sweep_mutmut.status_of(exit_code) == status


@pytest.mark.parametrize(
    ("key", "function"),
    [
        ("runner.cache.xǁPagedCacheǁwrite__mutmut_3", "PagedCache.write"),
        ("runner.sampling.x_greedy__mutmut_12", "greedy"),
        ("runner.x_with__mutmut__in_name__mutmut_1", "with"),
    ],
)
def test_function_of_mutmut_key(key: str, function: str) -> None:
    assert sweep_mutmut.function_of(key) == function


def test_gpu_gates_are_always_deselected() -> None:
    assert sweep_mutmut._without_gpu(["-m", "gate", "-x"]) == ["-m", "(gate) and not gpu", "-x"]
    assert sweep_mutmut._without_gpu(["-q"]) == ["-q", "-m", "not gpu"]


def test_settings_override_only_the_mutmut_table(tmp_path: Path) -> None:
    (tmp_path / "runner").mkdir()
    (tmp_path / "pyproject.toml").write_text(
        '[tool.mutmut]\npaths_to_mutate = ["x"]\ndebug = true\n\n[tool.other]\nkeep = "yes"\n'
    )
    sweep_mutmut.write_settings(tmp_path, ("runner/a.py",))
    data = tomllib.loads((tmp_path / "pyproject.toml").read_text())
    settings = data["tool"]["mutmut"]
    assert data["tool"]["other"] == {"keep": "yes"} and settings["debug"] is True
    assert settings["source_paths"] == ["runner"] and settings["only_mutate"] == ["runner/a.py"]
    assert "paths_to_mutate" not in settings
    # Without its own selection, the project's [tool.dflash] gates and marker select the gates.
    assert settings["pytest_add_cli_args"] == ["-m", "(gate) and not gpu", "-p", sweep_mutmut.PLUGIN]
    assert settings["pytest_add_cli_args_test_selection"] == ["tests/gates"]
    assert f"{sweep_mutmut.PLUGIN}.py" in settings["also_copy"] and (tmp_path / f"{sweep_mutmut.PLUGIN}.py").exists()


def test_settings_follow_the_projects_gates_marker_and_import_paths(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    sweep_mutmut.write_settings(tmp_path, ("src/pkg/a.py",), ("tests",), "release", (".", "src", "lib"))
    settings = tomllib.loads((tmp_path / "pyproject.toml").read_text())["tool"]["mutmut"]
    assert settings["source_paths"] == ["src"] and settings["pytest_add_cli_args_test_selection"] == ["tests"]
    assert settings["pytest_add_cli_args"][:2] == ["-m", "(release) and not gpu"]
    plugin = (tmp_path / f"{sweep_mutmut.PLUGIN}.py").read_text()
    assert 'IMPORT_PATHS = ["src", "lib"]' in plugin
    compile(plugin, "plugin", "exec")


def test_settings_without_a_marker_select_every_cpu_test_and_pass_the_extra_args(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    extra = ("--ignore=tests/test_gpu.py", "-p", "no:randomly")
    sweep_mutmut.write_settings(tmp_path, ("pkg/a.py",), ("tests",), "", (".",), extra)
    settings = tomllib.loads((tmp_path / "pyproject.toml").read_text())["tool"]["mutmut"]
    assert settings["pytest_add_cli_args"] == [*extra, "-p", sweep_mutmut.PLUGIN]


def test_resolve_modules(tmp_path: Path) -> None:
    (tmp_path / "runner" / "__pycache__").mkdir(parents=True)
    for name in ("runner/b.py", "runner/a.py", "runner/__pycache__/a.py", "runner/notes.txt"):
        (tmp_path / name).write_text("x = 1\n")
    assert resolve_modules(tmp_path, ("runner",)) == ("runner/a.py", "runner/b.py")
    assert resolve_modules(tmp_path, ("runner/b.py", "runner")) == ("runner/a.py", "runner/b.py")
    for bad in ("nope", "../outside", "runner/notes.txt"):
        with pytest.raises(SweepInputError):
            resolve_modules(tmp_path, (bad,))


def test_changed_since_keeps_only_changed_modules(tmp_path: Path) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True)

    (tmp_path / "runner").mkdir()
    for name in ("a", "b", "c"):
        (tmp_path / f"runner/{name}.py").write_text("x = 1\n")
    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "base")
    (tmp_path / "runner/b.py").write_text("x = 2\n")
    (tmp_path / "runner/d.py").write_text("x = 3\n")  # untracked counts as changed
    assert resolve_modules(tmp_path, ("runner",), "HEAD") == ("runner/b.py", "runner/d.py")
    with pytest.raises(SweepInputError, match="changed-since"):
        resolve_modules(tmp_path, ("runner",), "no-such-rev")


METHOD_SOURCE = """class Window:
    def clip(self, n):
        if n > self.size:
            return self.size
        return n

    def other(self, n):
        if n > self.size:
            return 0
        return n
"""


def test_change_places_a_method_mutant_back_with_a_unique_anchor() -> None:
    orig = "def clip(self, n):\n    if n > self.size:\n        return self.size\n    return n\n"
    mutant = "def clip(self, n):\n    if n >= self.size:\n        return self.size\n    return n\n"
    change = sweep_source.change("runner/w.py", METHOD_SOURCE, "Window.clip", orig, mutant)
    assert change is not None and change.line == 3
    assert (change.original, change.mutated) == ("if n > self.size:", "if n >= self.size:")
    # `if n > self.size:` occurs twice in the file, so the anchor grows until it is unique.
    assert METHOD_SOURCE.count(change.anchor) == 1 and "if n > self.size:" in change.anchor
    mutated_file = METHOD_SOURCE.replace(change.anchor, change.replacement)
    assert "        if n >= self.size:\n            return self.size" in mutated_file
    assert mutated_file.count(">=") == 1
    assert "+        if n >= self.size:" in change.diff


def test_decorated_functions_are_counted_as_mutmut_skips_them() -> None:
    source = (
        "import torch\n\n@torch.inference_mode()\ndef step(x):\n    return x\n\n"
        "class A:\n    @staticmethod\n    def s():\n        return 1\n\n"
        "    @property\n    def p(self):\n        return 2\n"
    )
    found = sweep_source.decorated("runner/e.py", source)
    assert [(d.function, d.decorators) for d in found] == [
        ("step", ("torch.inference_mode()",)),
        ("A.p", ("property",)),
    ]


def _mutant(key: str, status: Status, function: str = "f", **extra: str) -> SweepMutant:
    return SweepMutant(key, "runner/m.py", function, status, **extra)  # type: ignore[arg-type]


def test_equivalents_excuse_only_survivors(tmp_path: Path) -> None:
    path = tmp_path / "equivalents.toml"
    path.write_text(
        '[[equivalent]]\nmodule = "runner/m.py"\nfunction = "f"\noriginal = "return a + 0"\n'
        'mutated = "return a - 0"\nreason = "adding zero"\n\n[[equivalent]]\nmutant = "k3"\nreason = "r"\n'
    )
    marks = equivalents.load(path)
    mutants = [
        _mutant("k1", Status.SURVIVED, original="return a + 0", mutated="return a - 0"),
        _mutant("k2", Status.SURVIVED, original="return a + 0", mutated="return a + 1"),
        _mutant("k3", Status.KILLED),
    ]
    statuses = [(m.status, m.reason) for m in equivalents.apply(mutants, marks)]
    assert statuses == [(Status.EQUIVALENT, "adding zero"), (Status.SURVIVED, ""), (Status.KILLED, "")]
    block = equivalents.entry_toml(mutants[1], reason='quotes " too')
    assert equivalents.Equivalent(**tomllib.loads(block)["equivalent"][0]).matches(mutants[1])


def test_uncovered_entries_say_what_another_machine_would_see(tmp_path: Path) -> None:
    path = tmp_path / "equivalents.toml"
    path.write_text(
        '[[uncovered]]\nmutant = "k1"\nreason = "CPU only here"\nobservation = "a device mismatch on CUDA"\n'
    )
    marks = equivalents.load(path)
    [marked] = equivalents.apply([_mutant("k1", Status.SURVIVED)], marks)
    assert marked.status is Status.UNCOVERED
    assert marked.reason == "CPU only here; elsewhere: a device mismatch on CUDA"
    path.write_text('[[uncovered]]\nmutant = "k1"\nreason = "CPU only here"\n')
    with pytest.raises(equivalents.EquivalentsError, match="observation"):
        equivalents.load(path)


def test_shipped_equivalents_keep_device_and_dtype_mutants_apart() -> None:
    marks = equivalents.load(Path(__file__).resolve().parents[2] / "mutations" / "equivalents.toml")
    for mark in marks:
        machine_bound = "CUDA" in mark.reason or "device" in mark.reason or "float32" in mark.reason
        assert (mark.kind == "uncovered") == machine_bound, (mark.function, mark.reason)


def test_an_entry_whose_line_is_gone_is_stale_and_named_in_the_report(tmp_path: Path) -> None:
    path = tmp_path / "equivalents.toml"
    path.write_text(
        '[[equivalent]]\nmodule = "runner/m.py"\nfunction = "f"\noriginal = "  return a + 0"\n'
        'mutated = "return a - 0"\nreason = "adding zero"\n\n'
        '[[equivalent]]\nmodule = "runner/m.py"\nfunction = "f"\noriginal = "return b * 1"\n'
        'mutated = "return b / 1"\nreason = "times one"\n\n'
        '[[equivalent]]\nmodule = "runner/other.py"\nfunction = "g"\noriginal = "gone"\nmutated = "x"\nreason = "r"\n'
    )
    marks = equivalents.load(path)
    source = {"runner/m.py": "def f(a):\n    return a + 0\n"}
    # The moved line is stale; a line still there is not; a module this sweep did not read is not judged.
    assert [m.original for m in equivalents.stale(marks, source)] == ["return b * 1"]
    result = dataclasses.replace(_result(tmp_path, ()), stale_equivalents=("runner/m.py: f: return b * 1",))
    (tmp_path / "runner").mkdir()
    (tmp_path / "runner/m.py").write_text(source["runner/m.py"])
    notes = " ".join(tables(result, {})[0].notes)
    assert "1 equivalents entry match no line of their module any more" in notes and "return b * 1" in notes


def test_shipped_equivalents_match_lines_of_todays_runner() -> None:
    root = Path(__file__).resolve().parents[2]
    marks = equivalents.load(root / "mutations" / "equivalents.toml")
    sources = {m.module: (root / m.module).read_text() for m in marks if m.module}
    assert [(m.module, m.function, m.original) for m in equivalents.stale(marks, sources)] == []


@pytest.mark.parametrize(
    "text",
    ["[[equivalent]]\nmutant = 'k'\n", "[[equivalent]]\nmutant = 'k'\nreason = 'r'\ncolour = 'red'\n", "not toml ="],
    ids=["no-reason", "unknown-key", "bad-toml"],
)
def test_bad_equivalents_file_is_a_named_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "equivalents.toml"
    path.write_text(text)
    with pytest.raises(equivalents.EquivalentsError):
        equivalents.load(path)


def _result(root: Path, mutants: tuple[SweepMutant, ...]) -> SweepResult:
    return SweepResult(str(root), ("runner/m.py",), mutants, (), SweepOutcome.COMPLETE, 1.0, 1)


def test_functions_are_grouped_and_mapped_to_registered_mutations(tmp_path: Path) -> None:
    (tmp_path / "runner").mkdir()
    (tmp_path / "runner/m.py").write_text("def f(a):\n    return a + 1\n\n\ndef g(a):\n    return a * 2\n")
    catalog = {"g-doubles": Mutation("g-doubles", "bug", "runner/m.py", "a * 2", "a * 3")}
    survivors = tuple(_mutant(f"runner.m.x_f__mutmut_{n}", Status.SURVIVED) for n in range(9))
    mutants = (*survivors, _mutant("runner.m.x_g__mutmut_1", Status.SURVIVED, "g"))
    (module,) = summarise(_result(tmp_path, mutants), catalog)
    assert [f.headline for f in module.functions] == [
        "f has 9 surviving operator mutants and no registered mutation",
        "g has 1 surviving operator mutant and registered: g-doubles",
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nothere"], "unknown path"),
        (["nothere", "--jobs", "2"], "unknown path 'nothere'"),  # options may follow the paths
        (["--budget", "soon"], "bad budget"),
        (["--jobs", "0"], "--jobs"),
        (["--changed-since", "HEAD"], "changed-since"),  # the toy copy is not a git repository
        (["promote", "toyrunner.accept.x_nope__mutmut_1", "some-name"], "unknown mutant"),
        (["promote", "toyrunner.accept.x_killed__mutmut_1", "some-name"], "only survived"),
        (["promote", "toyrunner.accept.x_bonus_len__mutmut_2", "Not_Kebab"], "kebab-case"),
        (["promote", "toyrunner.accept.x_bonus_len__mutmut_2", "accept-on-mismatch"], "already registered"),
    ],
    ids=["path", "path-then-option", "budget", "jobs", "rev", "mutant", "not-survivor", "name", "taken"],
)
def test_bad_input_exits_2_with_a_named_error(toy: Path, args: list[str], message: str) -> None:
    state = toy.parent / "state.json"
    mutants = (
        SweepMutant(
            "toyrunner.accept.x_bonus_len__mutmut_2", "toyrunner/accept.py", "bonus_len", Status.SURVIVED,
            anchor="    return num_accepted + 1", replacement="    return num_accepted + 2",
        ),
        SweepMutant("toyrunner.accept.x_killed__mutmut_1", "toyrunner/accept.py", "killed", Status.KILLED),
    )  # fmt: skip
    write_json(state, _result(toy, mutants), {})
    done = CliRunner().invoke(sweep_app, [*args, "--root", str(toy), "--state", str(state)])
    assert done.exit_code == 2, done.output
    assert message in done.output


def test_json_carries_a_verify_report_beside_the_sweep(tmp_path: Path) -> None:
    verify_report = {"schema": "dflash-verify/1", "mutations": [{"name": "m", "status": "killed"}], "score": 1.0}
    result = _result(tmp_path, (_mutant("runner.m.x_f__mutmut_1", Status.SURVIVED),))
    data = to_json(result, {}, verify_report)
    assert data["mutations"] == verify_report["mutations"] and data["score"] == 1.0
    assert data["sweep"]["counts"] == {"survived": 1} and data["sweep"]["score"] == 0.0
    assert result_from_json(data) == result


UNDECORATE_SOURCE = """import functools


class Box:
    def __init__(self):
        self._x = 1

    @property
    def doubled(self):
        return self._x * 2

    @property
    def x(self):
        return self._x

    @x.setter
    def x(self, value):
        self._x = value + 1

    @staticmethod
    @functools.cache
    def static_cached(a):
        return a * 3


@functools.lru_cache(
    maxsize=4)
@functools.cache
def stacked(a, b):
    return a - b


calls = []


def tag(name):
    calls.append(name)
    return lambda f: (calls.append(f"apply {name}"), f)[1]


@tag("outer")
@tag("inner")
def ordered():
    return 1
"""


def test_undecorate_reaches_decorated_functions_and_keeps_their_meaning() -> None:
    text, reached = undecorate(UNDECORATE_SOURCE)
    # A property and its setter share one name (mutmut would get two trampolines of one name), and
    # @staticmethod among other decorators needs mutmut to know the binding: those stay as they are.
    assert reached == ("Box.doubled", "ordered", "stacked")
    assert "@x.setter" in text and "@staticmethod" in text and "@property\n    def doubled" not in text
    assert not [span for span in sweep_source.functions(text) if span.function in reached and span.decorators]
    before: dict = {}
    after: dict = {}
    exec(compile(UNDECORATE_SOURCE, "before", "exec"), before)
    exec(compile(text, "after", "exec"), after)
    # Decorators are evaluated top-down before the def and applied bottom-up after it, as the syntax does.
    assert after["calls"] == before["calls"] == ["outer", "inner", "apply inner", "apply outer"]
    box = after["Box"]()
    box.x = 4
    assert (box.x, box.doubled, after["stacked"](5, 2), after["Box"].static_cached(2)) == (5, 10, 3, 6)
    assert hasattr(after["stacked"], "cache_info") and not any(k.startswith(PREFIX) for k in after)


def test_the_examples_decorated_generate_is_reached() -> None:
    """The worked example's decode loop sits under @torch.inference_mode(), where mutmut alone puts no mutant."""
    engine = Path(__file__).resolve().parents[2] / "examples" / "reference-engine" / "src" / "refengine" / "engine.py"
    source = engine.read_text()
    assert [d.function for d in sweep_source.decorated("engine.py", source)] == ["SpecEngine.generate"]
    text, reached = undecorate(source)
    assert reached == ("SpecEngine.generate",)  # a lone @classmethod is mutmut's own business
    assert "generate = _dflash_decorators_" in text and "@torch.inference_mode()" not in text


def test_sweep_scores_and_reads_back_as_dflash_verify_does(tmp_path: Path) -> None:
    mutants = (
        _mutant("runner.m.x_f__mutmut_1", Status.KILLED),
        _mutant("runner.m.x_f__mutmut_2", Status.SURVIVED, mutmut=NO_TESTS),
        _mutant("runner.m.x_f__mutmut_3", Status.ERROR, mutmut="suspicious"),  # no verdict: outside the score
        _mutant("runner.m.x_f__mutmut_4", Status.SKIPPED, mutmut=NOT_CHECKED),
    )
    result = _result(tmp_path, mutants)
    assert result.score == 0.5 and result.num_scored == 2 and result.num_checked == 3
    assert [m.label for m in mutants] == ["killed", NO_TESTS, "error", NOT_CHECKED]
    assert result_from_json(to_json(result, {})) == result
    # A sweep saved before the statuses were unified (mutmut's own words) still reads back, for `promote`.
    legacy = to_json(result, {})
    legacy["sweep"]["mutants"][1]["status"] = "no_tests"
    legacy["sweep"]["mutants"][1].pop("mutmut")
    legacy["sweep"]["mutants"][3]["status"] = "not_checked"
    assert result_from_json(legacy) == result


def test_a_mutant_without_a_verdict_exits_4_as_in_dflash_verify(toy: Path, monkeypatch) -> None:
    import verify.sweep.driver as driver

    mutants = (
        _mutant("toyrunner.accept.x_f__mutmut_1", Status.KILLED),
        _mutant("toyrunner.accept.x_f__mutmut_2", Status.ERROR, mutmut="pytest interrupted"),
    )
    monkeypatch.setattr(driver, "run_sweep", lambda config, on_progress=None: _result(toy, mutants))
    done = CliRunner().invoke(sweep_app, ["--root", str(toy), "--state", str(toy.parent / "s.json")])
    assert done.exit_code == 4, done.output  # score 1.0 over the one scored mutant, but one got no verdict
    assert "1 killed" in done.output and "1 error" in done.output
