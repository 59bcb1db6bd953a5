"""The fork executor and the project config it runs under, on the toy project."""

from __future__ import annotations

import dataclasses
import os
import sys
import time

import pytest

from verify.config.catalog import load_mutations
from verify.config.project import project_files
from verify.config.settings import ConfigError, load_config
from verify.mutation import Mutation
from verify.report.verdict import MutationResult, Status
from verify.run.execution.ceilings import load_scale
from verify.run.execution.fork import Executor, Job
from verify.run.execution.overtime import limit_s
from verify.run.phases import cache as cache_mod
from verify.run.phases.cache import ResultCache, tree_digest
from verify.run.phases.coverage_map import CoverageMap
from verify.run.phases.pristine import run_pristine
from verify.sandbox import namespaces

ARITH = "toy/arith.py"
TEST_MUL = "tests/gates/test_arith.py::test_mul"
TEST_SUB = "tests/gates/test_arith.py::test_sub"


def _override(root, old: str, new: str) -> tuple[tuple[str, str], ...]:
    return ((ARITH, (root / ARITH).read_text().replace(old, new)),)


def test_exit_without_result_is_a_crash_with_the_code(toy_copy) -> None:
    root = toy_copy()
    with Executor(load_config(root)) as executor:
        job = Job("exits", (TEST_MUL,), 30.0, _override(root, "return a * b", "return __import__('os')._exit(3)"))
        [result] = executor.run([job], 1)
    assert (result.state, result.reason) == ("died", "exited with code 3")
    # The gate that was running when the child exited is red by that exit, not by a check.
    assert [(o.gate_id, o.outcome, o.exc_type) for o in result.outcomes] == [(TEST_MUL, "exception", "exit 3")]


def _refused_once(marker):
    """`namespaces.entered` as a child sees it: refused for the first child (which leaves `marker`), then as it is."""
    entered = namespaces.entered

    def refuse_first(base, tmp, memory_bytes):
        if not marker.exists():
            marker.write_text("refused")
            os.write(2, b"not confined, so no gate ran: refused for the test\n")
            return False
        return entered(base, tmp, memory_bytes)

    return refuse_first


def test_a_child_that_could_not_confine_itself_is_tried_once_more(toy_copy, tmp_path, monkeypatch) -> None:
    # No gate ran in it: harness trouble, so the same job runs again in a fresh child, and the first try is named.
    monkeypatch.setenv("DFLASH_WARM", "off")
    monkeypatch.setattr(namespaces, "entered", _refused_once(tmp_path / "refused"))
    root = toy_copy()
    with Executor(load_config(root)) as executor:
        [result] = executor.run([Job("once", (TEST_MUL,), 30.0)], 1)
        assert executor.unconfined == ["once: not confined, so no gate ran: refused for the test (exit 77)"]
    assert (result.state, [o.outcome for o in result.outcomes]) == ("done", ["passed"])


def test_a_child_refused_confinement_twice_runs_no_gate(toy_copy, monkeypatch) -> None:
    monkeypatch.setenv("DFLASH_WARM", "off")
    monkeypatch.setattr(namespaces, "entered", lambda *_: False)
    root = toy_copy()
    with Executor(load_config(root)) as executor:
        [result] = executor.run([Job("never", (TEST_MUL,), 30.0)], 1)
        assert len(executor.unconfined) == 1  # tried once more, not forever
    assert result.state == "unconfined"
    assert [(o.gate_id, o.outcome) for o in result.outcomes] == [(TEST_MUL, "not-run")]


def test_ctrl_c_kills_children_and_keeps_finished_results(toy_copy) -> None:
    root = toy_copy()
    jobs = [
        Job("quick", (TEST_MUL,), 30.0),
        Job("hangs", (TEST_SUB,), 30.0, _override(root, "return a - b", "while True: pass")),
    ]

    seen = []

    def interrupt_after_first(result) -> None:
        seen.append(result)
        raise KeyboardInterrupt

    started = time.monotonic()
    with Executor(load_config(root)) as executor, pytest.raises(KeyboardInterrupt):
        executor.run(jobs, 2, interrupt_after_first)
    assert [r.key for r in seen] == ["quick"] and seen[0].state == "done"
    assert time.monotonic() - started < 20  # the hanging child was killed, not waited for


