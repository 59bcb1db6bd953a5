"""`dflash verify` and `dflash mutations` through the CLI: exit codes, cache, shards, git selection."""

from __future__ import annotations

import json
import subprocess

import pytest
from typer.testing import CliRunner

from verify.cli.mutations import mutations_app
from verify.report.json_report import read_json
from verify.report.verdict import Status

pytestmark = pytest.mark.usefixtures("fresh_registry")  # an empty mutation registry around every test

KILLED_ONLY = ("--mutation", "add-off-by-one", "--mutation", "sub-swaps-operands")


def test_exit_0_when_every_selected_mutation_is_killed(toy_run, cli) -> None:
    result = cli("--project", str(toy_run.root), *KILLED_ONLY)
    assert result.exit_code == 0, result.output
    assert "score 1.000" in result.output


def test_exit_1_when_the_score_is_under_fail_under(toy_run, cli) -> None:
    result = cli("--project", str(toy_run.root), "-m", "add-off-by-one", "-m", "describe-label", "--fail-under", "0.9")
    assert result.exit_code == 1, result.output
    assert "under --fail-under" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--mutation", "no-such-mutation"), "unknown mutation: no-such-mutation;"),
        (("--mutation", "add-off-by-on"), "unknown mutation: add-off-by-on (did you mean add-off-by-one?)"),
        (("--shard", "3/2"), "need 1 <= K <= N"),
        (("--shard", "two"), "must look like K/N"),
        (("--fail-under", "2"), ""),
        (("--no-such-option",), ""),
    ],
    ids=[
        "unknown-mutation",
        "close-to-a-mutation",
        "shard-out-of-range",
        "shard-malformed",
        "fail-under-range",
        "bad-option",
    ],
)
def test_exit_2_on_usage_errors(toy_run, cli, args, message) -> None:
    result = cli("--project", str(toy_run.root), *args)
    assert result.exit_code == 2, result.output
    assert message in result.output


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("jobs", "-1", "jobs must be an integer >= 0"),
        ("gates", '"tests/gates"', 'gates = "tests/gates": expected a list of paths, e.g. ["tests"]'),
        ("mutation_modules", '"toy_mutations"', 'expected a list of module names, e.g. ["my_mutations"]'),
        ("colour", "1", "unknown keys: colour; the valid keys: baseline_timeout_s,"),
        ("gatez", '["tests"]', "unknown keys: gatez (did you mean gates?); the valid keys: "),
        ("mutation_modules", '["no_such_catalog"]', "cannot import mutation module"),
        ("source_roots", '["missing"]', "'missing' does not exist"),
        ("timeout_factor", "0", "timeout_factor must be a positive number"),
        ("flake_reruns", "-1", "flake_reruns must be an integer >= 0"),
        ("conclusive_p_value", "0.01", "conclusive_p_value must be a number from 0 to 1e-4"),
        ("required", '["no-such-mutation"]', "required names unknown mutation: no-such-mutation"),
    ],
    ids=lambda value: str(value).split()[0],
)
def test_exit_2_on_bad_config(toy_copy, cli, key, value, message) -> None:
    root = toy_copy()
    pyproject = root / "pyproject.toml"
    lines = [line for line in pyproject.read_text().splitlines() if not line.startswith(f"{key} =")]
    pyproject.write_text("\n".join(lines) + f"\n{key} = {value}\n")
    result = cli("--project", str(root))
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())


def test_exit_3_on_a_red_baseline_naming_the_gate(toy_copy, cli) -> None:
    root = toy_copy()
    gates = root / "tests" / "gates" / "test_arith.py"
    gates.write_text(gates.read_text().replace("== 12", "== 13"))
    result = cli("--project", str(root), "--no-cache")
    assert result.exit_code == 3, result.output
    output = " ".join(result.output.split())
    assert "test_mul is red (assertion) on unmutated code (AssertionError: assert 12 == 13)" in output


def test_exit_3_names_pytest_refusing_the_baseline_not_an_empty_selection(toy_copy, cli) -> None:
    """A pytest that cannot start (here an option no plugin defines; on a GPU image, a plugin of its own) is
    named with pytest's own words, not misread as "no gate selected"."""
    root = toy_copy()
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('addopts = "--strict-markers -q"', 'addopts = "--no-such-opt"'))
    result = cli("--project", str(root), "--no-cache")
    assert result.exit_code == 3, result.output
    output = " ".join(result.output.split())
    assert "pytest could not run the gates: " in output and "usage error (exit 4)" in output, output
    assert "--no-such-opt" in output and "no gate selected" not in output, output


