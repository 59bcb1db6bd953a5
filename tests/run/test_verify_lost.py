"""A job its executor loses on every try (a node gone after Ray's retries, a task that never answers) is harness
trouble: the phases try it again, then name the mutant an error (exit 4), never a verdict, and never cache it,
so the next run judges it afresh. The executor is the real fork executor, wrapped to lose one mutant's jobs."""

from __future__ import annotations

from pathlib import Path

from verify.report.json_report import read_json
from verify.report.verdict import GateOutcome, Outcome, Status
from verify.run.execution.jobs import ExecutorLost, Job, JobResult
from verify.run.phases import run as phases

LOST = "add-off-by-one"
LOST_TEXT = "return a + b + 1"  # the text its override serves


class _Losing:
    """The real executor, except that every job serving LOST's mutated file comes back lost, its gates not run."""

    def __init__(self, inner) -> None:
        self.inner, self.config, self.lost = inner, inner.config, 0

    def __enter__(self) -> _Losing:
        self.inner.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.inner.__exit__(*exc)

    @property
    def default_jobs(self) -> int:
        return self.inner.default_jobs

    @property
    def nodes(self) -> tuple[tuple[str, str], ...]:
        return self.inner.nodes

    @property
    def ceilings(self) -> str:
        return self.inner.ceilings

    def run(self, jobs, num_jobs, on_done=None) -> list[JobResult]:
        losing = [j for j in jobs if any(LOST_TEXT in text for _, text in j.overrides)]
        kept = [j for j in jobs if j not in losing]
        results = {r.key: r for r in self.inner.run(kept, num_jobs, on_done)} if kept else {}
        for job in losing:
            self.lost += 1
            results[job.key] = _lost(job)
            if on_done is not None:
                on_done(results[job.key])
        return [results[j.key] for j in jobs]


def _lost(job: Job) -> JobResult:
    why = "the cluster lost it (NodeDiedError: the node running it died, after 3 retries)"
    return JobResult(
        job.key, "lost", 1.0, tuple(GateOutcome(g, Outcome.NOT_RUN, 0.0, "Lost", why) for g in job.gate_ids), why
    )


def test_a_job_lost_on_every_try_is_an_error_never_a_verdict_and_is_judged_again_next_run(
    toy_copy, cli, monkeypatch, tmp_path: Path
) -> None:
    root = toy_copy()
    wrappers: list[_Losing] = []
    real = phases.open_executor

    def losing_executor(*args, **kwargs):
        wrappers.append(_Losing(real(*args, **kwargs)))
        return wrappers[-1]

    monkeypatch.setattr(phases, "open_executor", losing_executor)
    selected = ("-m", LOST, "-m", "sub-swaps-operands")
    result = cli("--project", str(root), *selected, "--json", str(tmp_path / "lost.json"))
    assert result.exit_code == 4, result.output  # a mutation without a verdict: never a pass, never a fail
    report, _ = read_json(tmp_path / "lost.json")
    statuses = {r.name: r.status for r in report.mutations}
    assert statuses == {LOST: Status.ERROR, "sub-swaps-operands": Status.KILLED}
    assert sum(w.lost for w in wrappers) >= 2  # tried again before it was named an error
    [lost] = [r for r in report.mutations if r.name == LOST]
    assert lost.killed_by == () and lost.attempts == 2 and not lost.cached
    assert "did not run twice" in lost.reason and "the cluster lost it" in lost.reason
    assert f"error: {LOST}" in result.output.strip().splitlines()[-1]

    monkeypatch.setattr(phases, "open_executor", real)
    again = cli("--project", str(root), *selected, "--json", str(tmp_path / "again.json"))
    assert again.exit_code == 0, again.output  # not cached: judged afresh once the cluster holds
    report, _ = read_json(tmp_path / "again.json")
    by_name = {r.name: r for r in report.mutations}
    assert {name: r.status for name, r in by_name.items()} == {LOST: Status.KILLED, "sub-swaps-operands": Status.KILLED}
    assert not by_name[LOST].cached and by_name["sub-swaps-operands"].cached


class _Dying(_Losing):
    """The real executor, until the mutation phase's first result is in: then the executor itself dies (as the Ray
    driver's process does when its node is lost), and so does every later call."""

    def run(self, jobs, num_jobs, on_done=None) -> list[JobResult]:
        mutants = [j for j in jobs if not j.key.startswith("_")]  # the baseline's and flake check's jobs are "_..."
        if self.lost or not mutants:
            if self.lost:
                raise ExecutorLost("the process holding the Ray driver exited with code 1: connection to the plasma")
            return self.inner.run(jobs, num_jobs, on_done)
        self.inner.run(mutants[:1], num_jobs, on_done)  # its verdict is reached (and cached) before the death
        self.lost = 1
        raise ExecutorLost("the process holding the Ray driver exited with code 1: connection to the plasma")


def test_an_executor_that_dies_mid_run_ends_it_with_exit_4_a_partial_report_and_a_resume(
    toy_copy, cli, monkeypatch, tmp_path: Path
) -> None:
    root = toy_copy()
    real = phases.open_executor
    monkeypatch.setattr(phases, "open_executor", lambda *args, **kwargs: _Dying(real(*args, **kwargs)))
    selected = ("-m", LOST, "-m", "sub-swaps-operands", "--jobs", "1")
    result = cli("--project", str(root), *selected, "--json", str(tmp_path / "dead.json"))
    assert result.exit_code == 4, result.output  # harness trouble, neither a pass nor the survivors' 1
    report, _ = read_json(tmp_path / "dead.json")
    assert report.interrupted and not report.interrupted_by
    [first] = report.mutations  # one verdict reached before the death; nothing judged after it
    assert first.status is Status.KILLED
    [lost] = report.harness_errors
    assert "its executor lost: the process holding the Ray driver exited with code 1" in lost
    assert "verdicts reached are cached: run again" in lost
    assert "its executor lost" in " ".join(result.output.split())

    monkeypatch.setattr(phases, "open_executor", real)
    again = cli("--project", str(root), *selected, "--json", str(tmp_path / "again.json"))
    assert again.exit_code == 0, again.output
    by_name = {r.name: r for r in read_json(tmp_path / "again.json")[0].mutations}
    assert {name: r.status for name, r in by_name.items()} == {LOST: Status.KILLED, "sub-swaps-operands": Status.KILLED}
    assert by_name[first.name].cached and not [r for r in by_name.values() if r.name != first.name][0].cached
