"""What a job's child left behind, turned into its `JobResult`: one outcome per gate it was given.

The journal says which gates finished (with their outcomes) and which one was running when the child ended,
and whether it can be trusted (its seals, what the child found changed in the harness: then the result says
`tampered`); the executor says how it ended (`state`, `why` and the outcome the gate in progress gets). A gate
that never started is "not run", unless the mutant broke its import (every child starts pristine, so only the
mutant can) or the child hung before any gate began. Shared by every executor that forks children; knows nothing of how.
"""

from __future__ import annotations

import dataclasses
import json
import signal
from pathlib import Path
from typing import Any

from verify.report.verdict import GateOutcome, Outcome
from verify.run.child.job import JobPaths
from verify.run.child.journal import Entries, read_journal
from verify.run.execution import ceilings
from verify.run.execution.jobs import Job, JobResult, JobState
from verify.sandbox import hardening, namespaces

__all__ = ["collect", "death", "job_result", "refusal"]

# pytest's exit codes for a session it could not run at all (an internal error, a usage error): no gate ran.
_PYTEST_REFUSED = {3: "internal error", 4: "usage error"}


def _tail(log: Path, lines: int) -> list[str]:
    return log.read_text(errors="replace").strip().splitlines()[-lines:] if log.is_file() else []


def refusal(data: dict[str, Any], log: Path) -> str:
    """Why no gate ran when pytest itself refused the session (its own last words), else ""."""
    code = data.get("pytest_exit")
    if code not in _PYTEST_REFUSED:
        return ""
    tail = _tail(log, 3)
    return f"pytest {_PYTEST_REFUSED[code]} (exit {code})" + (
        ": " + " | ".join(line.strip()[:200] for line in tail) if tail else ""
    )


def death(exit_code: int, log: Path) -> tuple[str, str]:
    """A child that died without a result: the kind (the signal's name, or `exit N`) and why, its log's last
    line included."""
    kind = signal.Signals(-exit_code).name if exit_code < 0 else f"exit {exit_code}"
    what = f"killed by {kind}" if exit_code < 0 else f"exited with code {exit_code}"
    tail = _tail(log, 1)
    return kind, what + (f": {tail[0][:160]}" if tail else "")


def job_result(
    job: Job,
    data: dict[str, Any],
    journal: Entries,
    state: JobState,
    why: str,
    running_outcome: GateOutcome,
    elapsed: float,
) -> JobResult:
    """The result of `job` from its child's result file (`data`, {} when none) and journal."""
    started, finished, stopped = journal.started, journal.finished, journal.stopped
    collect_errors = tuple(tuple(e) for e in data.get("collect_errors", ()))
    outcomes = list(finished.values())
    in_progress = [g for g in started if g not in finished]
    outcomes += [_replace_id(running_outcome, g) for g in in_progress]
    seen = set(finished) | set(in_progress)
    # Siblings sharing claims split the gates: one they ran is not this child's to report (`_merge` checks that
    # every collected gate ran somewhere).
    for gate_id in () if job.claims else job.gate_ids:
        if gate_id in seen or (stopped and state == JobState.DONE):
            continue  # first-kill mode: gates after the kill were left out on purpose
        broken = [why for node, why in collect_errors if gate_id.startswith(node.rstrip(":") + "::")]
        if broken:  # every child starts pristine, so only the mutant can break a gate's import
            outcomes.append(GateOutcome(gate_id, Outcome.EXCEPTION, 0.0, "CollectError", broken[0]))
        elif state == JobState.TIMEOUT and not started:
            outcomes.append(_replace_id(running_outcome, gate_id))  # hung before any gate began
        else:
            outcomes.append(GateOutcome(gate_id, Outcome.NOT_RUN, 0.0, "NotRun", why or "never started"))
    return JobResult(
        job.key, state, elapsed, tuple(outcomes), why, int(data.get("pytest_exit", -1)),
        tuple(data.get("loaded", ())), collect_errors, data.get("coverage"), tuple(data.get("order", ())),
        journal.tampered,
    )  # fmt: skip


