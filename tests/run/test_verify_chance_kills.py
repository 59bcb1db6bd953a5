"""A kill by statistical gates alone is confirmed on an independent seed before it counts.

A generated project holds one statistical gate (listed in `[tool.dflash] statistical_gates`, drawing its seed
through `verify.seeds.reseed`) and one plain gate. Its mutants: one that turns the statistical gate red on
gate seed 0 only (a chance red: the kill is not confirmed, it survives with the reason), one red on every
seed (confirmed: killed, with the confirmation in its reason), and one the plain gate kills (never re-run).
The real CLI runs them, on the fork executor and on a local Ray cluster (the seed travels as job data).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from verify.report.verdict import Corroboration, GateOutcome, MutationResult, Outcome, Status
from verify.run.phases.corroboration import Policy
from verify.run.phases.judge import verdict
from verify.seeds import CONFIRM_SEED, GATE_SEED_ENV, reseed

# value(seed) = seed % 10; the statistical gate fails when value(reseed(0)) is 3. Stream 0: reseed(0) = 0;
# stream 1 (CONFIRM_SEED): reseed(0) = 1972503931, so value is 1 there (checked below, not assumed).
COIN = "def value(seed):\n    return seed % 10\n\n\ndef double(x):\n    return 2 * x\n"
GATES = """\
import pytest

from coin import double, value
from verify.seeds import reseed


@pytest.mark.gate
def test_law():
    assert value(reseed(0)) != 3, "the draw landed on the rejection cell"


@pytest.mark.gate
def test_double():
    assert double(2) == 4
"""
CATALOG = """\
from verify.mutation import Mutation, register

register(
    Mutation("chance-red", "shifts the draw: red on seed 0 only", "coin.py", "return seed % 10",
             "return seed % 10 + 3"),
    Mutation("always-red", "the draw is constant: red on every seed", "coin.py", "return seed % 10", "return 3"),
    Mutation("double-adds", "wrong operator", "coin.py", "return 2 * x", "return 2 + x + 1"),
)
"""
PYPROJECT = """\
[tool.pytest.ini_options]
addopts = "-q -p no:cacheprovider"
markers = ["gate: a gate"]

[tool.dflash]
mutation_modules = ["coin_mutations"]
source_roots = ["coin.py"]
gates = ["tests"]
jobs = 2
preload = []
invariant_errors = []
statistical_gates = ["tests/test_coin.py::test_law"]
"""


def _project(root: Path) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "coin.py").write_text(COIN)
    (root / "tests" / "test_coin.py").write_text(GATES)
    (root / "coin_mutations.py").write_text(CATALOG)
    (root / "pyproject.toml").write_text(PYPROJECT)
    return root


def test_the_confirming_stream_really_differs(monkeypatch) -> None:
    """The toy's premise: stream 0 keeps seeds as written; the confirming stream moves them."""
    assert reseed(0) == 0
    monkeypatch.setenv(GATE_SEED_ENV, str(CONFIRM_SEED))
    assert reseed(0) % 10 == 1 and reseed(0) != 0
    monkeypatch.setenv(GATE_SEED_ENV, "x")
    with pytest.raises(ValueError, match="DFLASH_GATE_SEED must be an integer"):
        reseed(0)


@pytest.mark.parametrize("executor", ["fork", pytest.param("ray", marks=pytest.mark.slow)])
def test_a_statistical_kill_counts_only_when_an_independent_seed_confirms_it(tmp_path, cli, executor) -> None:
    if executor == "ray":
        pytest.importorskip("ray")
    root = _project(tmp_path / "project")
    result = cli("--project", str(root), "--executor", executor, "--json", str(tmp_path / "report.json"))
    report = json.loads((tmp_path / "report.json").read_text())
    by_name = {m["name"]: m for m in report["mutations"]}
    assert {n: m["status"] for n, m in by_name.items()} == {
        "chance-red": "survived",
        "always-red": "killed",
        "double-adds": "killed",
    }, result.output
    chance = by_name["chance-red"]
    assert chance["reason"].startswith(
        "statistical kill not confirmed: tests/test_coin.py::test_law red on gate seed 0"
    )
    assert f"green on gate seed {CONFIRM_SEED}" in chance["reason"]
    assert chance["attempts"] == 2 and chance["killed_by"] == []
    [law] = [o for o in chance["outcomes"] if o["gate_id"].endswith("test_law")]
    # A chance red is a pass, said so by its corroboration; its exception type is the first seed's red's.
    assert (law["outcome"], law["corroboration"], law["exc_type"]) == ("passed", "chance", "AssertionError")
    confirmed = by_name["always-red"]
    assert confirmed["killed_by"] == ["tests/test_coin.py::test_law"] and confirmed["attempts"] == 2
    [law] = [o for o in confirmed["outcomes"] if o["gate_id"].endswith("test_law")]
    assert (law["outcome"], law["corroboration"]) == ("assertion", "reseeded")
    assert confirmed["reason"] == (
        "statistical kill confirmed: tests/test_coin.py::test_law red again on an independent gate seed"
    )
    plain = by_name["double-adds"]
    assert plain["attempts"] == 1 and plain["reason"] == "", "a kill by a plain gate is never re-run"
    assert result.exit_code == 1, result.output  # the run fails on the survivor (exit 1, survivors)
    # The terminal: the survivor with its reason, the confirmed kill with its confirmation.
    survivors = cli("show", "--survivors", "--project", str(root))
    flat = " ".join(survivors.output.split())
    assert "survived chance-red statistical kill not confirmed: tests/test_coin.py::test_law red on gate seed 0" in (
        flat
    ), survivors.output
    shown = cli("show", "-m", "always-red", "--project", str(root))
    assert "reason: statistical kill confirmed: tests/test_coin.py::test_law" in shown.output, shown.output
    assert "red again on gate seed 1" in " ".join(shown.output.split()), shown.output
    if executor == "ray":
        return  # the cache below is the executor's neither way (and one local cluster a test is enough)
    # The next run replays every verdict from the cache, confirmations included, without running a mutant.
    again = cli("--project", str(root), "--executor", executor, "--json", str(tmp_path / "again.json"))
    replayed = json.loads((tmp_path / "again.json").read_text())["mutations"]
    assert {m["name"]: (m["status"], m["reason"], m["cached"]) for m in replayed} == {
        n: (m["status"], m["reason"], True) for n, m in by_name.items()
    }, again.output


