"""A case drafted from work orders: the events' evidence copied in, the draft proposed from them (the
day found in the site's zone, the sections violated, a finding, not "possible ... for the SMO to
confirm"), more evidence added to a draft, none to an issued notice or from another site."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from stormwatch.alerts.sitefile import load_site_file
from stormwatch.alerts.workorders import WorkOrders
from stormwatch.clock import ManualClock
from stormwatch.contract import Event
from stormwatch.enforcement.actions import CaseError
from stormwatch.enforcement.drafting import draft_from, source_of
from stormwatch.resources import example_site
from tests.enforcement.support import ZONE, book

#: 03:30 UTC on 2 June is 23:30 EDT on 1 June: the day found is the site's local day.
LATE = datetime(2026, 6, 2, 3, 30, tzinfo=UTC)


def _orders(tmp_path: Path) -> WorkOrders:
    orders = WorkOrders(tmp_path / "alerts.db", ManualClock(LATE + timedelta(minutes=10)))
    window = {"window_start": "2026-06-02T03:10:00Z", "window_end": "2026-06-02T03:15:00Z",
              "upstream_median_ntu": 8.0, "downstream_median_ntu": 14.2, "allowed_ntu": 13.0, "unit": "NTU"}
    orders.open_for(Event(kind="turbidity_contrast", site="riverside-commons", event_time=LATE, rule="R2",
                          citation="Ch. 133 §133-6C", occurrence="turbidity:2026-06-02T03:10:00Z",
                          due_at=LATE + timedelta(hours=24), evidence=[window],
                          message="possible turbidity violation: downstream median 14.2 NTU > allowed 13.0 NTU; "
                                  "for the SMO to confirm"), timezone=ZONE)
    orders.open_for(Event(kind="basin_cleanout_due", site="riverside-commons", event_time=LATE + timedelta(hours=2),
                          rule="R3", citation="Ch. 133 §133-7A(1)", occurrence="basin:2026-06-02T05:30:00Z",
                          due_at=LATE + timedelta(hours=74), message="50.4 % of design storage lost",
                          evidence=[{"time": "2026-06-02T05:30:00Z", "sediment_depth_ft": 2.57}]), timezone=ZONE)
    return orders


def test_a_draft_from_two_orders(tmp_path: Path) -> None:
    cfg = load_site_file(example_site())
    orders = _orders(tmp_path).list()
    proposed = draft_from(cfg, orders)
    assert proposed["found_on"] == date(2026, 6, 1)
    assert proposed["violated"] == "Ch. 133 §133-6C; Ch. 133 §133-7A(1)"
    assert proposed["nature"].startswith("Mon 01 Jun 2026 23:30 EDT: turbidity violation: downstream median 14.2 NTU")
    assert "possible" not in proposed["nature"] and "for the SMO to confirm" not in proposed["nature"]
    assert [s["order"] for s in proposed["sources"]] == [o.id for o in orders]
    assert proposed["sources"][0]["evidence"][0]["downstream_median_ntu"] == 14.2
    b = book(tmp_path)
    case = b.open(site=cfg.site.id, jurisdiction="ch133", timezone=ZONE, by="Sam SMO", **proposed)
    assert case.found_on == date(2026, 6, 1) and len(case.sources) == 2


def test_evidence_added_to_a_draft_once_and_never_to_an_issued_notice(tmp_path: Path) -> None:
    cfg = load_site_file(example_site())
    turbidity, basin = _orders(tmp_path).list()
    b = book(tmp_path)
    case = b.open(site=cfg.site.id, jurisdiction="ch133", timezone=ZONE, by="Sam SMO",
                  **draft_from(cfg, [turbidity]))
    case = b.add_sources(case.id, "Sam SMO", [source_of(basin), source_of(turbidity)])
    assert [s["order"] for s in case.sources] == [turbidity.id, basin.id]
    assert b.history(case.id)[-1].notes == f"evidence added from {basin.id}"
    other = {**source_of(basin), "order": "WO-elsewhere", "site": "hilltop"}
    with pytest.raises(CaseError, match="is of site hilltop, not riverside-commons"):
        b.add_sources(case.id, "Sam SMO", [other])
    with pytest.raises(CaseError, match="is of site riverside-commons, not hilltop"):
        draft_from(cfg.model_copy(update={"site": cfg.site.model_copy(update={"id": "hilltop"})}), [basin])
    b.edit(case.id, "Sam SMO", party="Acme", address="1 Main St", remedy="Clean out the basin.",
           correct_by=date(2026, 6, 8))
    b.record(case.id, "nov_issued", date(2026, 6, 2), "Sam SMO")
    with pytest.raises(CaseError, match="its evidence is as issued"):
        b.add_sources(case.id, "Sam SMO", [other])
