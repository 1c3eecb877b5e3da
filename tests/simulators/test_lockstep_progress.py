"""`simulate --lockstep` shows its progress as the demo does: the simulated time reached and the
readings made, one line rewritten in place on a terminal (cleared before a log line and at the
end); to a file or a pipe, an INFO line now and then instead."""

from __future__ import annotations

import io
import logging
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from stormwatch.runtime.cliutil import progress
from stormwatch.simulators.cli import lockstep_line

START = datetime(2026, 6, 1, 4, tzinfo=UTC)
END = START + timedelta(hours=32)
NEW_YORK = ZoneInfo("America/New_York")


def test_the_line_says_the_simulated_time_the_share_and_the_readings() -> None:
    assert lockstep_line(START + timedelta(hours=4), START, END, 340, NEW_YORK) == (
        0.125, "simulated Mon 01 Jun 2026 04:00 EDT ( 12 %): 340 readings made")
    assert lockstep_line(START, START, END, 1, NEW_YORK)[1].endswith("(  0 %): 1 reading made")
    assert lockstep_line(END, START, END, 0, NEW_YORK)[0] == 1.0


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_one_line_in_place_cleared_before_a_log_line(monkeypatch: pytest.MonkeyPatch) -> None:
    term = _Terminal()
    monkeypatch.setattr("sys.stderr", term)
    handler = logging.StreamHandler(term)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with progress("simulate", after_s=0.0) as report:
            report(0.125, "simulated A")
            report(0.25, "simulated B")
            logging.getLogger("stormwatch.test").warning("the clock stopped")
            report(0.5, "simulated C")
    finally:
        root.removeHandler(handler)
    shown = term.getvalue()
    head = "\r\033[Ksimulated A\r\033[Ksimulated B\r\033[K"  # the line cleared before the log line
    assert shown.startswith(head), repr(shown)
    logged = shown[len(head):-len("\r\033[Ksimulated C\r\033[K")]
    assert shown.endswith("\r\033[Ksimulated C\r\033[K") and "WARNING the clock stopped\n" in logged, repr(shown)
    assert "simulated" not in logged  # (another test's handler on the root may log the line too, as a log does)
    assert not handler.filters  # the terminal's filter leaves with the progress line


def test_to_a_pipe_an_info_line_every_so_often(monkeypatch: pytest.MonkeyPatch,
                                                caplog: pytest.LogCaptureFixture) -> None:
    pipe = io.StringIO()
    monkeypatch.setattr("sys.stderr", pipe)
    with caplog.at_level(logging.INFO), progress("simulate", after_s=0.0, every_s=0.0) as report:
        report(0.5, "simulated B")
    # no line rewritten in place (another test's handler on the root may log the INFO line here too)
    assert "\r" not in pipe.getvalue() and "\033[K" not in pipe.getvalue()
    assert [r.getMessage() for r in caplog.records] == ["simulated B"]