def _red(gate_id: str) -> GateOutcome:
    return GateOutcome(gate_id, Outcome.ASSERTION, 0.1, "AssertionError", "p-value 1e-5")


@pytest.mark.parametrize(
    ("second", "status", "reason"),
    [
        (Outcome.ASSERTION, Status.KILLED, "statistical kill confirmed: s::law red again on an independent gate seed"),
        (Outcome.PASSED, Status.SURVIVED, "statistical kill not confirmed: s::law red on gate seed 0"),
        (Outcome.EXCEPTION, Status.ERROR, "no verdict from s::law: red on gate seed 0 (AssertionError), then"),
        (Outcome.NOT_RUN, Status.ERROR, "no verdict from s::law: red on gate seed 0 (AssertionError), then"),
    ],
)
def test_confirmation_outcomes(second: Outcome, status: Status, reason: str) -> None:
    """Red again kills; green again survives, with the first red kept in the reason; anything else (a crash, a
    lost child) is harness trouble: an error, never a verdict."""
    first = (_red("s::law"), GateOutcome("p::plain", Outcome.PASSED, 0.1))
    killed = verdict("m", first, ("s::law", "p::plain"), 0.2, 1)
    policy = Policy(("s::",))
    assert policy.awaiting(killed) == ("s::law",)
    assert Policy(("p::",)).awaiting(killed) == (), "a killer outside statistical_gates needs no confirmation"
    again = (GateOutcome("s::law", second, 0.1, "" if second is Outcome.PASSED else "X", "m"),)
    outcomes = policy.reseeded(first, ("s::law",), again)
    judged = verdict("m", outcomes, ("s::law", "p::plain"), 0.4, 2)
    assert judged.status is status and judged.reason.startswith(reason), judged.reason
    # Rejudging from the outcomes alone (the flake check does) reaches the same verdict and reason.
    assert verdict("m", judged.outcomes, judged.ran, 0.4, 2) == judged


def test_a_kill_by_a_plain_gate_beside_a_statistical_one_needs_no_confirmation() -> None:
    both = verdict("m", (_red("s::law"), _red("p::plain")), ("s::law", "p::plain"), 0.2, 1)
    assert isinstance(both, MutationResult) and Policy(("s::",)).awaiting(both) == ()


def test_first_kill_mode_confirms_too(tmp_path, cli) -> None:
    """In first-kill mode a chance kill is confirmed the same way, with the gates its first child never reached."""
    root = _project(tmp_path / "project")
    cli("--project", str(root), "--first-kill", "--json", str(tmp_path / "report.json"))
    by_name = {m["name"]: m for m in json.loads((tmp_path / "report.json").read_text())["mutations"]}
    assert by_name["chance-red"]["status"] == "survived"
    assert by_name["chance-red"]["reason"].startswith("statistical kill not confirmed")
    assert by_name["always-red"]["status"] == "killed"
    assert by_name["always-red"]["reason"].startswith("statistical kill confirmed")


