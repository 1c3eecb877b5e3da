"""Ch. 507 §507-12: "a notice of violation and order to correct within a specified time"; our copy
ends after its third required content, so nothing after it is made up: no appeal, no penalty."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from stormwatch.alerts.packs import load_pack
from stormwatch.enforcement.actions import CaseError
from stormwatch.enforcement.view import view_of
from tests.enforcement.support import book, draft


def test_three_contents_and_the_cut_said(tmp_path: Path) -> None:
    section = load_pack("ch507").enforcement
    assert section is not None
    assert [c.key for c in section.notice.contents] == ["party", "location", "nature"]
    assert "ends after the third required content" in section.notice.cut_off
    assert section.penalty is None and section.appeal is None and section.clocks == {}


def test_the_order_to_correct_needs_its_time_and_nothing_else_is_computed(tmp_path: Path) -> None:
    b = book(tmp_path)
    bare = b.open(site="malverne-1", jurisdiction="ch507", timezone="America/New_York", by="Sam SMO",
                  found_on=date(2026, 6, 29), party="Owner", address="1 Church St", location="Lot 7",
                  nature="No silt fence.")
    with pytest.raises(CaseError, match="remedial measures and the date to complete them"):
        b.record(bare.id, "nov_issued", date(2026, 6, 30), "Sam SMO")
    case = draft(b, "ch507", date(2026, 6, 29), correct_by=date(2026, 7, 13))
    b.record(case.id, "nov_issued", date(2026, 6, 30), "Sam SMO")
    b.record(case.id, "nov_served", date(2026, 6, 30), "Sam SMO", method="hand")
    view = view_of(b, case, date(2026, 7, 1))
    assert [(d.name, d.due, d.basis) for d in view.deadlines] == [
        ("correction", date(2026, 7, 13), "the notice's time schedule")]
    assert view.offense is None and view.penalty_text == "" and view.continuation is None
    assert any(s.name == "appeal" and "Not in our copy" in s.text for s in view.silences)
    with pytest.raises(CaseError, match="Not in our copy"):
        b.record(case.id, "appeal_filed", date(2026, 7, 2), "Sam SMO")
