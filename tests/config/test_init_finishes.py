"""`dflash init` finishes the job: a folder of plain modules (no __init__.py), alone or beside packages, is a source
root and gets the `__init__.py` the import hook needs; gates that call the gate kit's statistical checks are
written as statistical_gates; the proposals are written and named in the catalog; and the next steps say what
will happen, never that a mutation "is killed"."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.builders import verify_statuses
from verify.cli import app
from verify.compat import tomllib
from verify.config.catalog import load_mutations
from verify.config.kit_gates import statistical_gates
from verify.config.scaffold import detect
from verify.config.settings import load_config

ACCEPT = (
    "def accept(p, q, x, u):\n    ratio = p[x] / q[x]\n    return u < ratio\n\n\ndef scale(x, k):\n    return x * k\n"
)
PYPROJECT = '[project]\nname = "spec"\nversion = "0.1"\n'


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in {**files, "pyproject.toml": PYPROJECT}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_a_folder_of_plain_modules_is_a_source_root_and_becomes_a_package(tmp_path) -> None:
    root = _write(tmp_path, {"engine/accept.py": ACCEPT})
    scaffold = detect(root)
    assert scaffold.source_roots == ("engine",) and scaffold.namespace_inits == ("engine/__init__.py",)
    # Beside two packages, the folder of modules the tests import is a root too (it was missed: "No module named
    # 'utils'" at the baseline).
    other = _write(tmp_path / "mixed", {"pkga/__init__.py": "", "pkga/a.py": ACCEPT, "pkgb/__init__.py": "",
                                        "utils/helpers.py": "def two():\n    return 2\n"})  # fmt: skip
    mixed = detect(other)
    assert mixed.source_roots == ("pkga", "pkgb", "utils") and mixed.namespace_inits == ("utils/__init__.py",)


def test_init_on_a_folder_beside_packages_runs_a_green_baseline(tmp_path) -> None:
    root = _write(tmp_path, {
        "pkga/__init__.py": "", "pkga/accept.py": ACCEPT, "pkgb/__init__.py": "",
        "utils/helpers.py": "def two():\n    return 2\n",
        "tests/test_all.py": "from pkga.accept import scale\nfrom utils.helpers import two\n\n\n"
                             "def test_scale():\n    assert scale(3, two()) == 6\n",
    })  # fmt: skip
    done = CliRunner().invoke(app, ["init", "--project", str(root)])
    assert done.exit_code == 0, done.output
    assert "baseline: green" in done.output and (root / "utils" / "__init__.py").is_file()
    assert "utils/__init__.py: a folder of plain modules made a package" in done.output


def test_kit_gates_are_statistical(tmp_path) -> None:
    root = _write(tmp_path, {
        "tests/test_law.py": "from verify.gatekit import assert_first_token_law, assert_speculative_equals_plain\n\n\n"
                             "def test_law():\n    assert_first_token_law(None, None)\n\n\n"
                             "def test_exact():\n    assert_speculative_equals_plain(None, None)\n",
        "tests/test_kit.py": "from verify import gatekit\n\n\nclass TestRule:\n    def test_rule(self):\n"
                             "        gatekit.assert_acceptance_rule_exact(None)\n",
        "tests/test_helper.py": "from verify.gatekit import output_fit as fit\n\n\n"
                                "def check():\n    fit(None, None)\n\n\ndef test_uses_helper():\n    check()\n",
        "tests/test_plain.py": "def test_plain():\n    assert True\n",
        # the public import point, as the docs show it, and the package imported whole
        "tests/test_public.py": "from verify import assert_stop_law as law, reseed\n\n\n"
                                "def test_stop():\n    law(None, reseed(0))\n\n\ndef test_seed():\n    reseed(0)\n",
        "tests/test_package.py": "import verify\n\n\ndef test_first():\n    verify.assert_first_token_law(None)\n\n\n"
                                 "def test_exact():\n    verify.assert_batch_equals_solo(None)\n",
    })  # fmt: skip
    files = ["tests/test_helper.py", "tests/test_kit.py", "tests/test_law.py", "tests/test_package.py",
             "tests/test_plain.py", "tests/test_public.py"]  # fmt: skip
    assert statistical_gates(root, files) == (
        "tests/test_helper.py",  # a helper calls the kit: the whole file
        "tests/test_kit.py::TestRule::test_rule",
        "tests/test_law.py::test_law",  # the exact comparison beside it is not statistical
        "tests/test_package.py::test_first",
        "tests/test_public.py::test_stop",
    )


def test_init_writes_statistical_gates_the_proposals_and_next_steps_that_say_what_happens(tmp_path) -> None:
    root = _write(tmp_path, {
        "spec/__init__.py": "", "spec/accept.py": ACCEPT,
        "tests/test_accept.py": "from verify.gatekit import assert_first_token_law\nfrom spec.accept import scale\n\n\n"
                                "def test_scale():\n    assert scale(3, 2) == 6\n\n\n"
                                "def test_law():\n    if False:\n        assert_first_token_law(None, None)\n",
    })  # fmt: skip
    done = CliRunner().invoke(app, ["init", "--project", str(root), "--no-check"])
    assert done.exit_code == 0, done.output
    table = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["dflash"]
    assert table["statistical_gates"] == ["tests/test_accept.py::test_law"]
    assert table["mutation_modules"] == ["spec_mutations", "proposed_mutations"]
    mutations = load_mutations(load_config(root))
    assert set(mutations) == {"ratio-inverted-accept-2", "scale-returns-negated"}
    assert "is killed" not in done.output
    assert (
        "runs the example 'scale-returns-negated'" in done.output
        and ": scale returns its result negated)" in " ".join(done.output.split())
        and "1 proposals in proposed_mutations.py" in done.output
    )


def test_init_without_proposals_offers_the_command(tmp_path) -> None:
    root = _write(tmp_path, {"spec/__init__.py": "", "spec/accept.py": ACCEPT})
    done = CliRunner().invoke(app, ["init", "--project", str(root), "--no-check", "--no-propose"])
    assert done.exit_code == 0, done.output
    assert "dflash mutations propose" in done.output and not (root / "proposed_mutations.py").exists()
    assert "reported survived until gates that call your code are written" in done.output


OBSERVER = (
    "from spec.accept import scale\n\n\nclass Observer:\n    workloads: tuple[str, ...] = ('one',)\n\n"
    "    def run(self, workload, emit):\n        positions = scale(2, 3)\n"
    "        emit(-1, -1, 'positions', positions)\n\n\ndef make_observer():\n    return Observer()\n"
)


def test_init_does_not_propose_mutations_of_the_observer_module(tmp_path) -> None:
    """An observer (`verify explain`'s protocol) drives the engine; a proposal there mutates the instrument. Init
    writes the table fresh, so no `observe` names it yet: it is known by its shape."""
    root = _write(tmp_path, {"spec/__init__.py": "", "spec/accept.py": ACCEPT, "spec/observe.py": OBSERVER})
    done = CliRunner().invoke(app, ["init", "--project", str(root), "--no-check"])
    assert done.exit_code == 0, done.output
    mutations = load_mutations(load_config(root))
    assert mutations and all(m.file != "spec/observe.py" for m in mutations.values())
    # The same assignment outside an observer class is proposed (the rule fires on it).
    plain = _write(tmp_path / "plain", {"spec/__init__.py": "", "spec/accept.py": ACCEPT,
                                        "spec/observe.py": OBSERVER.replace("workloads", "names")})  # fmt: skip
    done = CliRunner().invoke(app, ["init", "--project", str(plain), "--no-check"])
    assert done.exit_code == 0, done.output
    assert any(m.file == "spec/observe.py" for m in load_mutations(load_config(plain)).values())


@pytest.mark.parametrize(
    ("files", "function", "replacement"),
    [
        pytest.param(
            {
                "spec/accept.py": "def accept(p, q):\n    return p, q\n\n\ndef scale(x, k):\n    return x * k\n",
                "spec/engine.py": "from spec.accept import accept\n\n\ndef step(p, q):\n    a, b = accept(p, q)\n"
                "    return a\n",
            },
            "scale",
            "return -(x * k)",
            id="a tuple returned",
        ),  # fmt: skip
        pytest.param(
            {
                "spec/accept.py": "def accept(p, q):\n    return pair(p, q)\n\n\ndef scale(x, k):\n    return x * k\n",
                "tests/test_accept.py": "from spec.accept import accept\n\n\ndef test_accept():\n"
                "    a, b = accept(1, 2)\n",
            },
            "scale",
            "return -(x * k)",
            id="unpacked by a test",
        ),  # fmt: skip
        pytest.param(
            {
                "spec/accept.py": "def rows(n):\n    return list(range(n))\n\n\ndef scale(x, k):\n    return x * k\n",
                "spec/engine.py": "from spec.accept import rows\n\n\ndef total(n):\n"
                "    return sum(r for r in rows(n))\n",
            },
            "scale",
            "return -(x * k)",
            id="iterated",
        ),  # fmt: skip
        pytest.param(
            {"spec/accept.py": "def accept(p, q):\n    return p, q\n"}, "accept", "return None", id="nothing else: any"
        ),
    ],
)
def test_the_example_mutation_is_not_a_result_its_callers_take_apart(tmp_path, files, function, replacement) -> None:
    """A function whose result is unpacked (`a, b = accept(...)`) or iterated, broken, only crashes the caller with
    a TypeError (reported crashed): the example is put where a gate can catch a wrong value."""
    scaffold = detect(_write(tmp_path, {"spec/__init__.py": "", **files}))
    assert scaffold.function == function and scaffold.replacement == replacement
    if function == "scale":
        assert scaffold.anchor == "return x * k"


@pytest.mark.parametrize(
    ("source", "replacement", "name"),
    [
        ("def scale(x, k):\n    return x * k\n", "return -(x * k)", "scale-returns-negated"),
        ("def count(xs):\n    return len(xs)  # why\n", "return -len(xs)", "count-returns-negated"),
        ("def first(xs) -> int:\n    return xs[0]\n", "return -xs[0]", "first-returns-negated"),
        ("def ready(job) -> bool:\n    return job.done\n", "return not job.done", "ready-returns-inverted"),
        ("def known(x, seen):\n    return x in seen\n", "return not (x in seen)", "known-returns-inverted"),
        # an elementwise comparison of arrays, a string, a sequence: no kind the code shows, so None
        ("def below(a, b):\n    return a < b\n", "return None", "below-returns-none"),
        ("def label(name):\n    return 'id-' + name\n", "return None", "label-returns-none"),
        ("def zeros(n):\n    return [0] * n\n", "return None", "zeros-returns-none"),
        ("def twice(s) -> str:\n    return s * 2\n", "return None", "twice-returns-none"),
        ("def zero(x) -> int:\n    return 0\n", "return None", "zero-returns-none"),  # -0 would change nothing
    ],
    ids=["arithmetic", "len-commented", "annotated-int", "annotated-bool", "membership", "comparison", "string",
         "list", "annotated-str", "constant"],
)  # fmt: skip
def test_the_example_gives_a_wrong_value_of_the_kind_the_code_shows(tmp_path, source, replacement, name) -> None:
    """None fails in the first caller that computes with it (reported crashed); a negated number or an inverted
    truth value travels on to a gate's assertion (killed). None only where the code shows no kind."""
    scaffold = detect(_write(tmp_path, {"spec/__init__.py": "", "spec/ops.py": source}))
    assert (scaffold.replacement, scaffold.mutation_name) == (replacement, name)
    assert scaffold.effect in scaffold.catalog_text()


def test_a_value_of_a_known_kind_is_preferred_over_an_earlier_one_of_none(tmp_path) -> None:
    source = "def name(user):\n    return user.name\n\n\ndef scale(x, k):\n    return x * k\n"
    scaffold = detect(_write(tmp_path, {"spec/__init__.py": "", "spec/a.py": source}))
    assert (scaffold.function, scaffold.replacement) == ("scale", "return -(x * k)")


@pytest.mark.slow
def test_the_example_is_killed_through_a_caller_that_computes_with_its_result(tmp_path) -> None:
    """The gate checks a caller that sums the example's results: None would crash it (a TypeError, reported
    crashed, as `law-returns-none` did on the lookup engine); a negated value reaches the assertion: killed."""
    ops = "def scale(x, k):\n    return x * k\n\n\ndef total(xs, k):\n    return sum(scale(x, k) for x in xs)\n"
    root = _write(tmp_path / "calc", {
        "calc/__init__.py": "", "calc/ops.py": ops,
        "tests/test_ops.py": "from calc.ops import total\n\n\ndef test_total():\n    assert total([1, 2], 3) == 9\n",
    })  # fmt: skip
    assert CliRunner().invoke(app, ["init", "--project", str(root), "--no-check", "--no-propose"]).exit_code == 0
    assert verify_statuses(root, tmp_path / "report.json") == (0, {"scale-returns-negated": "killed"})
