"""Progress in a CI log: plain lines with an estimate of the time left, never a redraw."""

from __future__ import annotations

import io

import pytest

from verify.report.progress import PhaseProgress, eta_s, format_s


def test_plain_lines_with_eta_when_not_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([0.0, 1.0, 20.0, 21.0, 40.0])
    monkeypatch.setattr("verify.report.progress.time.monotonic", lambda: next(clock))
    stream = io.StringIO()
    with PhaseProgress(stream=stream, interactive=False, interval_s=10.0) as progress:
        progress.phase("mutations", 4)  # t=0
        for label in ("a", "b", "c", "d"):  # t=1 (too soon), t=20, t=21 (too soon), t=40 (last one)
            progress.advance(label)
    lines = stream.getvalue().splitlines()
    assert lines == [
        "mutations: 4 to run",
        "mutations: 2/4 in 20s, about 20s left (last: b)",
        "mutations: 4/4 in 40s (last: d)",
    ]
    assert "\r" not in stream.getvalue() and "\x1b" not in stream.getvalue()


def test_eta_follows_the_mean_pace() -> None:
    assert eta_s(0, 10, 5.0) is None
    assert eta_s(2, 10, 10.0) == 40.0
    assert eta_s(10, 10, 10.0) == 0.0
    assert format_s(125) == "2m05s" and format_s(9.6) == "10s"


def test_ci_environment_is_not_interactive(monkeypatch: pytest.MonkeyPatch) -> None:
    from verify.report.progress import is_interactive

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert is_interactive(Tty())
    monkeypatch.setenv("CI", "true")
    assert not is_interactive(Tty())
    assert not is_interactive(io.StringIO())


def test_sweep_progress_in_a_log_is_plain_lines_with_eta(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from verify.sweep.render import progress_display
    from verify.sweep.result import SweepProgress

    clock = iter([0.0, 60.0, 70.0, 120.0])
    monkeypatch.setattr("verify.sweep.render.time.monotonic", lambda: next(clock))
    monkeypatch.setattr("verify.sweep.render.is_interactive", lambda stream: False)
    with progress_display() as update:  # started at t=0
        update(SweepProgress("Generating mutants"))
        update(SweepProgress("mutants", done=10, total=40, killed=9, survived=1))  # t=60
        update(SweepProgress("mutants", done=12, total=40, killed=11, survived=1))  # t=70: too soon
        update(SweepProgress("mutants", done=40, total=40, killed=38, survived=2))  # t=120: the last
    assert capsys.readouterr().err.splitlines() == [
        "sweep: generating mutants",
        "sweep: 10/40 mutants (9 killed, 1 survived, 0 no tests), about 3m00s left",
        "sweep: 40/40 mutants (38 killed, 2 survived, 0 no tests)",
    ]
