"""A child computes with its share of the cores, as plain pytest would: one child alone gets every core the run
may use (capped by the user's OMP_NUM_THREADS), N children at once a 1/N share each, never less than one; and a
conftest that sets its own thread count is obeyed in a fresh child and a warm worker's alike."""

from __future__ import annotations

import os

import pytest

from verify.run.execution.ceilings import threads_per_child


@pytest.mark.parametrize("cores, children, omp, expected", [
    (8, 1, "", 8), (8, 2, "", 4), (8, 3, "", 2), (8, 16, "", 1), (2, 1, "", 2), (2, 2, "", 1),
    (8, 1, "1", 1), (8, 2, "3", 3), (8, 1, "junk", 8), (8, 0, "", 8),
])  # fmt: skip
def test_each_child_gets_its_share_of_the_cores(monkeypatch, cores, children, omp, expected) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
    monkeypatch.setenv("OMP_NUM_THREADS", omp)
    assert threads_per_child(children) == expected


GATE = """import pytest
import torch


@pytest.mark.gate
def test_threads():
    with open("expected_threads") as expected:  # the child's cwd is its private copy
        assert torch.get_num_threads() == int(expected.read())
"""


# A project's own choice, as examples/lookup-engine's conftest makes it: the harness must not override it.
_OWN_THREADS = "import torch\n\ntorch.set_num_threads(1)\n"


@pytest.mark.parametrize("children, expected, conftest", [(1, 8, ""), (2, 4, ""), (1, 1, _OWN_THREADS)])
def test_a_childs_gates_run_on_its_share_cold_and_warm(
    tmp_path, hostile_project, monkeypatch, children, expected, conftest
):
    from verify.config.settings import load_config
    from verify.mutation import Mutation
    from verify.run.execution.fork import Executor, Job

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    project = hostile_project(tmp_path / "p").write(
        core="def one():\n    return 1\n", gates={"test_threads.py": GATE},
        mutations=[Mutation("none", "unused", "hostile/core.py", "return 1", "return 2")],
        settings={"jobs": children, "flake_reruns": 1, "preload": ["torch"]},
    )  # fmt: skip
    (project.root / "expected_threads").write_text(str(expected))
    if conftest:
        (project.root / "tests" / "gates" / "conftest.py").write_text(conftest)
    (project.root / "pyproject.toml").write_text(
        (project.root / "pyproject.toml")
        .read_text()
        .replace('source_roots = ["hostile"]', 'source_roots = ["hostile", "expected_threads"]')
    )
    config = load_config(project.root)
    gate = ("tests/gates/test_threads.py::test_threads",)
    with Executor(config) as executor:
        results = executor.run([Job(f"j{i}", gate, 60.0) for i in range(2 * children)], children)
        results += executor.run([Job(f"w{i}", gate, 60.0) for i in range(2 * children)], children)  # warm now
    assert [r.state for r in results] == ["done"] * len(results), results
    assert all(o.outcome.value == "passed" for r in results for o in r.outcomes), [r.outcomes for r in results]
