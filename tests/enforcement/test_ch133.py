"""Ch. 133's enforcement clocks, ladder and continuation, every date derived by hand from the code.

§133-10A(6): appeal "within seven days of service of notice of violation"; §133-11: "within seven
calendar days of its issuance", heard "within 15 days after the filing of the appeal", the decision
issued by certified mail "within five days of making his or her decision"; §133-12: corrected "in the
event of an appeal, within five business days of the decision"; §133-10D: fines by offense within
five years, "Each week's continued violation shall constitute a separate additional violation."
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from stormwatch.enforcement.actions import CaseError
from stormwatch.enforcement.view import view_of
from tests.enforcement.support import book, draft, served


def _deadline(view, name):  # type: ignore[no-untyped-def]
    return next(d for d in view.deadlines if d.name == name)


def test_appeal_window_of_a_notice_served_tuesday_closes_the_next_tuesday_citing_both_sections(tmp_path: Path) -> None:
    b = book(tmp_path)
    case = draft(b, "ch133", date(2026, 6, 29))
    served(b, case, date(2026, 6, 30))  # issued and served Tue 30 June
    appeal = _deadline(view_of(b, case, date(2026, 7, 1)), "appeal")
    # 30 June + 7 days = 7 July, by both clocks (service and issuance are the same day)
    assert appeal.due == date(2026, 7, 7) and appeal.state == "open"
    assert appeal.citations == ("Ch. 133 §133-10A(6)", "Ch. 133 §133-11")
    assert "within seven days of service of notice of violation" in appeal.quotes
    assert any("within seven calendar days of its issuance" in q for q in appeal.quotes)
    assert appeal.note == ""  # a Tuesday


def test_the_earlier_of_the_two_appeal_clocks_governs(tmp_path: Path) -> None:
    """Issued Mon 29 June, served Tue 30 June: §133-11 runs from issuance, 29 June + 7 = 6 July, a
    day before §133-10A(6)'s 7 July; the earlier is tracked, both are cited."""
    b = book(tmp_path)
    case = draft(b, "ch133", date(2026, 6, 29))
    served(b, case, date(2026, 6, 30), issued=date(2026, 6, 29))
    appeal = _deadline(view_of(b, case, date(2026, 7, 1)), "appeal")
    assert appeal.due == date(2026, 7, 6)
    assert appeal.citations == ("Ch. 133 §133-11", "Ch. 133 §133-10A(6)")
    assert _deadline(view_of(b, case, date(2026, 7, 7)), "appeal").state == "closed"  # a right unused, not overdue


def test_a_decision_made_tuesday_30_june_requires_correction_by_wednesday_8_july(tmp_path: Path) -> None:
    """Five business days after Tue 30 June: Wed 1, Thu 2, (Fri 3 July: Independence Day observed;
    Sat 4, Sun 5), Mon 6, Tue 7, Wed 8 July."""
    b = book(tmp_path)
    case = draft(b, "ch133", date(2026, 6, 22))
    served(b, case, date(2026, 6, 23))
    b.record(case.id, "appeal_filed", date(2026, 6, 25), "Sam SMO")
    pending = view_of(b, case, date(2026, 6, 26))
    assert "correction" not in {d.name for d in pending.deadlines}  # the notice's schedule waits for the decision
    assert any(s.name == "correction" and "§133-12" in s.text for s in pending.silences)
    b.record(case.id, "hearing_held", date(2026, 6, 29), "Sam SMO")
    b.record(case.id, "decision", date(2026, 6, 30), "Sam SMO", outcome="upheld")
    view = view_of(b, case, date(2026, 7, 1))
    correction = _deadline(view, "correction")
    assert correction.due == date(2026, 7, 8)
    assert correction.citations == ("Ch. 133 §133-12",)
    assert correction.basis == "5 business days after the decision"
    # mailed within five days of the decision: 30 June + 5 = Sun 5 July, kept as counted, with a note
    mailed = _deadline(view, "decision_mailed")
    assert mailed.due == date(2026, 7, 5) and mailed.citations == ("Ch. 133 §133-11",)
    assert "Sun 2026-07-05 is not a business day" in mailed.note and "Mon 2026-07-06" in mailed.note
    assert _deadline(view_of(b, case, date(2026, 7, 9)), "correction").state == "overdue"
    b.record(case.id, "correction_verified", date(2026, 7, 8), "Sam SMO")
    assert _deadline(view_of(b, case, date(2026, 7, 9)), "correction").state == "met"


def test_an_appeal_filed_2_july_must_be_heard_by_17_july(tmp_path: Path) -> None:
    b = book(tmp_path)
    case = draft(b, "ch133", date(2026, 6, 29))
    served(b, case, date(2026, 6, 30))
    b.record(case.id, "appeal_filed", date(2026, 7, 2), "Sam SMO")
    hearing = _deadline(view_of(b, case, date(2026, 7, 3)), "hearing")
    assert hearing.due == date(2026, 7, 17)  # 2 July + 15 days
    assert hearing.citations == ("Ch. 133 §133-11",) and hearing.owed_by == "village"
    assert _deadline(view_of(b, case, date(2026, 7, 17)), "hearing").state == "open"
    assert _deadline(view_of(b, case, date(2026, 7, 18)), "hearing").state == "overdue"
    assert _deadline(view_of(b, case, date(2026, 7, 3)), "appeal").state == "met"


