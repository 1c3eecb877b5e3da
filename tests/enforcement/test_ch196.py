"""Ch. 196 §196-12, every date derived by hand: no appeal of a notice of violation; a stop-work order
appealed to the Planning Board "not later than 30 days after service", a hearing "scheduled ... within
20 days of receipt of request"; fines cut off in our copy ("$1,0"), kept as found and marked."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from stormwatch.alerts.packs import load_pack
from stormwatch.enforcement.actions import CaseError
from stormwatch.enforcement.view import view_of
from tests.enforcement.support import book, draft, served


def test_no_appeal_of_a_notice_of_violation(tmp_path: Path) -> None:
    b = book(tmp_path)
    case = draft(b, "ch196", date(2026, 6, 29))
    served(b, case, date(2026, 6, 30))
    with pytest.raises(CaseError, match="provides no appeal of a notice of violation"):
        b.record(case.id, "appeal_filed", date(2026, 7, 1), "Sam SMO")
    view = view_of(b, case, date(2026, 7, 1))
    assert [d.name for d in view.deadlines] == ["correction"]
    assert any(s.name == "appeal" and "§196-12D" in s.text for s in view.silences)


def test_stop_work_appeal_to_the_planning_board_and_its_hearing(tmp_path: Path) -> None:
    b = book(tmp_path)
    case = draft(b, "ch196", date(2026, 6, 29))
    b.record(case.id, "stop_work_issued", date(2026, 6, 30), "Sam SMO")
    b.record(case.id, "stop_work_served", date(2026, 6, 30), "Sam SMO", method="hand")
    appeal = next(d for d in view_of(b, case, date(2026, 7, 1)).deadlines if d.name == "stop_work_appeal")
    assert appeal.due == date(2026, 7, 30)  # 30 June + 30 days
    assert appeal.citations == ("Ch. 196 §196-12D",)
    assert load_pack("ch196").enforcement.stop_work_appeal.to == "the Planning Board"  # type: ignore[union-attr]
    b.record(case.id, "stop_work_appeal_filed", date(2026, 7, 2), "Sam SMO")
    hearing = next(d for d in view_of(b, case, date(2026, 7, 3)).deadlines if d.name == "stop_work_hearing")
    assert hearing.due == date(2026, 7, 22)  # 2 July + 20 days
    b.record(case.id, "stop_work_decision", date(2026, 7, 20), "Sam SMO", outcome="cancelled")
    assert not view_of(b, case).stop_work.in_effect  # type: ignore[union-attr]


def test_the_cut_off_fines_are_shown_as_found_and_marked_unverified(tmp_path: Path) -> None:
    section = load_pack("ch196").enforcement
    assert section is not None and section.penalty is not None
    assert [t.fine_max_usd for t in section.penalty.tiers] == [None, None, None]  # never invented
    notes = section.unverified_notes()
    assert any('"nor more than $1,0"' in n for n in notes) and len(notes) == 3
    b = book(tmp_path)
    for day in (date(2023, 4, 1), date(2025, 4, 1)):
        b.record(draft(b, "ch196", day).id, "nov_issued", day, "Sam SMO")
    view = view_of(b, draft(b, "ch196", date(2026, 6, 3)))
    assert view.offense is not None and view.offense.number == 3
    assert "nor more than $2,0 or imprisonment" in view.penalty_text  # as found
    assert "not less than $1,500" in view.penalty_text and "UNVERIFIED" in view.penalty_text


def test_weekly_continuation(tmp_path: Path) -> None:
    b = book(tmp_path)
    case = draft(b, "ch196", date(2026, 6, 2))
    served(b, case, date(2026, 6, 3))
    b.record(case.id, "correction_verified", date(2026, 7, 1), "Sam SMO")
    assert view_of(b, case).continuation.count == 4  # type: ignore[union-attr]  # 28 days, 4 weeks
