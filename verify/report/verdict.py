"""Verdicts and result records of a verify run: what each gate did, and the status that follows from it.

A leaf: imports nothing internal but the Python 3.10 shim (verify/compat.py). Every record is a frozen
dataclass of plain values and StrEnums, so `dataclasses.asdict` plus `json.dumps` serialise it with no custom
encoder. Derived facts (the score, vacuous gates, killers) are properties, computed from the records rather
than stored twice.

How a red gate counts (PIT and Stryker keep the same distinctions): only a gate's own check (an assertion
or its refusal) kills; a named invariant of the project catches; any other exception, a signal or an exit
is a crash; a hang is a timeout; a gate that did not run is the harness's trouble, never a verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

from verify.compat import StrEnum

__all__ = [
    "Baseline",
    "BaselineStatus",
    "Corroboration",
    "GateOutcome",
    "MutationResult",
    "Outcome",
    "RunReport",
    "Status",
    "matches_gate",
    "status_from",
]


class Outcome(StrEnum):
    """What one gate did against one mutant."""

    PASSED = "passed"
    ASSERTION = "assertion"  # an AssertionError from the gate (its check fired)
    REFUSAL = "refusal"  # pytest.fail / "DID NOT RAISE": the gate refused the behaviour by its own decision
    INVARIANT = "invariant"  # an exception of a type the project declares as its named checks
    EXCEPTION = "exception"  # any other exception, a signal or an exit while the gate ran
    TIMEOUT = "timeout"  # the gate was running when the budget ran out
    NOT_RUN = "not-run"  # never collected, interrupted, skipped, or the child ended first

    @property
    def is_red(self) -> bool:
        return self in (Outcome.ASSERTION, Outcome.REFUSAL, Outcome.INVARIANT, Outcome.EXCEPTION, Outcome.TIMEOUT)

    @property
    def is_check(self) -> bool:
        """Red because the gate's own check fired: the only kind of red that kills."""
        return self in (Outcome.ASSERTION, Outcome.REFUSAL)

    @property
    def is_conclusive(self) -> bool:
        """Needs no second run: a pass, or a gate's own check. Anything else is confirmed or retried."""
        return self is Outcome.PASSED or self.is_check


class Corroboration(StrEnum):
    """How a gate's outcome was corroborated: what re-runs established about its red (the policy that decides
    it is `verify.run.phases.corroboration`)."""

    ONCE = "once"  # what one run said: a green, or a red seen once (provisional when statistical)
    REPEATED = "repeated"  # the same kind of red (a crash, an invariant, a hang) in a second fresh child
    RESEEDED = "reseeded"  # red by its check again on an independent gate seed
    CONCLUSIVE = "conclusive"  # red by its check with a stated p-value small enough to stand alone
    UNCONFIRMED = "unconfirmed"  # red once, then green or red another way: no verdict from this gate
    CHANCE = "chance"  # red on the first gate seed, green on the independent one: a chance red, no kill


class Status(StrEnum):
    """What became of one mutation, in order of precedence among the judged ones."""

    KILLED = "killed"  # some gate red by assertion or refusal
    CAUGHT = "caught"  # otherwise some gate red by a declared invariant
    CRASHED = "crashed"  # otherwise red only by other exceptions, a signal or an exit (confirmed twice)
    TIMEOUT = "timeout"  # otherwise a gate hung past its deadline (confirmed twice)
    SURVIVED = "survived"  # every gate that reaches the mutated lines ran and stayed green
    # the harness could not get a verdict (a gate did not run, twice; red once only; the mutant tampered with the
    # harness: `tampered` says how)
    ERROR = "error"
    STALE = "stale"  # the anchor no longer matches exactly once, or the mutant does not compile
    EQUIVALENT = "equivalent"  # declared equivalent everywhere (sweeps): not a test gap
    UNCOVERED = "uncovered"  # declared unobservable on this machine (a CUDA-only line on a CPU run)
    SKIPPED = "skipped"  # not selected this run (--changed-since)

    @property
    def is_detected(self) -> bool:
        return self in (Status.KILLED, Status.CAUGHT, Status.CRASHED, Status.TIMEOUT)

    @property
    def is_judged(self) -> bool:
        """In the score's denominator: a verdict about the gates, good or bad."""
        return self.is_detected or self is Status.SURVIVED


def status_from(outcomes: tuple[GateOutcome, ...]) -> Status:
    """The status that resolved per-gate outcomes imply (confirmation and retries happen before this)."""
    kinds = {o.outcome for o in outcomes}
    if any(kind.is_check for kind in kinds):
        return Status.KILLED
    for kind, status in (
        (Outcome.INVARIANT, Status.CAUGHT),
        (Outcome.EXCEPTION, Status.CRASHED),
        (Outcome.TIMEOUT, Status.TIMEOUT),
        (Outcome.NOT_RUN, Status.ERROR),
    ):
        if kind in kinds:
            return status
    return Status.SURVIVED


