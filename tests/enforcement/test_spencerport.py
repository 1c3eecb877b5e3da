"""Spencerport Ch. 276's enforcement (C-F), every date derived by hand from the text.

C(6): appeal "within 15 days of service of notice of violation"; D: "Persons receiving a notice of
violation will be required to halt all construction ... until the Village confirms, in writing";
E: "a fine of not less than $250", "a separate offense for each day during which the violation
occurs or continues". The code sets no time for hearing an appeal: said, not made up.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from stormwatch.enforcement.actions import CaseError
from stormwatch.enforcement.register import rows_of
from stormwatch.enforcement.view import view_of
from tests.enforcement.support import book, draft, served


def test_appeal_within_15_days_of_service_and_no_hearing_clock(tmp_path: Path) -> None:
    b = book(tmp_path)
    case = draft(b, "spencerport", date(2026, 6, 29))
    b.record(case.id, "nov_issued", date(2026, 6, 29), "Sam SMO")
    assert [d.name for d in view_of(b, case).deadlines] == ["correction"]  # no appeal clock before service
    b.record(case.id, "nov_served", date(2026, 6, 30), "Sam SMO", method="hand")
    appeal = next(d for d in view_of(b, case, date(2026, 7, 1)).deadlines if d.name == "appeal")
    assert appeal.due == date(2026, 7, 15)  # 30 June + 15 days
    assert appeal.citations == ("Spencerport Ch. 276, enforcement C(6)",)
    b.record(case.id, "appeal_filed", date(2026, 7, 6), "Sam SMO")
    view = view_of(b, case, date(2026, 7, 7))
    assert "hearing" not in {d.name for d in view.deadlines}
    assert any(s.name == "hearing" and "sets no time for hearing" in s.text for s in view.silences)


def test_a_served_notice_halts_the_work_until_written_confirmation(tmp_path: Path) -> None:
    b = book(tmp_path)
    case = draft(b, "spencerport", date(2026, 6, 29))
    with pytest.raises(CaseError, match="the served notice is the stop-work order"):
        b.record(case.id, "stop_work_issued", date(2026, 6, 30), "Sam SMO")
    served(b, case, date(2026, 6, 30))
    state = view_of(b, case).stop_work
    assert state is not None and state.in_effect and state.since == date(2026, 6, 30) and state.by_notice
    assert [r["enforcement_type"] for r in rows_of([view_of(b, case)])] == [
        "notice of violation (a stop-work order: Spencerport Ch. 276, enforcement D)"]
    before = b.history(case.id)
    with pytest.raises(CaseError, match="confirms compliance in writing"):
        b.record(case.id, "stop_work_lifted", date(2026, 7, 10), "Sam SMO")
    assert b.history(case.id) == before  # nothing recorded
    b.record(case.id, "stop_work_lifted", date(2026, 7, 10), "Sam SMO",
             written_confirmation="Village letter of 2026-07-10, ref. SW-12")
    assert not view_of(b, case).stop_work.in_effect  # type: ignore[union-attr]


def test_a_separate_offense_for_each_day_from_3_june_through_30_june(tmp_path: Path) -> None:
    """Served 3 June, correction verified 1 July: the days 3 June through 30 June, 28 offenses."""
    b = book(tmp_path)
    case = draft(b, "spencerport", date(2026, 6, 2))
    served(b, case, date(2026, 6, 3))
    b.record(case.id, "correction_verified", date(2026, 7, 1), "Sam SMO")
    view = view_of(b, case)
    assert view.continuation is not None and view.continuation.unit == "day" and view.continuation.count == 28
    assert view.continuation_text.startswith("28 separate daily offenses")


def test_one_fine_of_not_less_than_250_whatever_came_before(tmp_path: Path) -> None:
    b = book(tmp_path)
    for day in (date(2024, 3, 1), date(2025, 3, 1)):
        b.record(draft(b, "spencerport", day).id, "nov_issued", day, "Sam SMO")
    view = view_of(b, draft(b, "spencerport", date(2026, 6, 3)))
    assert view.offense is not None and view.offense.number == 1 and view.offense.window_start is None
    assert "not less than $250 (the code sets no maximum)" in view.penalty_text
    assert "offense within" not in view.penalty_text  # the code has no ladder