def test_private_copy_holds_the_project_files_and_the_parent_imports_nothing_of_it(toy_copy) -> None:
    root = toy_copy()
    (root / "toy" / "__pycache__").mkdir()
    (root / "toy" / "__pycache__" / "arith.cpython-311.pyc").write_bytes(b"stale")
    config = load_config(root)
    assert project_files(config) == [
        "pyproject.toml", "tests/gates/test_arith.py", "toy/__init__.py", "toy/arith.py", "toy/text.py",
    ]  # fmt: skip
    with Executor(config) as executor:
        copied = sorted(p.relative_to(executor.pristine).as_posix() for p in executor.pristine.rglob("*.py"))
        [result] = executor.run([Job("plain", (TEST_MUL,), 30.0)], 1)
    assert copied == ["tests/gates/test_arith.py", "toy/__init__.py", "toy/arith.py", "toy/text.py"]
    assert result.state == "done" and [o.outcome for o in result.outcomes] == ["passed"]
    assert "toy" not in sys.modules and "toy.arith" not in sys.modules


def test_a_gate_module_the_parent_imported_from_the_users_tree_is_the_childs_own_copy(toy_copy, monkeypatch) -> None:
    # An outer pytest run leaves the user's gate module in sys.modules under its bare name. The parent decides
    # once, before forking, which loaded modules are the user's (`child.prime`); such a module must still be
    # dropped in every child, so that pytest imports the private copy and the mutant's text is what runs.
    root = toy_copy()
    monkeypatch.syspath_prepend(str(root / "tests" / "gates"))
    monkeypatch.syspath_prepend(str(root))
    import test_arith  # type: ignore[import-not-found]

    try:
        with Executor(load_config(root)) as executor:
            job = Job("mutant", (TEST_MUL,), 30.0, _override(root, "return a * b", "return a + b"))
            [result] = executor.run([job], 1)
        assert test_arith.arith.mul(4, 3) == 12  # the parent's copies are untouched
        assert [(o.gate_id, o.outcome) for o in result.outcomes] == [(TEST_MUL, "assertion")]
    finally:
        for name in ("test_arith", "toy", "toy.arith", "toy.text"):
            sys.modules.pop(name, None)


def test_tree_digest_follows_source_edits(toy_copy) -> None:
    root = toy_copy()
    config = load_config(root)
    before = tree_digest(config)
    assert tree_digest(config) == before
    (root / "toy" / "text.py").write_text((root / "toy" / "text.py").read_text() + "\n# edited\n")
    assert tree_digest(config) != before


@pytest.mark.parametrize(
    ("seam", "other"),
    [
        ("python_version", lambda: "3.10"),
        ("package_version", lambda module: "2.5.0" if module == "torch" else cache_mod.metadata.version(module)),
        ("package_version", lambda module: "1.26.0" if module == "numpy" else cache_mod.metadata.version(module)),
    ],
    ids=["another-python", "another-torch", "another-preloaded-package"],
)
def test_a_verdict_cached_under_another_python_or_package_version_is_a_miss(toy_copy, monkeypatch, seam, other):
    # The toy preloads numpy (as a project preloads its engine's libraries); torch is keyed whether preloaded or not.
    root = toy_copy()
    config = dataclasses.replace(load_config(root), preload=("numpy.random",))
    mutation = Mutation("mul-adds", "a product summed", ARITH, "return a * b", "return a + b")
    cache = ResultCache(root)
    cache.put(ResultCache.key(tree_digest(config), mutation, False), MutationResult("mul-adds", Status.KILLED))
    hit = cache.get(ResultCache.key(tree_digest(config), mutation, False))
    assert hit is not None and hit.cached and hit.status is Status.KILLED  # the same interpreter replays it
    facts = cache_mod.interpreter_facts(config)
    assert facts[0] == f"{sys.version_info.major}.{sys.version_info.minor}"
    assert [top for top, _ in facts[1]] == ["numpy", "torch"] and all(version for _, version in facts[1]), facts
    monkeypatch.setattr(cache_mod, seam, other)
    assert cache_mod.interpreter_facts(config) != facts
    assert cache.get(ResultCache.key(tree_digest(config), mutation, False)) is None


def test_config_defaults_and_package_catalog(tmp_path) -> None:
    (tmp_path / "runner").mkdir()
    (tmp_path / "tests" / "gates").mkdir(parents=True)
    catalog = tmp_path / "catalog_pkg"
    catalog.mkdir()
    (catalog / "__init__.py").write_text("")
    for index in (1, 2):
        (catalog / f"area{index}.py").write_text(
            "from verify.mutation import Mutation, register\n"
            f"register(Mutation('bug-{index}', 'a bug', 'runner/a.py', 'x', 'y'))\n"
        )
    (tmp_path / "pyproject.toml").write_text('[tool.dflash]\nmutation_modules = ["catalog_pkg"]\n')
    config = load_config(tmp_path)
    assert (config.gates, config.source_roots, config.jobs) == (("tests/gates",), ("runner",), 0)
    assert config.num_jobs >= 1
    assert list(load_mutations(config)) == ["bug-1", "bug-2"]
    assert not list(tmp_path.rglob("__pycache__"))  # loading the catalog writes nothing into the tree
    (catalog / "area2.py").write_text((catalog / "area2.py").read_text().replace("bug-2", "bug-1"))
    with pytest.raises(ConfigError, match="registered twice"):
        load_mutations(config)