def test_a_red_the_second_seed_reproduced_is_not_rerun_on_the_pristine_tree(tmp_path, cli) -> None:
    """The flake check re-runs the plain gate that killed; the statistical gate, whose reds all went to the
    second seed (reproduced, or turning no verdict red), runs on the pristine tree in the baseline alone. The
    gates log each run to a writable folder: the unmutated code gives value(5) == 5 and double(2) == 4."""
    root, runs = _project(tmp_path / "project"), tmp_path / "runs"
    runs.mkdir()
    logged = GATES
    for gate in ("law", "double"):
        logged = logged.replace(
            f"def test_{gate}():\n",
            f"def test_{gate}():\n    with open({str(runs / gate)!r}, 'a') as log:\n"
            "        log.write(f'{value(5)} {double(2)}\\n')\n",
        )
    (root / "tests" / "test_coin.py").write_text(logged)
    text = (root / "pyproject.toml").read_text()
    (root / "pyproject.toml").write_text(text + f"writable = [{str(runs)!r}]\n")
    # --no-explain: the survivor's explanation runs the gates again in its own children, which log too.
    result = cli("--project", str(root), "--json", str(tmp_path / "report.json"), "--no-explain")
    report = json.loads((tmp_path / "report.json").read_text())
    assert {m["name"]: m["status"] for m in report["mutations"]} == {
        "chance-red": "survived",
        "always-red": "killed",
        "double-adds": "killed",
    }, result.output
    pristine = "5 4"
    # test_law ran on each mutant (the statistical ones twice) and on the unmutated tree in the baseline alone.
    law = (runs / "law").read_text().splitlines()
    assert sorted(law) == sorted([pristine, "3 4", "3 4", "8 4", "8 4", "5 5"]), law
    # test_double killed double-adds with one red: the baseline and the full matrix's three pristine re-runs.
    assert (runs / "double").read_text().splitlines().count(pristine) == 1 + 3, (runs / "double").read_text()


def test_the_flake_check_reruns_every_red_but_those_the_second_seed_reproduced_or_is_about_to_run() -> None:
    reseeded = Corroboration.RESEEDED
    again = GateOutcome("s::law", Outcome.ASSERTION, 0.1, "AssertionError", "p-value 1e-6", None, reseeded)
    results = {
        "confirmed": verdict("confirmed", (again,), ("s::law",), 0.2, 2),
        "awaiting": verdict("awaiting", (_red("s::other"), _crash("p::crash")), ("s::other", "p::crash"), 0.2, 1),
        "plain": verdict("plain", (_red("p::plain"),), ("p::plain",), 0.1, 1),
        "survivor": verdict("survivor", (GateOutcome("p::green", Outcome.PASSED, 0.1),), ("p::green",), 0.1, 1),
    }
    policy = Policy(("s::",))
    assert policy.awaiting(results["awaiting"]) == ("s::other",) and policy.awaiting(results["confirmed"]) == ()
    # Before the second seed: its killers are left to it; a crash beside them is no killer and is re-run.
    assert policy.flake_suspects(results.values(), seed_to_come=True) == {"p::crash", "p::plain"}
    # After it (a gate first red there): every red but the reproduced one.
    assert policy.flake_suspects(results.values(), seed_to_come=False) == {"s::other", "p::crash", "p::plain"}


def _crash(gate_id: str) -> GateOutcome:
    return GateOutcome(gate_id, Outcome.EXCEPTION, 0.1, "RuntimeError", "boom")


def test_a_gate_first_red_on_the_second_seed_is_flake_checked_after_it(tmp_path, cli) -> None:
    """First-kill mode: the mutant stops at test_law (the cheaper gate: test_double sleeps), red on seed 0
    only; the second seed runs it (green) and then test_double, never reached before, red there once: the
    flake check re-runs test_double on the unmutated tree after the second seed (value(5) == 5, double(2) == 4
    there; the mutant's own run logs "8 5")."""
    root, runs = _project(tmp_path / "project"), tmp_path / "runs"
    runs.mkdir()
    both = (
        "from verify.mutation import Mutation, register\n\n"
        "register(Mutation('both-wrong', 'a shifted draw and a wrong operator', 'coin.py',\n"
        "                  'return seed % 10\\n\\n\\ndef double(x):\\n    return 2 * x',\n"
        "                  'return seed % 10 + 3\\n\\n\\ndef double(x):\\n    return 2 + x + 1'))\n"
    )
    (root / "coin_mutations.py").write_text(both)
    slow = GATES.replace(
        "def test_double():\n",
        "def test_double():\n    import time\n\n    time.sleep(0.3)\n"
        f"    with open({str(runs / 'double')!r}, 'a') as log:\n"
        "        log.write(f'{value(5)} {double(2)}\\n')\n",
    )
    (root / "tests" / "test_coin.py").write_text(slow)
    text = (root / "pyproject.toml").read_text()
    (root / "pyproject.toml").write_text(text + f"writable = [{str(runs)!r}]\n")
    result = cli("--project", str(root), "--first-kill", "--json", str(tmp_path / "report.json"))
    [mutant] = json.loads((tmp_path / "report.json").read_text())["mutations"]
    assert mutant["status"] == "killed" and mutant["attempts"] == 2, result.output
    assert mutant["killed_by"] == ["tests/test_coin.py::test_double"], mutant
    # The baseline's run, the mutant's on the second seed, then the flake check's.
    assert (runs / "double").read_text().splitlines() == ["5 4", "8 5", "5 4"], (runs / "double").read_text()
