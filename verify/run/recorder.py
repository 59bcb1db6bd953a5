"""The pytest plugin a child runs the gates with: it records each gate's outcome, and nothing else.

It classifies a red gate by where and how it went red (an AssertionError or a pytest.fail in the
test body, "DID NOT RAISE" included, is a check that caught the bug; any other exception is red but
not by a check; setup or teardown failures are errors), optionally switches coverage.py's dynamic
context per test, and can force every gate red for the harness self-check. It knows nothing of mutations or forking.
"""

from __future__ import annotations

from typing import Any

import pytest

from verify.report.verdict import GateOutcome, Outcome

__all__ = ["Recorder"]


class Recorder:
    def __init__(self, coverage: Any = None, force_fail: bool = False) -> None:
        self.coverage = coverage  # a started coverage.Coverage, or None
        self.force_fail = force_fail
        self._outcome: dict[str, Outcome] = {}
        self._exc_type: dict[str, str] = {}
        self._message: dict[str, str] = {}
        self._duration: dict[str, float] = {}
        self.collect_errors: list[str] = []
        self.fixtures: dict[str, list[str]] = {}  # gate id -> the fixture names it depends on
        self._context = ""

    def outcomes(self, marked: set[str] | None = None) -> tuple[GateOutcome, ...]:
        """Outcomes in run order, restricted to `marked` gate ids when given."""
        return tuple(
            GateOutcome(
                gate_id,
                outcome,
                round(self._duration.get(gate_id, 0.0), 6),
                self._exc_type.get(gate_id, ""),
                self._message.get(gate_id, ""),
            )
            for gate_id, outcome in self._outcome.items()
            if marked is None or gate_id in marked
        )

    def _switch(self, context: str) -> str:
        previous, self._context = self._context, context
        if self.coverage is not None:
            self.coverage.switch_context(context)
        return previous

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        self.fixtures[item.nodeid] = list(getattr(item, "fixturenames", ()))
        self._switch(item.nodeid)
        yield
        self._switch("")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest) -> Any:
        # A module- or session-scoped fixture is set up inside whichever gate needs it first; its
        # own context lets the coverage map credit every gate that depends on it, not just that one.
        previous = self._switch(f"fixture:{fixturedef.argname}")
        yield
        self._switch(previous)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Any:
        yield
        if self.force_fail:
            # Raised after the body, from inside the call phase: the report sees a genuine failure.
            raise AssertionError("dflash-verify harness self-check: forced failure")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        report = (yield).get_result()
        if not report.failed or call.excinfo is None:
            return
        self._exc_type[item.nodeid] = call.excinfo.typename
        self._message[item.nodeid] = (str(call.excinfo.value).strip().splitlines() or [""])[0][:200]
        if call.when != "call":
            self._outcome[item.nodeid] = Outcome.ERROR
        elif call.excinfo.errisinstance((AssertionError, pytest.fail.Exception)):
            # pytest.fail() and pytest.raises' "DID NOT RAISE" are checks the gate made, like an assert.
            self._outcome[item.nodeid] = Outcome.ASSERTION
        else:
            self._outcome[item.nodeid] = Outcome.EXCEPTION

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        gate_id = report.nodeid
        self._duration[gate_id] = self._duration.get(gate_id, 0.0) + report.duration
        if gate_id in self._outcome and self._outcome[gate_id].is_red:
            return  # the first red phase decides; a later teardown cannot turn it green
        if report.skipped:
            self._outcome[gate_id] = Outcome.SKIPPED
        elif report.passed and report.when in ("setup", "call"):
            self._outcome[gate_id] = Outcome.PASSED

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.collect_errors.append(report.nodeid or "<collection>")