@dataclass(frozen=True, slots=True)
class GateOutcome:
    gate_id: str
    outcome: Outcome
    duration_s: float
    exc_type: str = ""  # the exception's type name when red; why it did not run when not-run
    message: str = ""  # the first line of its message, for a human reading why
    # A red gate's own p-value when it stated one (pytest's record_property("p_value", p), or a p_value on its
    # exception): the chance a correct engine goes this red. Read for statistical gates only.
    p_value: float | None = None
    corroboration: Corroboration = Corroboration.ONCE  # what re-runs established about this outcome


@dataclass(frozen=True, slots=True)
class MutationResult:
    name: str
    status: Status
    killed_by: tuple[str, ...] = ()  # gates red by the status's own kind (check, invariant, exception, timeout)
    ran: tuple[str, ...] = ()
    duration_s: float = 0.0
    reason: str = ""
    outcomes: tuple[GateOutcome, ...] = ()
    cached: bool = False
    attempts: int = 1  # children it took: a second one confirms a crash or timeout, or retries a not-run gate
    # A crash past a ceiling: "memory", "processes", "disk", "output" (verify.report.crashes); else "".
    crash_kind: str = ""
    # What the mutant changed of the harness (pytest's reporting path, the recorder, the journal's seals) when a
    # child found it: the status is then error, never a verdict about the gates; else "".
    tampered: str = ""

    @property
    def red_by_check(self) -> tuple[str, ...]:
        return tuple(o.gate_id for o in self.outcomes if o.outcome.is_check)

    @property
    def red_by_exception(self) -> tuple[str, ...]:
        kinds = (Outcome.INVARIANT, Outcome.EXCEPTION, Outcome.TIMEOUT)
        return tuple(o.gate_id for o in self.outcomes if o.outcome in kinds)


class BaselineStatus(StrEnum):
    """What the unmutated tree did: only a green baseline lets a run judge mutations."""

    GREEN = "green"
    RED = "red"  # ends the run before any mutation
    FLAKY = "flaky"  # ends the run before any mutation
    PENDING = "pending"  # not run yet


@dataclass(frozen=True, slots=True)
class Baseline:
    status: BaselineStatus
    gates: tuple[GateOutcome, ...]

    @property
    def gate_ids(self) -> tuple[str, ...]:
        return tuple(o.gate_id for o in self.gates)

    def duration_of(self, gate_ids: tuple[str, ...]) -> float:
        wanted = set(gate_ids)
        return sum(o.duration_s for o in self.gates if o.gate_id in wanted)


def matches_gate(gate_id: str, pin: str) -> bool:
    """A pin is a node id or a node-id prefix ("tests/gates/test_draft.py" pins every test in it)."""
    return gate_id == pin or gate_id.startswith(pin.rstrip(":") + "::") or gate_id.startswith(pin + "[")


