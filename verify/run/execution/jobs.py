"""What the run's phases hand an executor and get back: the job and result records, the executor interface,
(`verify.run.execution.choice` picks the one a run uses).

A job is one child's worth of work: gates to run against a tree with some files served mutated. A result is
what that child established, as data (outcomes, coverage, what it imported), whichever machine ran it. The
phases (`verify.run.phases.run`, `verify.run.phases.pristine`) see only `JobExecutor`: they never know whether children
are forked here (`verify.run.execution.fork`) or run as Ray tasks on a cluster (`verify.run.execution.cluster`). Knows
nothing of forking, pytest or Ray, and imports no executor: a leaf that every executor imports.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from verify.compat import StrEnum
from verify.config.settings import ProjectConfig
from verify.report.verdict import GateOutcome

__all__ = ["ExecutorLost", "Job", "JobExecutor", "JobResult", "JobState"]


class ExecutorLost(Exception):
    """The executor itself is gone mid-run (the process holding a Ray cluster connection died with its node):
    harness trouble that ends the run, never a verdict. Its message names the cause."""


@dataclass(frozen=True, slots=True)
class Job:
    key: str  # unique within one `JobExecutor.run` call
    gate_ids: tuple[str, ...]  # node ids to run; () runs every gate under the configured gate paths
    timeout_s: float  # on an idle machine; stretched by the load measured while the job runs
    overrides: tuple[tuple[str, str], ...] = ()  # (file relative to root, text served instead)
    measure_coverage: bool = False
    force_fail: bool = False
    # First-kill mode: stop once a gate's own check fired and these gates have run; None runs every gate.
    stop_after: tuple[str, ...] | None = None
    share_bytecode: bool = False  # an unmutated run whose bytecode later children load (never a mutant's)
    # Children of one `run` call that name the same group share its gates: each gate file is run by whichever
    # of them claims it first, in collection order (one run of the gates spread over the workers).
    claims: str = ""
    # The statistical gates' random stream (verify.seeds): the child sets DFLASH_GATE_SEED to it. Job data, not
    # a file or the parent's environment, so a fork and a Ray node run the same stream.
    gate_seed: int = 0
    # (gate id, seconds on an idle machine): a gate still running past its own deadline (stretched by the load)
    # is ended as a timeout inside the child, which moves on; `timeout_s` stays the whole job's backstop.
    deadlines: tuple[tuple[str, float], ...] = ()
    # torch's threads in the child, set before its gates are collected (a conftest that sets its own is obeyed, as
    # under plain pytest): the executor gives each of the children it runs at once an equal share of the machine's
    # cores (capped by OMP_NUM_THREADS where set), so one child alone computes as fast as plain pytest.
    threads: int = 1


class JobState(StrEnum):
    """How a job's child ended. LOST and UNCONFINED are harness trouble, never evidence about the mutant."""

    DONE = "done"  # the child finished pytest
    TIMEOUT = "timeout"  # ended past its budget, or past its current gate's deadline
    DIED = "died"  # a signal or an exit before its result (a ceiling's kill among them)
    LOST = "lost"  # the machine running it went away, on every retry
    UNCONFINED = "unconfined"  # it was to be confined and could not be, so it ran nothing


@dataclass(frozen=True, slots=True)
class JobResult:
    key: str
    state: JobState  # a plain string that names one (a result read back as data) is taken as it
    duration_s: float
    outcomes: tuple[GateOutcome, ...] = ()
    reason: str = ""
    pytest_exit: int = 0
    loaded: tuple[str, ...] = ()  # mutated files the child actually imported
    collect_errors: tuple[tuple[str, str], ...] = ()
    coverage: dict[str, Any] | None = None  # {"lines": ..., "fixtures": ...} when measured
    order: tuple[str, ...] = ()  # every gate the child collected, in collection order
    # Why its journal is not to be trusted ("" when it is): a line without the harness's seal, or the child found
    # the harness's code changed under the gates (`verify.run.child.integrity`). A mutant's verdict is then error.
    tampered: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", JobState(self.state))  # an unknown state is a ValueError here, not later


class JobExecutor(Protocol):
    """Runs jobs in fresh children; a context manager whose `with` block holds whatever the children share
    (a pristine copy of the project, warm imports, a cluster connection)."""

    config: ProjectConfig

    def __enter__(self) -> JobExecutor: ...

    def __exit__(self, *exc: object) -> None: ...

    @property
    def nodes(self) -> tuple[tuple[str, str], ...]:
        """(node, the confinement its children get) for each node of a cluster; () for this machine alone."""
        ...

    @property
    def ceilings(self) -> str:
        """Which layer enforces the children's ceilings: "cgroup v1: ...", "polled: why", "" unknown (a cluster's
        nodes each have their own)."""
        ...

    @property
    def default_jobs(self) -> int:
        """Children at once when neither --jobs nor [tool.dflash] jobs says: this executor's own capacity."""
        ...

    def run(
        self, jobs: Sequence[Job], num_jobs: int, on_done: Callable[[JobResult], None] | None = None
    ) -> list[JobResult]:
        """Run every job, up to `num_jobs` at once; results in job order. `on_done` sees each as it finishes.
        On an interrupt every running child is ended before the interrupt propagates. Raises ExecutorLost when
        the executor itself dies (`on_done` has seen every job that finished before)."""
        ...