def test_missing_pyproject_is_a_config_error(tmp_path) -> None:
    with pytest.raises(ConfigError, match="no pyproject.toml"):
        load_config(tmp_path)


def test_an_unmutated_run_shares_its_bytecode_and_a_mutant_never_does(toy_copy) -> None:
    # Children load the pristine tree's caches instead of compiling every source and rewriting every gate
    # again; only an unmutated run's caches are taken (a mutant could write any file into its copy).
    root = toy_copy()
    # A cache of a gate's file (no source's: those are compiled, and never replaced, before any child runs).
    poison = (
        "(lambda p: (p.mkdir(exist_ok=True), (p / 'test_arith.cpython-311.pyc').write_bytes(b'x')))"
        "(__import__('pathlib').Path(__file__).parents[1] / 'tests' / 'gates' / '__pycache__')"
    )
    with Executor(load_config(root)) as executor:
        # The sources' own caches are compiled once when the pristine tree is made (`compile_sources`).
        compiled = {p: p.read_bytes() for p in executor.pristine.rglob("*.pyc")}
        assert sorted(p.relative_to(executor.pristine).parent.as_posix() for p in compiled) == ["toy/__pycache__"] * 3
        writes = _override(root, "return a * b", f"return {poison} and a * b")
        mutant = Job("mutant", (TEST_MUL,), 30.0, writes, share_bytecode=True)
        executor.run([mutant], 1)
        assert {p: p.read_bytes() for p in executor.pristine.rglob("*.pyc")} == compiled
        executor.run([Job("shared", (TEST_MUL,), 30.0, share_bytecode=True)], 1)
        cached = sorted(p.relative_to(executor.pristine).as_posix() for p in executor.pristine.rglob("*.pyc"))
        [again] = executor.run([Job("later", (TEST_MUL, TEST_SUB), 30.0)], 1)
    assert any(c.startswith("toy/__pycache__/arith.") for c in cached), cached
    assert any(c.startswith("tests/gates/__pycache__/test_arith.") and "pytest" in c for c in cached), cached
    assert [o.outcome for o in again.outcomes] == ["passed", "passed"]


def test_a_mutant_that_rewrites_its_copy_leaves_the_next_child_a_pristine_one(toy_copy, monkeypatch) -> None:
    # One slot, so every child gets the copy the last one gave back, if that one left it untouched. Every job
    # in a fresh child: a warm worker's copy is its own (test_verify_warm.py).
    monkeypatch.setenv("DFLASH_WARM", "off")
    root = toy_copy()
    gate = "tests/gates/test_arith.py"
    rewrite = f"(__import__('pathlib').Path(__file__).parents[1] / '{gate}').write_text('def test_sub(): assert 0')"
    with Executor(load_config(root)) as executor:
        writes = _override(root, "return a * b", f"return {rewrite} and a * b")
        executor.run([Job("rewrites", (TEST_MUL,), 30.0, writes)], 1)
        after = executor.run([Job("next", (TEST_MUL, TEST_SUB), 30.0), Job("last", (TEST_SUB,), 30.0)], 1)
        made = executor.copies.made
    assert [[o.outcome for o in run.outcomes] for run in after] == [["passed", "passed"], ["passed"]]
    assert made == 2  # the rewritten copy was replaced; the clean one served "next" and then "last"


class _NoProgress:
    def phase(self, name: str, total: int) -> None:
        pass

    def advance(self, label: str) -> None:
        pass


