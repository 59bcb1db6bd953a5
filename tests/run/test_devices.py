"""GPUs on one machine: the device list, one GPU per forked child, the refusal of a parent that touched CUDA,
and the run settings that choose executor and device.

Without a GPU the device list is faked the way CUDA itself is steered, through `CUDA_VISIBLE_DEVICES`, and
the children report what they were given; the `gpu`-marked tests do the real thing where a device is lent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from verify.config.settings import ConfigError, JobResources, ProjectConfig, load_config, with_overrides
from verify.run.execution.devices import DeviceError, DevicePool, visible_devices
from verify.run.execution.fork import Executor
from verify.run.execution.jobs import Job

ARITH = "toy/arith.py"
TEST_MUL = "tests/gates/test_arith.py::test_mul"
# The mutant fails its gate with what the child's environment says, so the parent's record shows it.
REPORTS_ENV = "raise AssertionError(__import__('os').environ.get('CUDA_VISIBLE_DEVICES', '<unset>') + '|' + __import__('os').environ['DFLASH_DEVICE'])"  # noqa: E501


@pytest.mark.parametrize(
    ("value", "devices"),
    [("0,1,2", ("0", "1", "2")), ("", ()), ("-1", ()), ("GPU-5e1f,3", ("GPU-5e1f", "3")), ("0,-1,2", ("0",))],
    ids=["indices", "empty", "hidden", "uuid", "stops-at-invalid"],
)
def test_visible_devices_reads_cuda_visible_devices_as_cuda_does(value: str, devices: tuple[str, ...]) -> None:
    assert visible_devices({"CUDA_VISIBLE_DEVICES": value}) == devices


def test_the_pool_gives_concurrent_children_distinct_gpus_and_spreads_the_rest() -> None:
    pool = DevicePool(("0", "1"), 2)
    first, second = pool.acquire(), pool.acquire()
    assert {pool.devices(first), pool.devices(second)} == {("0",), ("1",)}
    pool.release(first)
    assert pool.devices(pool.acquire()) == pool.devices(first)  # the free one, not the busy one
    wide = DevicePool(("0", "1", "2", "3"), 2)  # fewer children than GPUs: each gets a share
    assert {wide.devices(wide.acquire()), wide.devices(wide.acquire())} == {("0", "1"), ("2", "3")}
    shared = DevicePool(("0", "1"), 4)  # more children than GPUs: round robin, least used first
    assert [shared.devices(shared.acquire()) for _ in range(4)] == [("0",), ("1",), ("0",), ("1",)]


def _cuda_config(root: Path) -> ProjectConfig:
    return with_overrides(load_config(root), device="cuda")


def test_each_forked_child_sees_its_own_gpu_and_the_device(toy_copy, monkeypatch) -> None:
    root = toy_copy()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,7")
    override = ((ARITH, (root / ARITH).read_text().replace("return a * b", REPORTS_ENV)),)
    with Executor(_cuda_config(root)) as executor:
        assert executor.default_jobs == 2  # --jobs defaults to the number of GPUs
        results = executor.run([Job("one", (TEST_MUL,), 30.0, override), Job("two", (TEST_MUL,), 30.0, override)], 2)
    assert {r.outcomes[0].message for r in results} == {"3|cuda", "7|cuda"}
    with Executor(load_config(root)) as executor:  # on the CPU the device is said, and no GPU is handed out
        [result] = executor.run([Job("cpu", (TEST_MUL,), 30.0, override)], 1)
    assert result.outcomes[0].message == "3,7|cpu"


def test_cuda_without_a_visible_gpu_is_refused_before_any_child(toy_copy, monkeypatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(DeviceError, match="no GPU is visible"):
        Executor(_cuda_config(toy_copy()))


def test_a_parent_that_initialised_cuda_is_refused_before_any_child(toy_copy, monkeypatch) -> None:
    # No GPU here: torch's own flag is set as a preload that created a CUDA tensor would leave it.
    import torch

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    executor = Executor(_cuda_config(toy_copy()))
    with pytest.raises(DeviceError, match="CUDA was initialised in dflash's warm parent"), executor:
        pytest.fail("entered")
    assert not list(Path(executor._tmp).glob("jobs/*"))  # no child was started


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"executor": "slurm"}, "executor must be one of fork, ray"),
        ({"device": "tpu"}, "device must be one of cpu, cuda"),
        ({"executor": "ray", "device": "cuda"}, "needs a GPU per job"),
        ({"job_resources": {"num_cpus": 1}}, "job_resources must be a table"),
    ],
    ids=["executor", "device", "ray-cuda-without-gpus", "resources-not-a-record"],
)
def test_bad_executor_settings_are_named_errors(tmp_path, changes: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ProjectConfig(root=tmp_path, **changes)


@pytest.mark.parametrize(
    ("table", "message"),
    [("{num_cpus = -1}", "num_cpus must be a number >= 0"), ("{num_cpus = 0}", "must reserve some"),
     ("{cpus = 1}", "unknown keys cpus"), ('"many"', "must be a table")],
    ids=["negative", "nothing", "unknown-key", "not-a-table"],
)  # fmt: skip
def test_job_resources_are_read_from_the_table_and_checked(toy_copy, table: str, message: str) -> None:
    root = toy_copy()
    pyproject = root / "pyproject.toml"
    text = pyproject.read_text()
    pyproject.write_text(text + 'executor = "ray"\njob_resources = {num_cpus = 2, num_gpus = 0.5}\n')
    config = load_config(root)
    assert (config.executor, config.job_resources) == ("ray", JobResources(2, 0.5))
    pyproject.write_text(text + f"job_resources = {table}\n")
    with pytest.raises(ConfigError, match=message):
        load_config(root)


def test_the_ray_executor_without_ray_installed_says_how_to_install_it(toy_copy) -> None:
    # A Python that cannot import ray (None in sys.modules is how an import is made to fail).
    root = toy_copy()
    code = (
        "import sys; sys.modules['ray'] = None; from verify.cli import app; "
        f"app(['verify', '--executor', 'ray', '--project', {str(root)!r}, '-m', 'add-off-by-one'], prog_name='dflash')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_environment())
    assert done.returncode == 2, done.stdout + done.stderr
    assert "pip install 'ray>=2.40'" in " ".join((done.stdout + done.stderr).split())


def _environment(**extra: str) -> dict[str, str]:
    paths = [str(Path.cwd()), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(paths), **extra}


# --- on a real GPU ----------------------------------------------------------------------------------------------


# Run in a fresh process: pytest's own process asked torch.cuda.is_available() (tests/conftest.py), which
# initialises the CUDA driver and so poisons every fork from it; dflash's parent never asks.
_ON_GPU = """
import json, sys
from pathlib import Path
from verify.run.execution.fork import Executor
from verify.run.execution.jobs import Job
from verify.config.settings import load_config, with_overrides
root = Path(sys.argv[1])
arith = (root / "toy/arith.py").read_text()
on_gpu = ("import os; return int((__import__('torch').tensor(a, device='cuda') * b).item()) "
          "if os.environ['DFLASH_DEVICE'] == 'cuda' else 0")
