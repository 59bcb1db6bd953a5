"""The pytest plugin a child runs the gates with: it records each gate's outcome as it happens, and nothing else.

It classifies a red gate by how it went red: an AssertionError is the gate's check; `pytest.fail` (and
pytest.raises' "DID NOT RAISE") is its refusal; an exception whose type (or a base of it) the project
declares in `invariant_errors` is a named invariant; anything else is an exception. A red gate's stated p-value
(`verify.run.child.p_value`) is journalled with it. A gate that is skipped
or never finishes is not-run. Each finished gate is appended to a JSON-lines journal at once, and each
gate's start is journalled too, so the parent knows what finished and what was running when a child hangs,
dies or is killed. In first-kill mode it ends the session once a gate's own check fired and every gate it
must run has finished. It optionally switches coverage.py's dynamic context per test, can force every gate
red for the harness self-check, and can share one run of the gates with sibling children through a claims
folder: each gate file goes to whichever child claims it first. The parent reads the journal back with
`verify.run.child.journal.read_journal`. It knows nothing of mutations or forking.

Each gate may have its own deadline (its baseline time times the project's factor, stretched by the load
measured at its start and when it runs out): a gate still running then is ended by a `GateTimeout` raised in
it, journalled as a timeout, and the child moves on, so a hanging mutant costs one gate's deadline, not its
whole job's budget. The rest of that gate's file is not run in this child (its module fixtures may be left
mid-operation by the interrupted gate; pytest tears them down before the next file), and journalled not-run.
A gate's start is journalled with when and its deadline, so its parent can end a child whose gate runs past it
however the child treats signals (`verify.run.execution.overtime`).

The journal's lines are sealed (`verify.run.child.journal`), and after each gate and at the session's end the
recorder checks that pytest's reporting path and its own code and state are what the run loaded
(`verify.run.child.integrity`): a change is journalled and ends the child at once, with `TAMPERED_EXIT`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from verify.report.verdict import Outcome
from verify.run.child.deadline import GateDeadlines, GateTimeout
from verify.run.child.integrity import Snapshot
from verify.run.child.journal import Journal
from verify.run.child.p_value import stated_p_value

__all__ = ["TAMPERED_EXIT", "GateTimeout", "MutantInterrupt", "Recorder", "classify"]

TAMPERED_EXIT = 75  # the harness's code or state changed under the gates: the child ended at once (EX_TEMPFAIL)


# pytest's exit statuses for a session that ran: every gate passed, some failed, or none was collected.
_SESSION_RAN = frozenset({0, 1, 5})


class MutantInterrupt(Exception):
    """A KeyboardInterrupt raised by the code under test, not by a user: the child's process group never
    receives the terminal's Ctrl-C (the parent kills children itself), so it is the mutant's own doing."""


def _type_names(exc_type: type) -> set[str]:
    return {n for cls in exc_type.__mro__ for n in (cls.__name__, f"{cls.__module__}.{cls.__qualname__}")}


def classify(exc: BaseException, invariant_errors: Sequence[str]) -> Outcome:
    if isinstance(exc, pytest.fail.Exception):
        return Outcome.REFUSAL
    if isinstance(exc, AssertionError):
        return Outcome.ASSERTION
    if set(invariant_errors) & _type_names(type(exc)):
        return Outcome.INVARIANT
    return Outcome.EXCEPTION


class Recorder:
    def __init__(
        self,
        journal: Path,
        invariant_errors: Sequence[str] = (),
        coverage: Any = None,
        force_fail: bool = False,
        stop_after: tuple[str, ...] | None = None,
        claims: Path | None = None,
        deadlines: Mapping[str, float] | None = None,
        load_scale: Callable[[], float] = lambda: 1.0,
        on_session_end: Callable[[int], None] | None = None,
        key: bytes = b"",
    ) -> None:
        self.journal = Journal(journal, key)  # `key`: the job's, from its parent (b"": unsealed)
        # Called with pytest's exit status once the gates are over, before pytest's own end of session.
        self.on_session_end = on_session_end
        self.invariant_errors = tuple(invariant_errors)
        self.coverage = coverage  # a started coverage.Coverage, or None
        self.force_fail = force_fail
        # First-kill mode: once these gates have finished and some gate's own check fired, the rest of the
        # session is skipped (None: run every gate, the full matrix).
        self.stop_after = stop_after
        self._session: pytest.Session | None = None
        self._killed = False
        self._red: dict[str, tuple[Outcome, str, str, float | None]] = {}
        self._duration: dict[str, float] = {}
        self._done: set[str] = set()
        self.collect_errors: list[tuple[str, str]] = []  # (node id, first line of why)
        self.fixtures: dict[str, list[str]] = {}  # gate id -> the fixture names it depends on
        self._context = ""
        # Sibling children walk the same collection in the same order; a file is run by the child that creates
        # its claim first, whole (its module fixtures set up once), and skipped without a trace by the others.
        self.claims = claims
        self._mine: dict[str, bool] = {}
        self.order: list[str] = []  # every gate collected, in collection order
        # Per-gate deadlines on an idle machine (seconds); a gate without one runs under the job's budget only.
        self.deadlines = GateDeadlines(deadlines, load_scale)
        self._timed_out_file = ""  # a file whose gate timed out: the rest of it is not run in this child
        # Last: what the run loaded, before any of the mutant's code is imported (a warm job child's swapped
        # functions have not run yet either).
        self.integrity = Snapshot()

    def _write(self, record: dict[str, Any]) -> None:
        self.journal.write(record)

    def _check_integrity(self) -> None:
        """End the child at once, the change journalled, if the harness's code or state is not what it loaded."""
        changed = self.integrity.changed()
        if not changed:
            return
        what = ", ".join(changed[:5]) + (f" (and {len(changed) - 5} more)" if len(changed) > 5 else "")
        try:
            self._write({"tampered": what})
        finally:
            with contextlib.suppress(OSError):  # its log, where a death's last words are read
                os.write(2, f"dflash-verify: the harness's code changed under the gates: {what}\n".encode())
            os._exit(TAMPERED_EXIT)

    def _switch(self, context: str) -> str:
        previous, self._context = self._context, context
        if self.coverage is not None:
            self.coverage.switch_context(context)
        return previous

    def _is_mine(self, item: pytest.Item) -> bool:
        if self.claims is None or not hasattr(item.session, "_setupstate"):
            # Skipping a gate needs pytest's setup stack (below); a pytest without it runs every gate in every
            # child, and the parent keeps one outcome per gate.
            return True
        file = item.nodeid.partition("::")[0]
        if file not in self._mine:
            claim = self.claims / hashlib.sha256(file.encode()).hexdigest()
            try:
                os.close(os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
                self._mine[file] = True
            except FileExistsError:
                self._mine[file] = False
        return self._mine[file]

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.order = [item.nodeid for item in session.items]

    def _after_timeout(self, item: pytest.Item) -> bool:
        return bool(self._timed_out_file) and item.nodeid.partition("::")[0] == self._timed_out_file

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
        if self._is_mine(item) and not (self._after_timeout(item) and hasattr(item.session, "_setupstate")):
            return None
        # A gate another child claimed is neither run nor reported here (True ends the hook). What pytest's own
        # protocol does after a gate still happens: the fixtures and collectors the next gate does not share are
        # torn down, so the next gate this child runs finds the setup stack it expects (another folder, say).
        item.session._setupstate.teardown_exact(nextitem)
        return True

    @pytest.hookimpl(hookwrapper=True, specname="pytest_runtest_protocol")
    def pytest_runtest_protocol_journal(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        if not self._is_mine(item):
            yield
            return
        self.fixtures[item.nodeid] = list(getattr(item, "fixturenames", ()))
        if self._after_timeout(item) and hasattr(item.session, "_setupstate"):
            yield  # skipped by the tryfirst hook above
            why = f"not run in this child: a gate of {self._timed_out_file} before it timed out"
            self._finish(item.nodeid, Outcome.NOT_RUN, "AfterTimeout", why)
            return
        self.integrity.gates_start(item.config.pluginmanager, self)  # once: every plugin and conftest is in
        deadline = self.deadlines.deadlines.get(item.nodeid)
        self._write({"started": item.nodeid, "at": time.monotonic(), "deadline_s": deadline})
        self._switch(item.nodeid)
        self.deadlines.arm(item.nodeid)
        try:
            yield
        finally:
            self.deadlines.disarm()
        self._switch("")
        if item.nodeid not in self._done:  # the protocol ended without a call-phase verdict
            self._finish(item.nodeid, Outcome.NOT_RUN, "NotRun", "the gate's protocol ended without running it")
        self._check_integrity()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest) -> Any:
        # A module- or session-scoped fixture is set up inside whichever gate needs it first; its
        # own context lets the coverage map credit every gate that depends on it, not just that one.
        previous = self._switch(f"fixture:{fixturedef.argname}")
        yield
        self._switch(previous)

    def _guard(self) -> Generator[None, Any, Any]:
        self.deadlines.in_phase = True  # a deadline that runs out is raised in the gate's code, not in pytest's
        try:
            return (yield)
        except KeyboardInterrupt as error:
            raise MutantInterrupt("KeyboardInterrupt raised inside the code under test") from error
        finally:
            self.deadlines.in_phase = False

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, Any, Any]:
        return (yield from self._guard())

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self._session = session

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, Any]:
        if self.force_fail:
            # Raised from inside the call phase, after the gate's fixtures were set up: the report sees a
            # genuine call-phase failure, exactly as a gate's own assertion would look (its body adds nothing).
            raise AssertionError("dflash-verify harness self-check: forced failure")
        return (yield from self._guard())

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, Any]:
        return (yield from self._guard())

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        report = (yield).get_result()
        if report.failed and call.excinfo is not None and isinstance(call.excinfo.value, GateTimeout):
            self._timed_out_file = item.nodeid.partition("::")[0]  # even in a teardown after a red call
        if not report.failed or call.excinfo is None or item.nodeid in self._red:
            return  # the first red phase decides; a later teardown cannot change it
        exc = call.excinfo.value
        if isinstance(exc, GateTimeout):
            outcome, exc_type = Outcome.TIMEOUT, "Timeout"
        elif isinstance(exc, MutantInterrupt):
            outcome, exc_type = Outcome.EXCEPTION, "KeyboardInterrupt"
        else:
            outcome, exc_type = classify(exc, self.invariant_errors), call.excinfo.typename
        message = (str(exc).strip().splitlines() or [""])[0][:200]
        self._red[item.nodeid] = (outcome, exc_type, message, stated_p_value(exc, item.user_properties))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        gate_id = report.nodeid
        self._duration[gate_id] = self._duration.get(gate_id, 0.0) + report.duration
        if gate_id in self._done:
            return
        if gate_id in self._red:
            if report.when == "teardown" or report.failed:
                self._finish(gate_id, *self._red[gate_id])
        elif report.skipped:
            reason = str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else "skipped"
            self._finish(gate_id, Outcome.NOT_RUN, "Skipped", reason[:200])
        elif report.when == "teardown" and report.passed:
            self._finish(gate_id, Outcome.PASSED, "", "")

    def _finish(
        self, gate_id: str, outcome: Outcome, exc_type: str, message: str, p_value: float | None = None
    ) -> None:
        self._done.add(gate_id)
        duration = round(self._duration.get(gate_id, 0.0), 6)
        self._write(
            {"gate_id": gate_id, "outcome": str(outcome), "duration_s": duration, "exc_type": exc_type,
             "message": message, "p_value": p_value}
        )  # fmt: skip
        self._killed = self._killed or outcome.is_check
        if self.stop_after is not None and self._killed and set(self.stop_after) <= self._done:
            if self._session is not None and not self._session.shouldfail:
                # Journalled first, so the parent reads the gates never started as skipped on purpose.
                self._write({"stopped": gate_id})
                # shouldfail, as `-x` does: pytest ends the session as failed. shouldstop would end it as
                # interrupted, and its terminal reporter then formats the interrupt's traceback (~90 ms a child,
                # parsing every frame's source file), which nothing reads.
                self._session.shouldfail = "dflash-verify: first kill"

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        # Every gate's outcome is in the journal by now. What pytest does after this (its summary, the teardown of
        # fixtures a first kill left set up, the unconfigure hooks, a full garbage collection) decides nothing,
        # and cost ~7 ms a child; a session pytest could not run is left to end its own way, its words in the log.
        self._check_integrity()
        if self.on_session_end is not None and int(exitstatus) in _SESSION_RAN:
            self.on_session_end(int(exitstatus))

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            text = str(report.longrepr)
            lines = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
            why = lines[-1] if lines else (text.strip().splitlines() or [""])[-1]
            self.collect_errors.append((report.nodeid or "<collection>", why[:200]))