_GATE = "import os\nimport pathlib\nimport time\n\nimport pytest\n\nfrom toy import arith\n\n\n@pytest.mark.gate\n"

# Gates that no verdict may rest on, each with what the baseline's re-runs must name. {marker}: a path
# outside the project, the same for every child.
BASELINE_FAILURES = {
    # Red on its first run (the baseline's), green on every later one: the re-run alone tells it from red.
    "flaky": (
        {"test_flaky.py": "def test_flaky():\n    marker = pathlib.Path({marker!r})\n    first = not marker.exists()\n"
                          "    marker.touch()\n    assert not first\n"},
        "test_flaky is flaky: red (assertion) in the baseline (AssertionError: assert not True), green on a re-run",
    ),
    # Green in a plain pytest run (test_a_sets.py runs first and leaves the state test_b_needs.py reads), red on
    # its own. The shared baseline gives each child its files: the slow first file keeps one child busy while
    # the other takes the rest, so the dependent gate runs without it and the re-runs name why.
    "needs-another-file": (
        {"test_a_sets.py": "def test_sets():\n    time.sleep(4)\n    os.environ['TOY_READY'] = '1'\n",
         "test_b_needs.py": "def test_needs():\n    assert os.environ.get('TOY_READY') == '1'\n"},
        "test_needs depends on other gates: red (assertion) when run without some of them",
    ),
    # Green when its modules come from the files (plain pytest), red whenever they are served through the
    # import hook, as every mutant's are: not red, not flaky, but a gate no mutant can be judged by.
    "reads-its-loader": (
        {"test_loader.py": "def test_loader():\n    assert type(arith.__loader__).__name__ == 'SourceFileLoader'\n"},
        "test_loader is red (assertion) whenever the project's sources are served through the import hook",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BASELINE_FAILURES))
def test_exit_3_names_why_a_baseline_gate_cannot_judge_mutants(toy_copy, cli, tmp_path, case: str) -> None:
    root = toy_copy()
    files, message = BASELINE_FAILURES[case]
    shared = tmp_path / "shared"  # outside the project, declared writable: children may write nothing else there
    shared.mkdir()
    with (root / "pyproject.toml").open("a") as pyproject:
        pyproject.write(f"writable = [{str(shared)!r}]\n")
    for name, body in files.items():
        (root / "tests" / "gates" / name).write_text(_GATE + body.replace("{marker!r}", repr(str(shared / "m"))))
    result = cli("--project", str(root), "--no-cache", *KILLED_ONLY)
    assert result.exit_code == 3, result.output
    assert message in " ".join(result.output.split())


def test_cache_skips_unchanged_work_and_reruns_changed_work(toy_copy, cli, tmp_path) -> None:
    root = toy_copy()
    args = ("--project", str(root), "-m", "add-off-by-one", "-m", "describe-label", "--json")
    first = cli(*args, str(tmp_path / "1.json"))
    second = cli(*args, str(tmp_path / "2.json"))
    catalog = root / "toy_mutations.py"
    catalog.write_text(catalog.read_text().replace('"return a + b + 1"', '"return a + b + 2"'))
    third = cli(*args, str(tmp_path / "3.json"))
    assert first.exit_code == second.exit_code == third.exit_code == 1, third.output
    cached = [{r.name: r.cached for r in read_json(tmp_path / f"{n}.json")[0].mutations} for n in (1, 2, 3)]
    assert cached[0] == {"add-off-by-one": False, "describe-label": False}
    assert cached[1] == {"add-off-by-one": True, "describe-label": True}
    assert cached[2] == {"add-off-by-one": False, "describe-label": True}  # only the edited mutation re-ran


