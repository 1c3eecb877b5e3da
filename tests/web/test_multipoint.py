"""The desk's portfolio, site page and work-order evidence show every discharge point's turbidity
and every basin's storage of a multi-point site (examples/two-outfalls.yaml, issue 16), each named by
its id.

By hand, at 12:00 UTC on 1 June 2026 with a reading a minute for the last 10 minutes:

* outfall-1: down 20.0 / up 8.0 NTU (Washington, background <= 50 NTU: allowed 8.0 + 5 = 13.0 NTU):
  above the allowed value, not yet sustained (no contrast event): warn;
* outfall-2: down 9.0 / up 8.0 NTU (the shared background probe): within 13.0 NTU: ok;
* basin-1 (40 x 20 ft, 3:1, H = 4 ft; sensor 8 ft above the floor): 1,828.8 mm to the sediment is
  2.00 ft of it; V(2) = 800·2 + 60·3·4 + 4/3·9·8 = 2,416 ft³ of V(4) = 6,848 ft³: 35.3 %;
* trap-2 (table [1,300] [2,800], H = 3 ft, V(H) = 1,500 ft³; sensor at 6 ft): 1,371.6 mm is 1.50 ft,
  300 + 0.5·500 = 550 ft³: 36.7 %. Both below the 40 % warning: ok.

The charts (web/charts.py: 880 x 230 px, plot from x = 58 to 818 and down to y = 230 - 34 = 196):

* a turbidity chart's title and legend do not fit one row, so its plot starts under a legend row,
  at y = 26 + 16 = 42 (154 px high). outfall-1's values (8, 20 NTU, band to 13) give the axis 0..20
  (ticks of 5): down 20 at y = 42.0, up 8 at 196 - 154·8/20 = 134.4, the band's top 13 at 95.9.
  outfall-2's (8, 9, 13) give 0..15 (13/5 rounds up to 3 ticks of 5): down 9 at 196 - 154·9/15 = 103.6,
  up 8 at 113.9, the band's top at 62.5;
* a basin chart's legend fits beside its title: the plot is 26..196 (170 px); the axis holds the
  cleanout line's 50 % + 10, 0..60 in ticks of 20: basin-1's 35.28 % at 196 - 170·35.28/60 = 96.0,
  trap-2's 36.67 % at 92.1.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from starlette.testclient import TestClient

from stormwatch.alerts.rules import occurrence
from stormwatch.alerts.rules.report import ReportRule
from stormwatch.alerts.workorders import WorkOrders
from stormwatch.clock import ManualClock
from stormwatch.config import load_site
from stormwatch.contract import TIP_UNIT, Event, Reading
from stormwatch.profiles import ProfileLibrary
from stormwatch.stores.sqlite import SqliteStore
from stormwatch.web.accounts import Accounts
from stormwatch.web.app import create_app
from stormwatch.web.overview import portfolio, site_model, site_series
from stormwatch.web.server import DeskSettings, open_desk
from tests.conftest import REPO
from tests.web_support import PASSWORD, login

EXAMPLE = REPO / "examples" / "two-outfalls.yaml"
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
VALUES = {("turb-up", "turbidity", "NTU"): 8.0, ("turb-down-1", "turbidity", "NTU"): 20.0,
          ("turb-down-2", "turbidity", "NTU"): 9.0, ("basin-level-1", "distance", "mm"): 1828.8,
          ("basin-level-2", "distance", "mm"): 1371.6, ("rain-1", "rain_tips", TIP_UNIT): 0}


SITE = "mill-creek-commons"


def _readings() -> list[Reading]:
    """A reading a minute of every device for the 10 minutes before NOW (:data:`VALUES`)."""
    readings, seq = [], 0
    for i in range(10):
        t = NOW - timedelta(minutes=10 - i)
        for (device, quantity, unit), value in VALUES.items():
            seq += 1
            readings.append(Reading(site=SITE, device=device, quantity=quantity, value=value, unit=unit, time=t,
                                    gateway="gw-millcreek-1", boot="b1", seq=seq))
    return readings


def test_portfolio_shows_each_outfall_and_basin(tmp_path: Path) -> None:
    profiles = ProfileLibrary()
    site = site_model(load_site(EXAMPLE, profiles), profiles, str(EXAMPLE))
    with SqliteStore(tmp_path / "store.db") as store:
        store.write_readings(_readings())
        (row,) = portfolio([site], store, [], NOW).rows
    assert row.turbidity.text == "outfall-1: down 20.0 / up 8.0 NTU; outfall-2: down 9.0 / up 8.0 NTU"
    assert row.turbidity.state == "warn"
    assert row.turbidity.detail.startswith("outfall-1: above the allowed 13.0 NTU (not yet sustained); "
                                           "outfall-2: allowed ≤ 13.0 NTU")
    assert row.basin.text == "basin-1: 35.3 %; trap-2: 36.7 %"
    assert row.basin.state == "ok"
    assert row.basin.detail == ("basin-1: sediment 2.00 ft; cleanout at 50.0 %; "
                                "trap-2: sediment 1.50 ft; cleanout at 50.0 %")
    assert row.silent == ()


def test_site_series_holds_each_outfall_and_basin_apart() -> None:
    profiles = ProfileLibrary()
    site = site_model(load_site(EXAMPLE, profiles), profiles, str(EXAMPLE))
    s = site_series(site, _readings(), [], NOW - timedelta(hours=1), NOW)
    assert [(p.point, p.upstream_device, p.downstream_device) for p in s.points] == [
        ("outfall-1", "turb-up", "turb-down-1"), ("outfall-2", "turb-up", "turb-down-2")]
    one, two = s.points
    assert {v for _, v in one.downstream} == {20.0} and {v for _, v in two.downstream} == {9.0}
    assert {v for _, v in one.upstream} == {v for _, v in two.upstream} == {8.0}  # the shared background
    assert {v for _, v in one.allowed} == {v for _, v in two.allowed} == {13.0}  # 8 + 5 NTU (WAC)
    assert len(one.downstream) == len(two.downstream) == 10
    assert [(b.basin, b.device, b.named) for b in s.basins] == [("basin-1", "basin-level-1", True),
                                                               ("trap-2", "basin-level-2", True)]
    assert {round(v, 6) for _, v in s.basins[0].lost} == {round(2416 / 6848, 6)}
    assert {round(v, 6) for _, v in s.basins[1].lost} == {round(550 / 1500, 6)}
    assert s.point(None) is None and s.basin(None) is None  # two of each: none is "the site's one"
    assert s.point("outfall-2") is two and s.basin("trap-2") is s.basins[1]


def _figures(html: str) -> dict[str, str]:
    return dict(re.findall(r'<figure id="([^"]+)">(.*?)</figure>', html, re.S))


def _ys(svg: str, color: str) -> set[str]:
    """The y coordinates of the polylines drawn in ``color``."""
    return {pt.split(",")[1] for pts in re.findall(rf'<polyline points="([^"]+)" fill="none" stroke="{color}"', svg)
            for pt in pts.split()}


def _band_ys(svg: str) -> set[str]:
    (pts,) = re.findall(r'<polygon points="([^"]+)"[^>]*class="band"', svg)
    return {pt.split(",")[1] for pt in pts.split()[:-2]}  # the band's top; the last two: its base


DOWN, UP, LOST = "#c0392b", "#2e8b57", "#7d5a3c"


def _desk(tmp_path: Path) -> tuple[TestClient, dict[str, str]]:
    """A desk of the two-outfalls site: its readings, a turbidity review of outfall-2, a cleanout of
    trap-2, and a completed storm inspection whose report order is open (its parent: the inspection)."""
    state = tmp_path / "state"
    state.mkdir()
    t = NOW - timedelta(minutes=5)
    events = [
        Event(kind="turbidity_contrast", site=SITE, event_time=t, rule="R2", citation="Ch. 133 §133-7A(3)",
              occurrence=occurrence("turbidity", t, "outfall-2"), message="outfall-2: sustained contrast",
              discharge_point="outfall-2", upstream_ntu=8.0, downstream_ntu=9.0, turbidity_unit="NTU"),
        Event(kind="basin_cleanout_due", site=SITE, event_time=t, rule="R3", citation="Ch. 133 §133-7A(4)",
              occurrence=occurrence("basin", t, "trap-2"), message="trap-2: cleanout due",
              due_at=NOW + timedelta(hours=72), basin="trap-2", lost_capacity=0.5, sediment_depth_ft=1.5),
        Event(kind="storm_inspection_due", site=SITE, event_time=t, rule="R1", citation="Ch. 133 §133-7A(2)",
              occurrence=occurrence("storm", t - timedelta(hours=2)), message="storm of 0.50 in",
              due_at=NOW + timedelta(hours=24), tips=50, depth_in=0.5),
    ]
    with SqliteStore(tmp_path / "store.db") as store:
        store.write_readings(_readings())
        store.write_events(events)
    book = WorkOrders(state / "alerts.db", ManualClock(t))
    report = ReportRule(kind="report", citation="Ch. 196 §196-9B")
    orders = {e.kind: book.open_for(e, report=report, timezone="America/New_York")[0].id for e in events}
    book.complete(orders["storm_inspection_due"], "Ina Inspector", "inspected", at=NOW - timedelta(minutes=2))
    (reported,) = [o for o in book.list() if o.kind == "inspection_report"]
    orders["inspection_report"] = reported.id
    book.record_clock(ManualClock(NOW), stopped=True)
    book.close()
    accounts = Accounts(state / "web.db")
    accounts.add("sam", "smo", PASSWORD, display_name="Sam SMO")
    accounts.close()
    desk = open_desk(DeskSettings(sites=[EXAMPLE], store_url=f"sqlite:///{tmp_path / 'store.db'}", state_dir=state))
    c = TestClient(create_app(desk), follow_redirects=False)
    login(c, "sam")
    return c, orders


def test_site_page_charts_each_outfall_and_basin(tmp_path: Path) -> None:
    c, _ = _desk(tmp_path)
    page = c.get(f"/sites/{SITE}")
    assert page.status_code == 200
    figures = _figures(page.text)
    assert list(figures) == ["chart-rain", "chart-turbidity-outfall-1", "chart-turbidity-outfall-2",
                             "chart-basin-basin-1", "chart-basin-trap-2"]
    one, two = figures["chart-turbidity-outfall-1"], figures["chart-turbidity-outfall-2"]
    assert 'class="chart-title">Turbidity at outfall-1: downstream vs upstream (allowed: ' in one
    assert 'class="chart-title">Turbidity at outfall-2: downstream vs upstream (allowed: ' in two
    assert "<figcaption>Outfall 1, below the graded east half (outfall-1): upstream turb-up, downstream " \
           "turb-down-1</figcaption>" in one
    assert "<figcaption>Outfall 2, below the seeded west half (outfall-2): upstream turb-up, downstream " \
           "turb-down-2</figcaption>" in two
    assert _ys(one, DOWN) == {"42.0"} and _ys(one, UP) == {"134.4"} and _band_ys(one) == {"95.9"}
    assert _ys(two, DOWN) == {"103.6"} and _ys(two, UP) == {"113.9"} and _band_ys(two) == {"62.5"}
    b1, b2 = figures["chart-basin-basin-1"], figures["chart-basin-trap-2"]
    assert 'class="chart-title">Basin basin-1: design storage lost to sediment' in b1
    assert 'class="chart-title">Basin trap-2: design storage lost to sediment' in b2
    assert "<figcaption>basin-1: level sensor basin-level-1</figcaption>" in b1
    assert _ys(b1, LOST) == {"96.0"} and _ys(b2, LOST) == {"92.1"}
    # each chart hatches its own devices' silence (the 48 h window before the readings began), not another's
    assert "no data from turb-down-2" in two and "no data from turb-down-1" not in two
    assert "no data from basin-level-2" in b2 and "no data from basin-level-1" not in b2


def test_an_orders_evidence_chart_is_of_its_own_outfall_or_basin(tmp_path: Path) -> None:
    c, orders = _desk(tmp_path)
    turbidity = _figures(c.get(f"/orders/{orders['turbidity_contrast']}").text)["chart-evidence"]
    assert "Turbidity at outfall-2:" in turbidity
    assert _ys(turbidity, DOWN) == {"103.6"} and _ys(turbidity, UP) == {"113.9"}  # outfall-2's 9 NTU, not 20
    basin = _figures(c.get(f"/orders/{orders['basin_cleanout_due']}").text)["chart-evidence"]
    assert "Basin trap-2:" in basin and _ys(basin, LOST) == {"92.1"}  # trap-2's 36.67 %, not basin-1's
    assert "Rain per " in _figures(c.get(f"/orders/{orders['storm_inspection_due']}").text)["chart-evidence"]
    # the report of an inspection: its parent inspection's rain chart
    report = c.get(f"/orders/{orders['inspection_report']}")
    assert report.status_code == 200 and "Rain per " in _figures(report.text)["chart-evidence"]
    assert "chart-evidence" in c.get(f"/orders/{orders['inspection_report']}/print").text
