"""What a verify run has established so far: each planned mutation (`Planned`) and the run's state
(`RunState`: verdicts, baseline, flaky gates, what was lost), from which a partial `RunReport` can be made at any
moment. Records and one rule: every verdict is recorded with the harness's known secret values redacted from
what its children said (`add`: the one door through which a mutant's words reach the JSON, HTML, JUnit and
terminal reports and the cache). Whether a verdict is final, and so may be cached, the corroboration policy says
(`verify.run.phases.corroboration`). Runs nothing.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass

from verify.config.selection import RunOptions
from verify.config.settings import ProjectConfig
from verify.mutation import Mutation
from verify.mutation.apply import Applied
from verify.report.verdict import Baseline, BaselineStatus, GateOutcome, MutationResult, RunReport
from verify.run.execution.jobs import JobResult
from verify.run.phases import cache as cache_mod
from verify.run.phases.corroboration import Policy
from verify.sandbox.secrets import Secrets, known

__all__ = ["Planned", "RunState"]

_PARTIAL_PACE, _PARTIAL_MIN_S = 20.0, 0.25


@dataclass
class Planned:
    """One mutation a gate reaches: its mutant, cache key, gates in run order, budget and first child."""

    mutation: Mutation
    applied: Applied
    key: str
    gate_ids: tuple[str, ...]
    timeout_s: float
    expected_s: float  # what the child should take, from the baseline: the slowest are started first
    first: JobResult | None = None


@dataclass
class RunState:
    """What a run has established so far; `report()` can be called at any moment (partial reports)."""

    config: ProjectConfig
    chosen: list[Mutation]
    options: RunOptions
    cache: cache_mod.ResultCache
    on_report: Callable[[RunReport], None]
    results: dict[str, MutationResult] = dataclasses.field(default_factory=dict)
    baseline: Baseline = Baseline(BaselineStatus.PENDING, ())
    self_check: str = ""
    flaky: dict[str, str] = dataclasses.field(default_factory=dict)
    interrupted_by: str = ""
    lost: str = ""  # why the executor died mid-run (the run ended there), if it did
    harness_errors: tuple[str, ...] = ()
    confinement: str = ""  # what keeps children out of the user's files (verify.sandbox.confine)
    ceilings: str = ""  # which layer enforces the children's ceilings (verify.sandbox.cgroups)
    nodes: tuple[tuple[str, str], ...] = ()  # (node, its children's confinement) on a cluster
    plans: dict[str, Planned] = dataclasses.field(default_factory=dict)  # every mutation a gate reaches
    num_jobs: int = 1  # children at once, in every phase
    secrets: Secrets = dataclasses.field(default_factory=known)  # what the reports must never show
    # The partial report's pace: building and writing it grows with the results, so one per verdict made a
    # 1,000-mutation run quadratic. It is handed on when at least `_PARTIAL_PACE` times its last cost has passed
    # (its cost at most ~5% of the run's time) and at least `_PARTIAL_MIN_S`; the run's end always hands one on.
    _next_partial: float = 0.0

    @property
    def policy(self) -> Policy:
        """The corroboration policy for this project's gates."""
        return Policy.of(self.config)

    def add(self, result: MutationResult, key: str = "", *, emit: bool = True) -> None:
        """Record a verdict (cached under `key` when given, if the policy calls it final), its children's words
        redacted; `emit` hands the partial report on."""
        result, is_final = self.policy.recorded(_redacted(result, self.secrets))
        if key and is_final:
            self.cache.put(key, result)
        self.results[result.name] = result
        if emit and time.monotonic() >= self._next_partial:
            started = time.monotonic()
            self.on_report(self.report())
            cost = time.monotonic() - started
            self._next_partial = time.monotonic() + max(_PARTIAL_MIN_S, _PARTIAL_PACE * cost)

    def report(self) -> RunReport:
        names = [m.name for m in self.chosen if m.name in self.results]
        config = self.config
        required = config.required if config.required is not None else tuple(names)
        return RunReport(
            baseline=self.baseline,
            mutations=tuple(self.results[n] for n in names),
            required=tuple(n for n in required if n in self.results),
            pins=tuple((m.name, m.expect_killed_by) for m in self.chosen if m.expect_killed_by),
            shard=str(self.options.shard) if self.options.shard else "",
            interrupted=bool(self.interrupted_by or self.lost),
            interrupted_by=self.interrupted_by,
            expected_survivors=tuple((m.name, m.reason) for m in self.chosen if m.expect == "survives"),
            flaky_gates=tuple(sorted(self.flaky.items())),
            self_check=self.self_check,
            harness_errors=(*((self.lost,) if self.lost else ()), *self.harness_errors),
            first_kill=self.options.first_kill,
            confinement="; ".join(f"{node}: {what}" for node, what in self.nodes) or self.confinement,
            node_confinement=self.nodes,
            ceilings=self.ceilings,
            jobs=self.num_jobs,
            counting=config.count,
        )


def _redacted(result: MutationResult, secrets: Secrets) -> MutationResult:
    """`result` with every secret value the run knows gone from what a child could have put in it."""

    def outcome(o: GateOutcome) -> GateOutcome:
        return dataclasses.replace(o, exc_type=secrets.redact(o.exc_type), message=secrets.redact(o.message))

    return dataclasses.replace(
        result, reason=secrets.redact(result.reason), outcomes=tuple(outcome(o) for o in result.outcomes)
    )