def test_a_baseline_shared_by_children_equals_one_childs(toy_copy, tmp_path) -> None:
    # The toy's gates split over two files, so that three children sharing the baseline each have some to claim.
    root = toy_copy()
    gates = root / "tests" / "gates"
    text = (gates / "test_arith.py").read_text()
    (gates / "test_arith2.py").write_text(text)
    config = load_config(root)
    runs = {}
    for num_jobs in (1, 3):
        cache = ResultCache(root, enabled=False)
        with Executor(config) as executor:
            runs[num_jobs] = run_pristine(executor, cache, tree_digest(config), _NoProgress(), num_jobs)
    (one, one_coverage, _), (shared, shared_coverage, _) = runs[1], runs[3]
    assert one.gate_ids == shared.gate_ids  # each gate once, in collection order
    assert len(shared.gate_ids) == len(set(shared.gate_ids)) > 4
    ids = one.gate_ids
    one_map, shared_map = CoverageMap.from_json(one_coverage, ids), CoverageMap.from_json(shared_coverage, ids)
    for line in range(1, len((root / ARITH).read_text().splitlines()) + 1):
        assert one_map.gates_reaching(ARITH, [line]) == shared_map.gates_reaching(ARITH, [line]), line


def test_a_hanging_gate_ends_at_its_own_deadline_and_the_child_moves_on(toy_copy) -> None:
    """A mutant that hangs one gate of three costs that gate's deadline, not the job's summed budget: the child
    ends the gate as a timeout, leaves the rest of its file (whose module state the hang may have broken) not run,
    and runs the gates of the other files. The job's own budget (an hour) is never reached: the child finished."""
    root = toy_copy()
    (root / "tests/gates/test_more.py").write_text(
        "import pytest\nfrom toy import arith\n\n\n@pytest.mark.gate\ndef test_add_again():\n"
        "    assert arith.add(1, 1) == 2\n"
    )
    add, more = "tests/gates/test_arith.py::test_add", "tests/gates/test_more.py::test_add_again"
    gates = (add, TEST_SUB, TEST_MUL, more)
    hang = _override(root, "return a - b", "while True: pass")
    job = Job("hangs", gates, 3600.0, hang, deadlines=tuple((g, 0.5) for g in gates))
    with Executor(load_config(root)) as executor:
        [result] = executor.run([job], 1)
    assert result.state == "done"  # ended by the child at the gate's deadline, not killed at the job's budget
    outcomes = {o.gate_id: (o.outcome, o.exc_type) for o in result.outcomes}
    assert outcomes == {
        add: ("passed", ""),
        TEST_SUB: ("timeout", "Timeout"),
        TEST_MUL: ("not-run", "AfterTimeout"),
        more: ("passed", ""),
    }


@pytest.mark.parametrize("warm", [False, True], ids=["fresh-child", "warm-worker"])
def test_a_gate_hung_with_every_signal_blocked_is_ended_by_the_parent_at_its_deadline(toy_copy, warm) -> None:
    """The child's own alarm cannot end a gate whose code blocks and ignores every catchable signal: the parent,
    timing the gate from the child's journal, kills the child with SIGKILL past the gate's deadline x load plus its
    margin, long before the job's budget (an hour). The gates before it keep their outcomes; the ones after never
    ran. In a fresh child, and in one a warm worker forked (handed to the executor, watched the same way)."""
    root = toy_copy()
    deaf = (
        "import signal, time\n"
        "    catchable = set(signal.Signals) - {signal.SIGKILL, signal.SIGSTOP}\n"
        "    signal.pthread_sigmask(signal.SIG_BLOCK, catchable)\n"
        "    for signum in catchable:\n"
        "        try:\n"
        "            signal.signal(signum, signal.SIG_IGN)\n"
        "        except (OSError, ValueError):\n"
        "            pass\n"
        "    while True:\n"
        "        time.sleep(3600)"
    )
    hang = _override(root, "return a - b", deaf)
    add = "tests/gates/test_arith.py::test_add"
    gates = (add, TEST_SUB, TEST_MUL)
    job = Job("deaf", gates, 3600.0, hang, deadlines=tuple((g, 0.5) for g in gates))
    load = load_scale()
    with Executor(load_config(root)) as executor:
        if warm:  # the first batch starts the workers
            executor.run([Job("warm-up", (TEST_MUL,), 30.0)], 1)
            assert executor.warm.ready(60.0) == 1
        started = time.monotonic()
        [result] = executor.run([job], 1)
        elapsed = time.monotonic() - started
        assert executor.warm.served == int(warm)
    load = max(load, load_scale())
    assert result.state == "timeout", result
    outcomes = {o.gate_id: (o.outcome, o.exc_type) for o in result.outcomes}
    assert outcomes == {add: ("passed", ""), TEST_SUB: ("timeout", "Timeout"), TEST_MUL: ("not-run", "NotRun")}
    assert "ended by the executor" in result.reason and result.tampered == ""
    # Its start and the gate before it, then the deadline x load (taken at twice the worse of the load before and
    # after) with the margin: far below the job's budget.
    assert elapsed < limit_s(0.5, 2 * load) + 15.0, (elapsed, load)
