"""Warm workers (`verify.run.execution.zygotes`, `verify.run.child.zygote`) on the toy project: a job a worker
serves gives what a fresh child gives, a mutation no swap can reproduce runs cold, and a worker whose copy a job
changed serves no other job."""

from __future__ import annotations

import os

import pytest

from verify.config.settings import load_config
from verify.run.execution.fork import Executor, Job

ARITH = "toy/arith.py"
TEST_MUL = "tests/gates/test_arith.py::test_mul"
TEST_SUB = "tests/gates/test_arith.py::test_sub"
RAISE_PPID = "(_ for _ in ()).throw(AssertionError(str(__import__('os').getppid())))"


def _override(root, old: str, new: str) -> tuple[tuple[str, str], ...]:
    return ((ARITH, (root / ARITH).read_text().replace(old, new)),)


def _jobs(root) -> list[Job]:
    return [
        Job("pristine", (TEST_MUL, TEST_SUB), 30.0),
        Job("red", (TEST_MUL, TEST_SUB), 30.0, _override(root, "return a * b", "return a + b")),
        Job("exits", (TEST_SUB, TEST_MUL), 30.0, _override(root, "return a - b", "return __import__('os')._exit(3)")),
        Job("first-kill", (TEST_SUB, TEST_MUL), 30.0, _override(root, "return a - b", "return 0"), stop_after=()),
        Job("import-time", (TEST_MUL,), 30.0, _override(root, "def add(a, b):", "LIMIT = 1\n\n\ndef add(a, b):")),
        Job("not-collected", ("tests/gates/test_arith.py::test_nothing",), 30.0),
    ]


def _seen(results) -> list[tuple[str, str, list[tuple[str, str, str]], tuple[str, ...]]]:
    return [(r.key, r.state, [(o.gate_id, str(o.outcome), o.exc_type) for o in r.outcomes], r.loaded) for r in results]


def _warm(executor: Executor) -> None:
    executor.run([Job("warm-up", (TEST_MUL,), 30.0)], 1)  # the first batch starts the workers
    assert executor.warm.ready(60.0) == 1


def test_a_warm_worker_gives_what_a_fresh_child_gives(toy_copy, monkeypatch) -> None:
    root = toy_copy()
    with Executor(load_config(root)) as executor:
        _warm(executor)
        warm = executor.run(_jobs(root), 1)
        served, why_cold = executor.warm.served, executor.warm.why_cold
    monkeypatch.setenv("DFLASH_WARM", "off")
    with Executor(load_config(root)) as executor:
        cold = executor.run(_jobs(root), 1)
        assert executor.warm.served == 0
    assert _seen(warm) == _seen(cold), [(r.key, r.reason) for r in (*warm, *cold) if r.reason]
    assert served == 4  # pristine, red, exits, first-kill
    assert [why.partition(":")[0] for why in why_cold] == ["import-time", "not-collected"]
    assert "the code run at import differs" in why_cold[0] and "not collected here" in why_cold[1]
    assert [o.outcome for o in warm[1].outcomes] == ["assertion", "passed"]
    assert [(o.gate_id, o.outcome) for o in warm[3].outcomes] == [(TEST_SUB, "assertion")]


def test_a_warm_child_is_the_executors_own_child(toy_copy, monkeypatch) -> None:
    # Its parent as the child sees it: without namespaces (in its own PID namespace it sees none, getppid 0).
    monkeypatch.setenv("DFLASH_NAMESPACES", "off")
    root = toy_copy()
    with Executor(load_config(root)) as executor:
        _warm(executor)
        [result] = executor.run([Job("ppid", (TEST_MUL,), 30.0, _override(root, "a * b", RAISE_PPID))], 1)
        assert executor.warm.served == 1
    assert [(o.outcome, o.message) for o in result.outcomes] == [("assertion", str(os.getpid()))]


@pytest.mark.parametrize("slots", [1, 2])
def test_a_job_that_changes_its_workers_copy_ends_the_worker(toy_copy, monkeypatch, slots: int) -> None:
    # Workers are kept by their children's thread count, a share of the cores that depends on the slots: one
    # thread a child whatever the slots (as `make test` runs), so the worker the warm-up started serves both.
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    root = toy_copy()
    touch = "(__import__('pathlib').Path(__file__).parent / 'left.txt').write_text('x') and a * b"
    with Executor(load_config(root)) as executor:
        _warm(executor)
        first = executor.warm.pids()
        writes = executor.run([Job("writes", (TEST_MUL,), 30.0, _override(root, "a * b", touch))], slots)
        assert executor.warm.served == 1 and not first & executor.warm.pids()  # ended, not handed the next job
        after = executor.run([Job(f"next {k}", (TEST_MUL, TEST_SUB), 30.0) for k in range(4)], slots)
    assert [o.outcome for o in writes[0].outcomes] == ["passed"]
    assert [[o.outcome for o in run.outcomes] for run in after] == [["passed", "passed"]] * 4


def test_a_warm_child_draws_what_a_fresh_child_draws(toy_copy, monkeypatch) -> None:
    # The gates' module draws from torch's default generator at import, and a warm worker imports every gate
    # file: the generators are reseeded where the gates start, so the first gate draws the same numbers in a
    # fresh child and a warm worker's (numpy's and random's are fresh from the OS in both).
    root = toy_copy()
    (root / "tests" / "gates" / "test_rng.py").write_text(
        "import pytest\nimport torch\nfrom toy import arith\n\nDRAWN = torch.rand(3)\n\n\n"
        "@pytest.mark.gate\ndef test_draw():\n    assert arith.mul(2, 2) == 4\n"
    )
    (root / "tests" / "gates" / "test_rng_too.py").write_text("import torch\n\nDRAWN = torch.rand(5)\n")
    draws = "(_ for _ in ()).throw(AssertionError(repr(__import__('torch').rand(2).tolist())))"
    job = Job("draws", ("tests/gates/test_rng.py::test_draw",), 30.0, _override(root, "a * b", draws))
    with Executor(load_config(root)) as executor:
        _warm(executor)
        [warm] = executor.run([job], 1)
        assert executor.warm.served == 1
    monkeypatch.setenv("DFLASH_WARM", "off")
    with Executor(load_config(root)) as executor:
        [cold] = executor.run([job], 1)
    assert [o.outcome for o in warm.outcomes] == ["assertion"]
    assert warm.outcomes[0].message == cold.outcomes[0].message


def test_a_warm_childs_last_words_reach_its_own_log(toy_copy, monkeypatch) -> None:
    # pytest's faulthandler writes a crash to a copy of stderr it made in the worker, at configure: the job
    # child points every copy of the worker's log at its own, so a death is explained as in a fresh child.
    root = toy_copy()
    job = Job(
        "segfault", (TEST_MUL,), 30.0, _override(root, "return a * b", "return __import__('ctypes').string_at(0)")
    )
    with Executor(load_config(root)) as executor:
        _warm(executor)
        [warm] = executor.run([job], 1)
        assert executor.warm.served == 1
    monkeypatch.setenv("DFLASH_WARM", "off")
    with Executor(load_config(root)) as executor:
        [cold] = executor.run([job], 1)
    for result in (warm, cold):
        assert (result.state, [o.exc_type for o in result.outcomes]) == ("died", ["SIGSEGV"])
        assert result.reason.startswith("killed by SIGSEGV: "), result.reason  # its log's last line follows