def test_shards_add_up_to_the_full_run_and_merge_joins_them(toy_run, cli, tmp_path) -> None:
    paths = []
    for shard in ("1/3", "2/3", "3/3"):
        path = tmp_path / f"shard-{shard[0]}.json"
        result = cli("--project", str(toy_run.root), "--shard", shard, "--json", str(path))
        assert result.exit_code in (0, 1), result.output
        paths.append(path)
    names = [[r.name for r in read_json(p)[0].mutations] for p in paths]
    full = sorted(r.name for r in toy_run.report.mutations)
    assert sorted(sum(names, [])) == full
    assert names[0] == full[0::3] and names[1] == full[1::3] and names[2] == full[2::3]
    merged = tmp_path / "merged.json"
    result = cli("merge", *map(str, paths), "--json", str(merged))
    assert result.exit_code == 1, result.output  # the toy has survivors, so the merged run fails like the full one
    report, details = read_json(merged)
    assert {r.name: r.status for r in report.mutations} == {r.name: r.status for r in toy_run.report.mutations}
    assert report.score == toy_run.report.score and report.vacuous_gates == toy_run.report.vacuous_gates
    assert "add-off-by-one" in details
    overlap = cli("merge", str(paths[0]), *map(str, paths), "--json", str(tmp_path / "bad.json"))
    assert overlap.exit_code == 2 and "more than one report" in overlap.output
    missing = cli("merge", str(paths[0]), str(paths[2]), "--json", str(tmp_path / "partial.json"))
    assert missing.exit_code == 2 and "missing shard(s) 2/3 of 3" in missing.output, missing.output
    assert not (tmp_path / "partial.json").exists()
    formats = {"--json": "p.json", "--junit": "p.xml", "--html": "p.html", "--stryker": "p-stryker.json"}
    args = [arg for option, name in formats.items() for arg in (option, str(tmp_path / name))]
    partial = cli("merge", str(paths[0]), str(paths[2]), "--allow-partial", "--project", str(toy_run.root), *args)
    assert partial.exit_code == 1, partial.output
    assert all((tmp_path / name).stat().st_size > 0 for name in formats.values())
    assert sorted(r.name for r in read_json(tmp_path / "p.json")[0].mutations) == sorted(names[0] + names[2])
    data = json.loads(paths[1].read_text())
    data["schema"] = "dflash-verify/0"
    paths[1].write_text(json.dumps(data))
    mismatch = cli("merge", *map(str, paths), "--json", str(tmp_path / "bad.json"))
    assert mismatch.exit_code == 2 and "schema" in mismatch.output


def test_changed_since_runs_only_mutations_whose_file_or_gates_changed(toy_copy, cli, tmp_path) -> None:
    root = toy_copy()
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "."], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "toy"], cwd=root, check=True)
    text = root / "toy" / "text.py"
    text.write_text(text.read_text() + "\n\nUNUSED = 1\n")
    result = cli("--project", str(root), "--changed-since", "HEAD", "-m", "add-off-by-one", "-m", "describe-label",
                 "--json", str(tmp_path / "r.json"))  # fmt: skip
    statuses = {r.name: r.status for r in read_json(tmp_path / "r.json")[0].mutations}
    assert statuses == {"add-off-by-one": Status.SKIPPED, "describe-label": Status.SURVIVED}, result.output
    bad = cli("--project", str(root), "--changed-since", "no-such-rev")
    assert bad.exit_code == 2 and "unknown revision 'no-such-rev'" in " ".join(bad.output.split())
    # A revision that looks like an option never reaches git: nothing is written, exit 2.
    target = tmp_path / "x"
    sneaky = cli("--project", str(root), f"--changed-since=--output={target}")
    assert sneaky.exit_code == 2 and not target.exists(), sneaky.output


def test_all_gates_runs_every_gate(toy_run, cli, tmp_path) -> None:
    result = cli(
        "--project", str(toy_run.root), "--all-gates", "-m", "describe-label", "--json", str(tmp_path / "r.json")
    )
    [only] = read_json(tmp_path / "r.json")[0].mutations
    assert only.ran == toy_run.report.baseline.gate_ids, result.output
    assert only.status is Status.SURVIVED


def test_mutations_list_and_show(toy_run) -> None:
    runner = CliRunner()
    listed = runner.invoke(mutations_app, ["list", "--project", str(toy_run.root)])
    # The toy catalog's stale anchors are said when it loads, each with the nearest lines: exit 1.
    assert listed.exit_code == 1 and "sub-swaps-operands" in listed.output
    assert "stale anchors (2)" in listed.output and "stale-twice: anchor matches 2 times" in listed.output
    shown = runner.invoke(mutations_app, ["show", "add-off-by-one", "--project", str(toy_run.root)])
    assert shown.exit_code == 0, shown.output
    assert "+    return a + b + 1" in shown.output and "off-by-one in a sum" in shown.output
    stale = runner.invoke(mutations_app, ["show", "stale-twice", "--project", str(toy_run.root)])
    assert "anchor matches 2 times" in stale.output
    unknown = runner.invoke(mutations_app, ["show", "nope", "--project", str(toy_run.root)])
    assert unknown.exit_code == 2
    close = runner.invoke(mutations_app, ["show", "add-of-by-one", "--project", str(toy_run.root)])
    assert close.exit_code == 2 and "did you mean add-off-by-one?" in close.output