def _replace_id(outcome: GateOutcome, gate_id: str) -> GateOutcome:
    return dataclasses.replace(outcome, gate_id=gate_id)


def collect(
    job: Job, paths: JobPaths, breach: tuple[str, str], limits: hardening.Ceilings, budget_s: float,
    exit_code: int | None, elapsed: float, peak: int = 0, confined: bool = True, overdue: str = "", key: bytes = b"",
) -> JobResult:  # fmt: skip
    """A forked child's `JobResult`, from how it ended (`exit_code` None: still running past `budget_s`; `breach`:
    the ceiling the executor ended it at; `overdue`: why the executor ended it past its current gate's deadline or
    `max_job_s`) and what it left in `paths` (its journal sealed with `key`)."""
    data = json.loads(paths.result.read_text()) if exit_code == 0 and paths.result.is_file() else {}
    if not breach[0]:  # its streams past their ceiling (a flood faster than the watch), however it ended
        breach = ceilings.output(paths.streams, limits, exit_code)
    if not breach[0] and exit_code and not data:  # died: at its memory ceiling?
        breach = ceilings.died_at(peak, limits, exit_code)
    if not confined:  # it ran no gate: harness trouble, tried again, never a verdict
        tail = paths.log.read_text(errors="replace").strip().splitlines()[-1:] if paths.log.is_file() else []
        ended = "running" if exit_code is None else f"exit {exit_code}" if exit_code >= 0 else f"signal {-exit_code}"
        state, why = JobState.UNCONFINED, f"{(tail[0] if tail else 'the child did not confine itself')[:180]} ({ended})"
        running_outcome = GateOutcome("", Outcome.NOT_RUN, 0.0, "Unconfined", why)
    elif breach[0]:
        state, why = JobState.DIED, breach[1]
        running_outcome = GateOutcome("", Outcome.EXCEPTION, 0.0, breach[0], why)
    elif overdue:
        state, why = JobState.TIMEOUT, overdue
        running_outcome = GateOutcome("", Outcome.TIMEOUT, elapsed, "Timeout", why[:200])
    elif exit_code is None:
        state, why = JobState.TIMEOUT, f"still running after {budget_s:.1f}s (budget {job.timeout_s:.1f}s x load)"
        running_outcome = GateOutcome("", Outcome.TIMEOUT, elapsed, "Timeout", why)
    elif data:
        state, why = JobState.DONE, refusal(data, paths.log)
        running_outcome = GateOutcome("", Outcome.NOT_RUN, 0.0, "Interrupted", "the session ended inside it")
    else:
        kind, why = death(exit_code, paths.log)
        state, running_outcome = JobState.DIED, GateOutcome("", Outcome.EXCEPTION, 0.0, kind, why)
    result = job_result(job, data, read_journal(paths.journal, key), state, why, running_outcome, elapsed)
    return _private_memory_full(result, paths, limits)


def _private_memory_full(result: JobResult, paths: JobPaths, limits: hardening.Ceilings) -> JobResult:
    """A gate red by ENOSPC when the child's private /dev/shm and TMPDIR (`verify.sandbox.namespaces`: one
    tmpfs the size of its memory ceiling) were full when it ended: it hit its memory ceiling, and says so."""
    ceiling = limits.memory_bytes
    if not ceiling or namespaces.spent(paths.base) < ceiling - (1 << 20):
        return result
    why = f"its private /dev/shm and TMPDIR filled its memory ceiling of {ceiling >> 20} MiB"
    outcomes = tuple(
        dataclasses.replace(o, exc_type="MemoryCeiling", message=f"{why} ({o.message})")
        if o.outcome is Outcome.EXCEPTION and "No space left on device" in o.message
        else o
        for o in result.outcomes
    )
    return dataclasses.replace(result, outcomes=outcomes)
