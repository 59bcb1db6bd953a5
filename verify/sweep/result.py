"""What one operator-mutant sweep found: per-mutant verdicts, skipped functions, and the sweep's outcome.

A leaf but for the verdict model it shares with `dflash verify`; knows nothing of mutmut's files, the
registered catalog or how results are rendered. Every record is frozen and made of plain values, so
`dataclasses.asdict` serialises it.
"""

from __future__ import annotations

from dataclasses import dataclass

from verify.compat import StrEnum
from verify.report.verdict import Status

# A mutant's status is the verdict model's own `Status` (`dflash verify` and the sweep score and render the same
# statuses); mutmut's finer word for it is kept beside it. Two of mutmut's buckets are worth keeping apart in a
# report, so they have labels of their own: a survivor no selected gate calls, and a mutant never checked.
NO_TESTS = "no tests"  # status survived: no selected gate calls the function, so nothing could kill it
NOT_CHECKED = "not checked"  # status skipped: the budget or an interrupt stopped the sweep first
# Sweep results saved before the statuses were unified (mutmut's own words) read back as (status, label).
LEGACY: dict[str, tuple[Status, str]] = {
    "no_tests": (Status.SURVIVED, NO_TESTS),
    "suspicious": (Status.ERROR, "suspicious"),
    "type_checked": (Status.STALE, "caught by type check"),
    "not_checked": (Status.SKIPPED, NOT_CHECKED),
    "ignored": (Status.EQUIVALENT, ""),
}


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
    status: Status
    exit_code: int | None = None
    line: int = 0  # first changed line in `module`; 0 when not read
    diff: str = ""
    original: str = ""
    mutated: str = ""
    anchor: str = ""
    replacement: str = ""
    reason: str = ""  # why it is equivalent or uncovered, or what mutmut said when it gave no verdict
    mutmut: str = ""  # mutmut's own word for it ("no tests", "suspicious", "caught by type check", ...)
    gates: tuple[str, ...] = ()  # the gates mutmut ran against it: those that call its function (its stats run)
    crash_kind: str = ""  # crashed past a ceiling: "memory", "processes", "disk" (verify.report.crashes)

    @property
    def label(self) -> str:
        """The status, or its finer bucket where a report keeps one apart (`NO_TESTS`, `NOT_CHECKED`)."""
        if self.mutmut in (NO_TESTS, NOT_CHECKED):
            return self.mutmut
        return str(self.status)


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
    # Equivalents-file entries for the swept modules whose original lines are gone: "module: function: line".
    stale_equivalents: tuple[str, ...] = ()
    # What went wrong outside any one mutant: the project's files changed while mutmut ran (every verdict void).
    harness_errors: tuple[str, ...] = ()
    confinement: str = ""  # what confined mutmut and its mutants: "landlock ABI n", or "off: why"

    def count_in(self, functions: tuple[DecoratedFunction, ...]) -> int:
        """Mutants inside these functions."""
        where = {(d.module, d.function) for d in functions}
        return sum(1 for mutant in self.mutants if (mutant.module, mutant.function) in where)

    def count(self, label: str) -> int:
        """Mutants with this label (a `Status`, or `NO_TESTS`/`NOT_CHECKED`, which their status leaves out)."""
        return sum(1 for mutant in self.mutants if mutant.label == label)

    @property
    def survivors(self) -> tuple[SweepMutant, ...]:
        return tuple(mutant for mutant in self.mutants if mutant.label == Status.SURVIVED)

    @property
    def num_checked(self) -> int:
        return sum(1 for mutant in self.mutants if mutant.label != NOT_CHECKED)

    @property
    def num_scored(self) -> int:
        return sum(1 for mutant in self.mutants if mutant.status.is_judged)

    @property
    def score(self) -> float:
        """As `dflash verify` scores: (killed + caught) / (killed + caught + crashed + timeout + survived, no-tests
        survivors included); a mutant with no verdict (error), stale, equivalent, uncovered or skipped is outside
        it. 1.0 when nothing was scored."""
        if not self.num_scored:
            return 1.0
        caught = sum(1 for mutant in self.mutants if mutant.status in (Status.KILLED, Status.CAUGHT))
        return caught / self.num_scored

    @property
    def mutants_per_s(self) -> float:
        return self.num_checked / self.wall_s if self.wall_s > 0 else 0.0

    def find(self, key: str) -> SweepMutant | None:
        return next((mutant for mutant in self.mutants if mutant.key == key), None)
