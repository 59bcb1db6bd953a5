"""The run's verdict in words: PASS or FAIL, the counts, what failed by name, and the one-line verdict.

Every renderer (terminal, JSON, HTML, JUnit) takes its verdict, counts and score text from here, so they
cannot disagree. Plain strings only: this module imports neither rich nor anything of the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from verify.report.verdict import MutationResult, RunReport, Status

__all__ = ["DECLARED", "MAX_NAMED", "Verdict", "format_score", "judge", "status_label", "status_reason", "verdict_line"]

MAX_NAMED = 3  # names shown per kind of failure on the one line; the summary above lists them all

# The statuses that fail a run by name, in the order the verdict line lists them (under count = "detected",
# crashed and timeout pass the CI gate and are not named).
_NAMED = ("survived", "stale", "error", "crashed", "timeout")
_DETECTED = ("crashed", "timeout")
_CAUGHT = (Status.KILLED, Status.CAUGHT)  # what a gate's own check fired on; "detected" adds crashed and timeout
DECLARED = "survived (declared)"  # expect="survives" and indeed survived: outside the score, not a failure


def status_label(report: RunReport, result: MutationResult) -> str:
    """The status as every renderer shows it: a declared survivor is told apart from a test gap."""
    return DECLARED if report.is_declared_survivor(result) else str(result.status)


def status_reason(report: RunReport, result: MutationResult) -> str:
    """The reason every renderer shows beside that label: a declared survivor's declaration, else the run's."""
    return dict(report.expected_survivors)[result.name] if report.is_declared_survivor(result) else result.reason


def format_score(score: float | None) -> str:
    return "-" if score is None else f"{score:.3f}"


@dataclass(frozen=True, slots=True)
class Verdict:
    passed: bool
    failures: tuple[str, ...]  # why the run fails, one reason per line (RunReport.failures)
    killed: int  # what the CI gate counts: killed + caught, or every detection under count = "detected"
    judged: int  # mutations in the score's denominator
    total: int  # every mutation in the report
    counts: tuple[tuple[str, int], ...]  # (status, count), non-zero ones, in Status order
    named: tuple[tuple[str, tuple[str, ...]], ...]  # (status, names) for the statuses in _NAMED
    score: float | None
    interrupted_by: str = ""  # the signal that ended the run early, if one did
    harness_errors: tuple[str, ...] = ()  # trouble outside any one mutation (exit 4)
    count: str = "killed"  # what `killed` counts: "killed" or "detected" ([tool.dflash] count)
    detected: float | None = None  # the share detected in any way (RunReport.detected)
    unreached: int = 0  # survivors no gate reaches (Stryker's NoCoverage): a gap in the gates, said apart

    @property
    def word(self) -> str:
        return "PASS" if self.passed else "FAIL"

    @property
    def counts_text(self) -> str:
        def said(status: str, n: int) -> str:
            alone = f" ({self.unreached} reached by no gate)" if status == Status.SURVIVED and self.unreached else ""
            return f"{n} {status}{alone}"

        return ", ".join(said(status, n) for status, n in self.counts) or "no mutations"


def judge(report: RunReport, fail_under: float = 0.0) -> Verdict:
    failures = tuple(report.failures(fail_under))
    # A declared survivor is shown as such, apart from the survivors that fail a run.
    statuses = [status_label(report, r) for r in report.mutations]
    order: list[str] = []
    for status in statuses:
        if status not in order:
            order.append(status)
    counts = tuple((s, statuses.count(s)) for s in sorted(order, key=_status_rank))
    named = tuple(
        (status, tuple(r.name for r, s in zip(report.mutations, statuses, strict=True) if s == status))
        for status in _NAMED
        if status in statuses and not (report.counting == "detected" and status in _DETECTED)
    )
    judged = report.judged()  # the score's denominator, as RunReport.score counts it
    errors = bool(report.harness_errors or report.errors or report.interrupted_by)
    return Verdict(
        passed=not failures and not errors,
        failures=failures,
        killed=sum(
            1 for r in judged if (r.status.is_detected if report.counting == "detected" else r.status in _CAUGHT)
        ),
        judged=len(judged),
        total=len(statuses),
        counts=counts,
        named=named,
        score=report.score,
        interrupted_by=report.interrupted_by,
        harness_errors=report.harness_errors,
        count=report.counting,
        detected=report.detected,
        unreached=sum(1 for r, s in zip(report.mutations, statuses, strict=True) if s == Status.SURVIVED and not r.ran),
    )


def _status_rank(status: str) -> int:
    known: tuple[str, ...] = ("killed", "caught", "crashed", "timeout", "survived", DECLARED, "error", "stale")
    known += ("equivalent", "uncovered")
    return known.index(status) if status in known else len(known)


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:MAX_NAMED])
    return shown + (f" +{len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else "")


def verdict_line(verdict: Verdict, wall_s: float | None = None, reports: Sequence[str] = ()) -> str:
    """`PASS 35/35 killed, score 1.000 | 139s | reports: r.json` or `FAIL 33/35 killed, ... | survived: a, b`;
    under count = "detected": `PASS 7/7 detected, score 0.571, detected 1.000 | ...`."""
    head = f"{verdict.word} {verdict.killed}/{verdict.judged} {verdict.count}, score {format_score(verdict.score)}"
    if verdict.count == "detected":
        head += f", detected {format_score(verdict.detected)}"
    parts = [head]
    failed = [f"{status}: {_names(names)}" for status, names in verdict.named]
    if not failed and verdict.failures:
        failed = [_names(list(verdict.failures))]
    parts += failed
    if verdict.interrupted_by:
        parts.append(f"interrupted by {verdict.interrupted_by}")
    if verdict.harness_errors:
        parts.append(f"harness error: {_names(list(verdict.harness_errors))}")
    if wall_s is not None:
        parts.append(f"{wall_s:.0f}s" if wall_s >= 10 else f"{wall_s:.1f}s")
    if reports:
        parts.append("reports: " + " ".join(reports))
    return " | ".join(parts)
