"""Refused records: one clear line, and the case exactly as it was."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from stormwatch.enforcement.actions import CaseError
from tests.enforcement.support import book, draft, served


def test_a_decision_dated_before_the_appeal(tmp_path: Path) -> None:
    b = book(tmp_path)
    case = draft(b, "ch133", date(2026, 6, 29))
    served(b, case, date(2026, 6, 30))
    b.record(case.id, "appeal_filed", date(2026, 7, 2), "Sam SMO")
    before = b.history(case.id)
    with pytest.raises(CaseError) as refused:
        b.record(case.id, "decision", date(2026, 7, 1), "Sam SMO", outcome="upheld")
    assert str(refused.value) == "the decision on 2026-07-01 is before the appeal filed on 2026-07-02"
    assert b.history(case.id) == before


def test_service_before_issue(tmp_path: Path) -> None:
    b = book(tmp_path)
    case = draft(b, "ch133", date(2026, 6, 29))
    b.record(case.id, "nov_issued", date(2026, 6, 30), "Sam SMO")
    before = b.history(case.id)
    with pytest.raises(CaseError) as refused:
        b.record(case.id, "nov_served", date(2026, 6, 29), "Sam SMO", method="hand")
    assert str(refused.value) == ("notice of violation served on 2026-06-29 is before the notice of violation "
                                  "issued on 2026-06-30")
    assert b.history(case.id) == before
    with pytest.raises(CaseError, match="no notice of violation issued is recorded"):
        b.record(draft(b, "ch133", date(2026, 6, 29)).id, "nov_served", date(2026, 6, 30), "Sam SMO", method="hand")


def test_an_unknown_case(tmp_path: Path) -> None:
    b = book(tmp_path)
    with pytest.raises(CaseError, match="no enforcement case 'EC-2026-999'"):
        b.record("EC-2026-999", "nov_issued", date(2026, 6, 30), "Sam SMO")


def test_other_refusals(tmp_path: Path) -> None:
    b = book(tmp_path)
    case = draft(b, "ch133", date(2026, 6, 29))
    before = b.history(case.id)
    for kind, on, fields, why in [
        ("nov_issued", date(2026, 7, 21), {}, "is after today (2026-07-20)"),
        ("nov_issued", date(2026, 6, 28), {}, "is before the violation was found (2026-06-29)"),
        ("decision", date(2026, 7, 1), {"outcome": "upheld"}, "no appeal filed is recorded"),
        ("served", date(2026, 7, 1), {}, "unknown action 'served'"),
        ("referral", date(2026, 7, 1), {}, "referral needs to"),
        ("stop_work_lifted", date(2026, 7, 1), {}, "no stop-work order is in effect"),
    ]:
        with pytest.raises(CaseError, match=why.replace("(", r"\(").replace(")", r"\)")):
            b.record(case.id, kind, on, "Sam SMO", **fields)
    assert b.history(case.id) == before
    b.record(case.id, "nov_issued", date(2026, 6, 30), "Sam SMO")
    with pytest.raises(CaseError, match="certified-mail number"):
        b.record(case.id, "nov_served", date(2026, 6, 30), "Sam SMO", method="certified_mail")
    with pytest.raises(CaseError, match="its contents are as issued"):
        b.edit(case.id, "Sam SMO", remedy="something else")