def test_no_arguments_runs_the_embedded_default_of_the_cwd(toy_copy, cli, monkeypatch) -> None:
    # Its own copy: a run in the shared toy_run's root would replace the last report other tests read back.
    monkeypatch.chdir(toy_copy())
    result = cli()
    assert result.exit_code == 1, result.output  # the toy catalog has survivors, stale and hung mutants
    # Its stale anchors are said before the baseline runs, each with the nearest lines of its file.
    assert "stale anchors (2), found when the catalog loaded" in result.output
    for name in ("add-off-by-one", "sub-hangs", "stale-twice"):
        assert name in result.output


def test_first_kill_runs_the_pins_first_stops_at_the_kill_and_keeps_every_verdict(toy_copy, cli, tmp_path) -> None:
    root = toy_copy()
    # A second gate reaching add(), listed before the pinned one: the full matrix runs both, first-kill only the pin.
    (root / "tests" / "gates" / "test_a_first.py").write_text(
        "import pytest\nfrom toy import arith\n\n\n@pytest.mark.gate\ndef test_add_again():\n"
        "    assert arith.add(1, 1) == 2\n"
    )
    full, fast = tmp_path / "full.json", tmp_path / "fast.json"
    assert cli("--project", str(root), "--no-cache", "--json", str(full)).exit_code == 1
    result = cli("--project", str(root), "--no-cache", "--first-kill", "--json", str(fast))
    assert result.exit_code == 1, result.output
    full_report, fast_report = read_json(full)[0], read_json(fast)[0]
    assert {r.name: r.status for r in fast_report.mutations} == {r.name: r.status for r in full_report.mutations}
    by_name = {r.name: r for r in fast_report.mutations}
    pin = "tests/gates/test_arith.py::test_add"
    # The full matrix runs the pin first too (a hang in a gate collected before it cannot hide the pin).
    assert {r.name: r for r in full_report.mutations}["add-off-by-one"].ran == (
        pin, "tests/gates/test_a_first.py::test_add_again",
    )  # fmt: skip
    assert by_name["add-off-by-one"].ran == (pin,) and by_name["add-off-by-one"].killed_by == (pin,)
    assert fast_report.first_kill and fast_report.vacuous_gates == () and full_report.vacuous_gates
    assert json.loads(fast.read_text())["settings"]["first_kill"] is True


def test_exit_3_when_the_harness_cannot_see_a_failure(toy_copy, cli) -> None:
    root = toy_copy()
    # A conftest hook that swallows every AssertionError (a "soft assertions" plugin gone wrong): no kill by
    # such a harness means anything, so the run must stop before any verdict.
    (root / "tests" / "gates" / "conftest.py").write_text(
        "import pytest\n\n\n@pytest.hookimpl(wrapper=True)\ndef pytest_runtest_call(item):\n"
        "    try:\n        return (yield)\n    except AssertionError:\n        return None\n"
    )
    result = cli("--project", str(root), "--no-cache", *KILLED_ONLY)
    assert result.exit_code == 3, result.output
    assert "the harness did not see a forced failure in tests/gates/test_arith.py::test_add" in " ".join(
        result.output.split()
    )


def test_the_reports_jobs_are_the_children_the_run_held(toy_copy, cli, monkeypatch, tmp_path) -> None:
    # Neither --jobs nor [tool.dflash] jobs: the executor's own capacity (a cluster's, not this machine's cores).
    from verify.run.phases import run as phases

    root = toy_copy()
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("jobs = 2\n", ""))
    real = phases.open_executor

    def three_wide(*args, **kwargs):
        executor = real(*args, **kwargs)
        monkeypatch.setattr(type(executor), "default_jobs", property(lambda self: 3))
        return executor

    monkeypatch.setattr(phases, "open_executor", three_wide)
    cli("--project", str(root), "-m", "add-off-by-one", "--json", str(tmp_path / "r.json"))
    assert json.loads((tmp_path / "r.json").read_text())["settings"]["jobs"] == 3
    told = cli("--project", str(root), "-m", "add-off-by-one", "--jobs", "1", "--json", str(tmp_path / "s.json"))
    assert json.loads((tmp_path / "s.json").read_text())["settings"]["jobs"] == 1, told.output