@dataclass(frozen=True, slots=True)
class RunReport:
    baseline: Baseline
    mutations: tuple[MutationResult, ...]
    required: tuple[str, ...]  # names whose not being killed or caught fails the run
    pins: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (mutation name, expect_killed_by)
    shard: str = ""  # "K/N" when this is one slice of a sharded run
    interrupted: bool = False
    interrupted_by: str = ""  # "SIGINT" or "SIGTERM" when a signal ended the run early
    expected_survivors: tuple[tuple[str, str], ...] = ()  # (mutation name, reason) declared expect="survives"
    flaky_gates: tuple[tuple[str, str], ...] = ()  # (gate id, what it did on the unmutated tree)
    self_check: str = ""  # "passed", "cached" or "" (merged reports)
    harness_errors: tuple[str, ...] = ()  # trouble outside any one mutation (the user's tree changed, ...)
    first_kill: bool = False  # each mutant's gates stopped at its first kill: the matrix is not complete
    # Mutants a tool generated (an operator sweep), not a registered catalog: one rejected before any gate ran
    # (stale) is the tool's business and an empty run is nothing to do, neither a failure.
    generated: bool = False
    # What kept children out of the user's files: "landlock ABI n" (", partial: what it lacks" below ABI 6),
    # "off: why" (detection only), "" unknown; on a cluster, "node: that; node: that" for every node.
    confinement: str = ""
    node_confinement: tuple[tuple[str, str], ...] = ()  # (node, its children's confinement) on a Ray cluster
    # Which layer enforced the children's ceilings: "cgroup v1: memory.limit_in_bytes, pids.max" (the kernel's),
    # "polled: why" (the parent's polling alone), "" unknown (a cluster, or an older report).
    ceilings: str = ""
    jobs: int = 0  # children at once, as the run held them (the executor's capacity unless told); 0: unknown
    counting: str = "killed"  # what passes the CI gate ([tool.dflash] count): "killed" (or caught), or "detected"

    def count(self, status: Status) -> int:
        return sum(1 for r in self.mutations if r.status is status)

    @property
    def _expected_names(self) -> set[str]:
        return {name for name, _ in self.expected_survivors}

    def is_declared_survivor(self, result: MutationResult) -> bool:
        """Declared `expect="survives"` and indeed not killed: Stryker's "Ignored", reported outside the score
        and never named as a failure."""
        return result.status is Status.SURVIVED and result.name in self._expected_names

    def judged(self) -> list[MutationResult]:
        """The score's denominator: judged statuses, less declared survivors."""
        return [r for r in self.mutations if r.status.is_judged and not self.is_declared_survivor(r)]

    @property
    def score(self) -> float | None:
        """(killed + caught) / (killed + caught + crashed + timeout + survived); None when nothing was judged.

        A crash or a hang is not a gate catching the bug, so it counts against the score; stale, skipped,
        errored, equivalent and uncovered mutants and declared survivors are outside it.
        """
        judged = self.judged()
        if not judged:
            return None
        return sum(1 for r in judged if r.status in (Status.KILLED, Status.CAUGHT)) / len(judged)

    @property
    def detected(self) -> float | None:
        """The share detected in any way (crashes and timeouts included), as tools that count those report it."""
        judged = self.judged()
        if not judged:
            return None
        return sum(1 for r in judged if r.status.is_detected) / len(judged)

    @property
    def errors(self) -> tuple[MutationResult, ...]:
        return tuple(r for r in self.mutations if r.status is Status.ERROR)

    @property
    def surprises(self) -> tuple[str, ...]:
        """Declared survivors that a gate now kills or catches: news, not a failure."""
        expected = self._expected_names
        return tuple(
            r.name for r in self.mutations if r.name in expected and r.status in (Status.KILLED, Status.CAUGHT)
        )

    @property
    def gate_kills(self) -> dict[str, int]:
        """How many mutants each baseline gate killed or caught, in baseline order."""
        kills = dict.fromkeys(self.baseline.gate_ids, 0)
        for result in self.mutations:
            if result.status in (Status.KILLED, Status.CAUGHT):
                for gate_id in result.killed_by:
                    kills[gate_id] = kills.get(gate_id, 0) + 1
        return kills

    @property
    def vacuous_gates(self) -> tuple[str, ...]:
        """Gates no mutant turned red; empty when no mutant ran, since then nothing was tested, and in a
        first-kill run, where a gate after the first kill never got its chance."""
        if self.first_kill or not any(r.ran for r in self.mutations):
            return ()
        flaky = {gate for gate, _ in self.flaky_gates}
        return tuple(g for g, kills in self.gate_kills.items() if kills == 0 and g not in flaky)

    @property
    def lost_pins(self) -> tuple[tuple[str, str], ...]:
        """(mutation, pinned gate) pairs where the pinned gate is no longer among the killers."""
        by_name = {r.name: r for r in self.mutations}
        lost = []
        for name, pins in self.pins:
            result = by_name.get(name)
            if result is None or not result.status.is_judged:
                continue
            lost += [(name, pin) for pin in pins if not any(matches_gate(g, pin) for g in result.killed_by)]
        return tuple(lost)

    def failures(self, fail_under: float = 0.0) -> tuple[str, ...]:
        """Why this run fails (empty: exit 0, unless there are errors: exit 4)."""
        reasons = []
        required = set(self.required) - self._expected_names
        detected = self.counting == "detected"  # crashed and timeout pass too, and --fail-under reads `detected`
        caught = {s for s in Status if s.is_detected} if detected else {Status.KILLED, Status.CAUGHT}
        for result in self.mutations:
            if result.status is Status.STALE and not self.generated:
                reasons.append(f"{result.name}: stale ({result.reason})")
            elif result.name in required and result.status.is_judged and result.status not in caught:
                reasons.append(f"{result.name}: {result.status}")
        reasons += [f"{name}: pinned gate {pin} no longer kills it" for name, pin in self.lost_pins]
        score, name = (self.detected, "detected") if detected else (self.score, "score")
        excused = self.interrupted or self.generated or any(r.status is Status.SKIPPED for r in self.mutations)
        if score is None and not excused:
            reasons.append("no mutation was judged: an empty catalog proves nothing")
        elif score is not None and score < fail_under:
            reasons.append(f"{name} {score:.3f} is under --fail-under {fail_under:.3f}")
        if self.interrupted:
            reasons.append("interrupted before every mutation ran")
        return tuple(reasons)