def test_four_additional_weekly_violations_from_service_3_june_to_correction_1_july(tmp_path: Path) -> None:
    """3 June to 1 July is 28 days: four whole weeks, each a separate additional violation."""
    b = book(tmp_path)
    case = draft(b, "ch133", date(2026, 6, 2))
    served(b, case, date(2026, 6, 3))
    assert view_of(b, case, date(2026, 6, 16)).continuation.count == 1  # type: ignore[union-attr]
    b.record(case.id, "correction_verified", date(2026, 7, 1), "Sam SMO")
    view = view_of(b, case)
    assert view.continuation is not None and view.continuation.count == 4 and view.continuation.unit == "week"
    assert view.continuation_text.startswith("4 additional weekly violations")
    assert "Ch. 133 §133-10D" in view.continuation_text


def test_third_offense_within_five_years_is_fined_up_to_10000(tmp_path: Path) -> None:
    """Offenses of 2022-03-10 and 2025-01-15 lie within the five years before 2026-06-03 (from
    2021-06-03): the new one is the third, "not more than $10,000"."""
    b = book(tmp_path)
    for day in (date(2022, 3, 10), date(2025, 1, 15)):
        old = draft(b, "ch133", day)
        b.record(old.id, "nov_issued", day, "Sam SMO")
    case = draft(b, "ch133", date(2026, 6, 3), party="ACME builders  llc")  # the same party, written otherwise
    view = view_of(b, case)
    assert view.offense is not None and view.offense.number == 3
    assert [d for _, d in view.offense.prior] == [date(2022, 3, 10), date(2025, 1, 15)]
    assert view.offense.tier.fine_max_usd == 10000
    assert "third offense within five years" in view.penalty_text and "up to $10,000" in view.penalty_text
    assert "§133-10D" in view.penalty_text


def test_an_offense_more_than_five_years_back_does_not_count(tmp_path: Path) -> None:
    """2021-05-01 is before 2021-06-03, five years before 2026-06-03: a first offense, up to $2,000."""
    b = book(tmp_path)
    old = draft(b, "ch133", date(2021, 5, 1))
    b.record(old.id, "nov_issued", date(2021, 5, 1), "Sam SMO")
    view = view_of(b, draft(b, "ch133", date(2026, 6, 3)))
    assert view.offense is not None and view.offense.number == 1 and view.offense.prior == ()
    assert view.offense.window_start == date(2021, 6, 3)
    assert "up to $2,000" in view.penalty_text and "first offense" in view.penalty_text


def test_a_cancelled_notice_and_another_party_are_not_offenses(tmp_path: Path) -> None:
    b = book(tmp_path)
    cancelled = draft(b, "ch133", date(2025, 1, 15))
    served(b, cancelled, date(2025, 1, 15))
    b.record(cancelled.id, "appeal_filed", date(2025, 1, 16), "Sam SMO")
    b.record(cancelled.id, "decision", date(2025, 1, 20), "Sam SMO", outcome="cancelled")
    other = draft(b, "ch133", date(2025, 2, 1), party="Other Builder Inc")
    b.record(other.id, "nov_issued", date(2025, 2, 1), "Sam SMO")
    assert view_of(b, draft(b, "ch133", date(2026, 6, 3))).offense.number == 1  # type: ignore[union-attr]


def test_a_lien_only_after_thirty_days_unpaid(tmp_path: Path) -> None:
    """§133-10F: the expense, "if unpaid within 30 days, become a lien": billed 1 June, payable
    through 1 July, a lien from 2 July."""
    b = book(tmp_path)
    case = draft(b, "ch133", date(2026, 5, 20))
    b.record(case.id, "abatement", date(2026, 5, 28), "Sam SMO")
    b.record(case.id, "costs_billed", date(2026, 6, 1), "Sam SMO", amount_usd="4800.00")
    payment = _deadline(view_of(b, case), "payment")
    assert payment.due == date(2026, 7, 1) and payment.state == "overdue"
    with pytest.raises(CaseError, match="earliest day is 2026-07-02"):
        b.record(case.id, "lien_recorded", date(2026, 7, 1), "Sam SMO")
    b.record(case.id, "lien_recorded", date(2026, 7, 2), "Sam SMO")


def test_stop_work_order_in_effect_from_service_until_lifted(tmp_path: Path) -> None:
    b = book(tmp_path)
    case = draft(b, "ch133", date(2026, 6, 29))
    b.record(case.id, "stop_work_issued", date(2026, 6, 30), "Sam SMO")
    assert not view_of(b, case).stop_work.in_effect  # type: ignore[union-attr]  # issued, not yet served
    b.record(case.id, "stop_work_served", date(2026, 6, 30), "Sam SMO", method="certified_mail",
             certified_number="7019 0700 0000 1234 5678")
    state = view_of(b, case).stop_work
    assert state is not None and state.in_effect and state.since == date(2026, 6, 30)
    assert "until the Village confirms that the project is in compliance" in state.quote
    b.record(case.id, "stop_work_lifted", date(2026, 7, 10), "Sam SMO")  # Ch. 133 asks no writing
    assert not view_of(b, case).stop_work.in_effect  # type: ignore[union-attr]
    # Ch. 133 has no appeal of a stop-work order: said, not made up
    with pytest.raises(CaseError, match="no appeal of a stop-work order"):
        b.record(case.id, "stop_work_appeal_filed", date(2026, 7, 1), "Sam SMO")
