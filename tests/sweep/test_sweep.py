"""A real mutmut 3.8.1 sweep of the toy project: exact verdicts, reports, promotion, an untouched tree.

`swept` (conftest) is one CLI sweep of a copy of the toy project, shared by the tests that read it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verify.cli.sweep import sweep_app
from verify.config.catalog import load_mutations
from verify.config.settings import load_config
from verify.mutation.apply import Applied, apply_mutation
from verify.report.verdict import Status
from verify.sweep.driver import SweepConfig, run_sweep
from verify.sweep.report import result_from_json
from verify.sweep.result import NO_TESTS, NOT_CHECKED, DecoratedFunction, SweepOutcome
from verify.sweep.undecorate import undecorate

MODULE = "toyrunner/accept.py"
SURVIVOR = "toyrunner.accept.x_bonus_len__mutmut_2"
# What the toy's gates make of every operator mutant mutmut 3.8.1 generates for toyrunner/accept.py.
EXPECTED = {
    **{f"toyrunner.accept.x_num_accepted__mutmut_{n}": Status.KILLED for n in range(1, 7)},
    "toyrunner.accept.x_bonus_len__mutmut_1": Status.KILLED,  # `- 1`: bonus_len(2) > 2 fails
    SURVIVOR: Status.SURVIVED,  # `+ 2`: the gate only checks "> 2"
    "toyrunner.accept.x_scale__mutmut_1": Status.EQUIVALENT,  # `x / 1`, marked in equivalents.toml
    "toyrunner.accept.x_scale__mutmut_2": Status.KILLED,  # `x * 2`
    "toyrunner.accept.x_untested__mutmut_1": NO_TESTS,
    "toyrunner.accept.x_untested__mutmut_2": NO_TESTS,
    # Under @functools.cache: reached because the sweep's copy spells the decorator as an assignment.
    "toyrunner.accept.x_cached__mutmut_1": Status.KILLED,
    "toyrunner.accept.x_cached__mutmut_2": Status.KILLED,
}


def _saved(swept):
    return result_from_json(json.loads(swept.state.read_text()))


def test_sweep_gives_exactly_the_known_verdicts(swept) -> None:
    result = _saved(swept)
    assert result.outcome is SweepOutcome.COMPLETE, result.message
    assert {m.key: m.label for m in result.mutants} == EXPECTED
    # One verdict model with `dflash verify`: a no-tests mutant is a survivor (scored against), as there.
    assert {m.status for m in result.mutants if m.label == NO_TESTS} == {Status.SURVIVED}
    # The red gpu-marked gate was deselected, or mutmut's clean run would have failed (exit 3).
    assert swept.exit_code == 1, swept.output  # a survivor is under the default --fail-under 1.0
    assert result.decorated == ()  # nothing left unmutated
    assert result.undecorated == (DecoratedFunction(MODULE, "cached", ("functools.cache",)),)
    assert result.count_in(result.undecorated) == 2
    assert "1 decorated function reached: 2 mutants in cached (@functools.cache)" in " ".join(swept.output.split())
    assert result.count(Status.KILLED) / result.num_scored == pytest.approx(result.score)
    assert result.num_scored == len(EXPECTED) - 1  # every mutant but the equivalent one


def test_survivor_carries_its_diff_and_anchor(swept) -> None:
    survivor = _saved(swept).find(SURVIVOR)
    assert survivor is not None and survivor.function == "bonus_len" and survivor.line == 14
    assert "-    return num_accepted + 1\n+    return num_accepted + 2" in survivor.diff
    assert (survivor.anchor, survivor.replacement) == ("    return num_accepted + 1", "    return num_accepted + 2")
    rows = [" ".join(line.replace("│", " ").split()) for line in swept.output.splitlines()]
    assert "toyrunner/accept.py bonus_len 1 0 none" in rows  # survived, no tests, registered mutations
    assert "toyrunner/accept.py untested 0 2 none" in rows


def test_working_tree_is_byte_identical(swept) -> None:
    assert swept.after == swept.before


def test_reports_keep_the_verify_schema_with_a_sweep_section(swept) -> None:
    data = json.loads((swept.reports / "sweep.json").read_text())
    assert data["schema"] == "dflash-verify/1" and data["generated"] is True
    mutations = {m["name"]: m for m in data["mutations"]}
    assert {name: m["status"] for name, m in mutations.items()} == {
        key: str(Status.SURVIVED if label == NO_TESTS else label) for key, label in EXPECTED.items()
    }
    # The gates mutmut ran against each mutant (its stats run): none for a no-tests one.
    assert mutations[SURVIVOR]["ran"] == ["tests/gates/test_accept.py::test_bonus_is_more_than_accepted"]
    assert mutations["toyrunner.accept.x_untested__mutmut_1"]["ran"] == []
    assert data["verdict"]["result"] == "FAIL" and data["verdict"]["score"] == pytest.approx(10 / 13)
    assert [(m["name"], m["function"]) for m in data["catalog"]] == [
        ("accept-on-mismatch", "toyrunner/accept.py:num_accepted")
    ]
    functions = {f["function"]: f for f in data["sweep"]["functions"]}
    assert functions["num_accepted"]["registered"] == ["accept-on-mismatch"]
    assert functions["bonus_len"]["counts"] == {"killed": 1, "survived": 1}
    assert (data["sweep"]["num_decorated"], data["sweep"]["num_undecorated"]) == (0, 1)
    assert data["sweep"]["num_undecorated_mutants"] == 2
    suite = ET.parse(swept.reports / "sweep.xml").getroot()
    failures = {case.get("name"): case.find("failure") for case in suite.iter("testcase")}
    assert failures[SURVIVOR].get("type") == "survived" and "+    return num_accepted + 2" in failures[SURVIVOR].text
    assert failures["toyrunner.accept.x_num_accepted__mutmut_1"] is None
    assert suite.get("failures") == "3"  # the survivor and the two no-tests mutants
    page = (swept.reports / "sweep.html").read_text()
    assert "<h1>dflash sweep</h1>" in page and "<h2>Functions with survivors</h2>" in page
    assert "[[equivalent]]\nmodule = &quot;toyrunner/accept.py&quot;\nfunction = &quot;bonus_len&quot;" in page
    stryker = json.loads((swept.reports / "stryker.json").read_text())
    mutants = {m["id"]: m for m in stryker["files"][MODULE]["mutants"]}
    assert mutants[SURVIVOR]["status"] == "Survived" and mutants[SURVIVOR]["location"]["start"]["line"] == 14
    assert mutants["toyrunner.accept.x_untested__mutmut_1"]["status"] == "NoCoverage"
    assert mutants["toyrunner.accept.x_scale__mutmut_1"]["status"] == "Ignored"


def test_promoted_survivor_is_a_mutation_the_verify_engine_applies(swept, toy: Path) -> None:
    root = toy
    args = ["promote", SURVIVOR, "bonus-off-by-one", "--root", str(root), "--state", str(swept.state)]
    done = CliRunner().invoke(sweep_app, args)
    assert done.exit_code == 0, done.output
    catalog = load_mutations(load_config(root))
    assert set(catalog) == {"accept-on-mismatch", "bonus-off-by-one"}
    applied = apply_mutation(catalog["bonus-off-by-one"], root)
    assert isinstance(applied, Applied)
    # mutmut's own `apply` writes the same mutant into the kept private copy: the sources must agree.
    mutmut = Path(sys.executable).with_name("mutmut")
    subprocess.run([str(mutmut), "apply", SURVIVOR], cwd=swept.work, check=True, capture_output=True)
    # (The copy spells decorators as assignments; the mutant is the same once ours is spelt that way too.)
    assert undecorate(applied.mutated)[0] == (swept.work / MODULE).read_text()
    again = CliRunner().invoke(sweep_app, args)
    assert again.exit_code == 2 and "already registered" in again.output


def test_budget_stops_cleanly_and_reports_what_was_reached(toy: Path, digest) -> None:
    root = toy
    before = digest(root)
    result = run_sweep(SweepConfig(root=root, paths=("toyrunner",), jobs=1, budget_s=0.5))
    assert result.outcome is SweepOutcome.BUDGET
    assert "the time budget ran out" in result.message
    assert all(m.label in (NOT_CHECKED, *EXPECTED.values()) for m in result.mutants)
    assert digest(root) == before


def test_gates_red_on_the_clean_run_is_a_harness_failure_exit_3(toy: Path) -> None:
    gates = toy / "tests/gates/test_accept.py"
    gates.write_text(gates.read_text().replace("assert scale(3) == 3", "assert scale(3) == 4"))
    done = CliRunner().invoke(sweep_app, ["--root", str(toy), "--state", str(toy.parent / "state.json")])
    assert done.exit_code == 3, done.output
    assert "mutmut run exited 1" in done.output