override = (("toy/arith.py", arith.replace("return a * b", on_gpu)),)
with Executor(with_overrides(load_config(root), device="cuda")) as executor:
    jobs = [Job(f"gpu-{k}", ("tests/gates/test_arith.py::test_mul",), 120.0, override) for k in range(2)]
    results = executor.run(jobs, executor.default_jobs)
    import torch
    print(json.dumps({"parent_initialised": torch.cuda.is_initialized(), "jobs": executor.default_jobs,
                      "results": [(r.state, [str(o.outcome) for o in r.outcomes], r.reason) for r in results]}))
"""


@pytest.mark.gpu
def test_forked_children_compute_on_their_gpu_under_a_warm_torch_parent(toy_copy) -> None:
    root = toy_copy()
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("preload = []", 'preload = ["torch"]'))
    done = subprocess.run([sys.executable, "-c", _ON_GPU, str(root)], capture_output=True, text=True,
                          env=_environment(), timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["results"] == [["done", ["passed"], ""]] * 2
    assert not found["parent_initialised"] and found["jobs"] >= 1


@pytest.mark.gpu
def test_a_preload_that_initialises_cuda_is_refused_on_a_gpu(toy_copy, tmp_path) -> None:
    root = toy_copy()
    (tmp_path / "touches_cuda.py").write_text("import torch\ntorch.zeros(1, device='cuda')\n")
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("preload = []", 'preload = ["touches_cuda"]'))
    command = [sys.executable, "-m", "verify", "verify", "--project", str(root), "--device", "cuda", "--no-cache"]
    environment = _environment()
    environment["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{environment['PYTHONPATH']}"
    done = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "CUDA was initialised" in " ".join((done.stdout + done.stderr).split())


@pytest.mark.gpu
def test_one_mutation_of_the_embedded_project_on_cuda(tmp_path) -> None:
    report = tmp_path / "report.json"
    command = [sys.executable, "-m", "verify", "verify", "-m", "admit-past-max-rows", "--device", "cuda",
               "--first-kill", "--no-cache", "--json", str(report)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, env=_environment(), timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert [m["status"] for m in json.loads(report.read_text())["mutations"]] == ["killed"]
