"""What one operator-mutant sweep found: per-mutant verdicts, skipped functions, and the sweep's outcome.

A leaf: imports nothing internal and knows nothing of mutmut's files, the registered catalog or how results
are rendered. Every record is frozen and made of plain values, so `dataclasses.asdict` serialises it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class MutantStatus(StrEnum):
    KILLED = "killed"  # a gate went red
    SURVIVED = "survived"  # every gate that covers the function stayed green
    NO_TESTS = "no_tests"  # no selected gate calls the function, so nothing could kill it
    TIMEOUT = "timeout"  # the gates ran past mutmut's CPU-time limit
    CRASHED = "crashed"  # the test process died on a signal
    SUSPICIOUS = "suspicious"  # an exit code mutmut cannot classify
    SKIPPED = "skipped"
    TYPE_CHECKED = "type_checked"  # rejected by a type checker before any gate ran
    NOT_CHECKED = "not_checked"  # the budget or an interrupt stopped the sweep first
    IGNORED = "ignored"  # survived, but marked equivalent (everywhere) in the equivalents file
    UNCOVERED = "uncovered"  # survived, but marked unobservable on this machine (CUDA-only, dtype-only)
    ERROR = "error"  # pytest ended without a verdict (interrupted, internal or usage error): not a kill


# As in `dflash verify`: only a red gate is a catch; a hang or a dead process is not a gate checking
# anything. Mutants rejected before any gate ran (type check, skipped) or excused are not scored.
SCORED = frozenset(
    {
        MutantStatus.KILLED,
        MutantStatus.SURVIVED,
        MutantStatus.NO_TESTS,
        MutantStatus.TIMEOUT,
        MutantStatus.CRASHED,
        MutantStatus.SUSPICIOUS,
    }
)


class SweepOutcome(StrEnum):
    COMPLETE = "complete"  # every mutant got a verdict
    BUDGET = "budget"  # the time budget ran out; the verdicts reached are kept
    INTERRUPTED = "interrupted"  # stopped by the user; the verdicts reached are kept
    FAILED = "failed"  # mutmut could not run the gates (clean run red, forced failure unseen, ...)
    EMPTY = "empty"  # nothing to mutate (e.g. --changed-since found no changed module)


@dataclass(frozen=True, slots=True)
class SweepMutant:
    """One mutmut mutant. `original`/`mutated` are the changed lines alone (stripped); `anchor` and
    `replacement` are those lines with enough context to occur exactly once in `module`."""

    key: str  # mutmut's name, e.g. "runner.sampling.x_greedy__mutmut_3"
    module: str  # posix path relative to the project root
    function: str  # "func" or "Class.method"
    status: MutantStatus
    exit_code: int | None = None
    line: int = 0  # first changed line in `module`; 0 when not read
    diff: str = ""
    original: str = ""
    mutated: str = ""
    anchor: str = ""
    replacement: str = ""
    reason: str = ""  # why it is equivalent, when status is IGNORED

    @property
    def is_caught(self) -> bool:
        return self.status == MutantStatus.KILLED


@dataclass(frozen=True, slots=True)
class DecoratedFunction:
    """A function mutmut 3 never mutates because it is decorated (other than a lone @staticmethod or
    @classmethod), e.g. runner code under @torch.inference_mode()."""

    module: str
    function: str
    decorators: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SweepProgress:
    """A progress tick read from mutmut's output."""

    phase: str
    done: int = 0
    total: int = 0
    killed: int = 0
    survived: int = 0
    no_tests: int = 0


@dataclass(frozen=True, slots=True)
class SweepResult:
    root: str
    modules: tuple[str, ...]  # the runner modules that were mutated
    mutants: tuple[SweepMutant, ...]
    decorated: tuple[DecoratedFunction, ...]  # decorated functions that got no mutant (mutmut skips them)
    outcome: SweepOutcome
    wall_s: float
    num_jobs: int
    budget_s: float | None = None
    message: str = ""  # why the sweep failed or stopped, with mutmut's last output lines
    # Decorated functions mutmut reached because the sweep's copy spelt their decorators as assignments.
    undecorated: tuple[DecoratedFunction, ...] = ()

    def count_in(self, functions: tuple[DecoratedFunction, ...]) -> int:
        """Mutants inside these functions."""
        where = {(d.module, d.function) for d in functions}
        return sum(1 for mutant in self.mutants if (mutant.module, mutant.function) in where)

    def count(self, status: MutantStatus) -> int:
        return sum(1 for mutant in self.mutants if mutant.status == status)

    @property
    def survivors(self) -> tuple[SweepMutant, ...]:
        return tuple(mutant for mutant in self.mutants if mutant.status == MutantStatus.SURVIVED)

    @property
    def num_checked(self) -> int:
        return sum(1 for mutant in self.mutants if mutant.status != MutantStatus.NOT_CHECKED)

    @property
    def num_scored(self) -> int:
        return sum(1 for mutant in self.mutants if mutant.status in SCORED)

    @property
    def score(self) -> float:
        """killed / scored mutants, in [0, 1] like `dflash verify`'s; 1.0 when nothing was scored."""
        if not self.num_scored:
            return 1.0
        return self.count(MutantStatus.KILLED) / self.num_scored

    @property
    def mutants_per_s(self) -> float:
        return self.num_checked / self.wall_s if self.wall_s > 0 else 0.0

    def find(self, key: str) -> SweepMutant | None:
        return next((mutant for mutant in self.mutants if mutant.key == key), None)
