"""On a simulated run's clock the desk judges devices at the run's newest stored reading, on poll grids
that begin at the run's start (web/overview.py, docs/web.md "What 'now' is").

The world, by hand (the example site: rain-1, turb-up, turb-down polled every 60 s, basin-level every
300 s; silence allowance two polls): a run started at 04:00 UTC and stored a reading of every device
on its grid up to 07:00 -- 181 a minute-device, 37 of the basin -- with a tip a minute 05:00-05:11
(12 tips of 0.01 in: 0.12 in). Its engine's clock reads 07:20 (a wall-paced clock runs ahead of what
the pipeline has stored). Judged at 07:20 every device would be 20 min silent (> 2 min, > 10 min);
judged at 07:00 none is. turb-down missing its 06:58-07:00 polls (last 06:57: 3 min > 2) is silent;
missing only 06:59-07:00 (last 06:58: 2 min) it is not.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from stormwatch.config import load_site
from stormwatch.contract import TIP_UNIT, Reading
from stormwatch.profiles import ProfileLibrary
from stormwatch.resources import example_site
from stormwatch.stores.sqlite import SqliteStore
from stormwatch.web.overview import RunClock, SiteModel, judged_site, portfolio, site_model, site_series

START = datetime(2026, 6, 1, 4, 0, tzinfo=UTC)
DATA_END = START + timedelta(hours=3)
NOW = DATA_END + timedelta(minutes=20)
SITE = "riverside-commons"
RUN = RunClock(simulated=True, start=START)


def _site() -> SiteModel:
    profiles = ProfileLibrary()
    return site_model(load_site(example_site(), profiles), profiles, str(example_site()))


def _readings(turb_down_until: datetime = DATA_END) -> list[Reading]:
    out, seq = [], 0
    for i in range(181):
        t = START + timedelta(minutes=i)
        rows = [("rain-1", "rain_tips", 1 if 60 <= i < 72 else 0, TIP_UNIT), ("turb-up", "turbidity", 8.0, "NTU")]
        if t <= turb_down_until:
            rows.append(("turb-down", "turbidity", 9.0, "NTU"))
        if i % 5 == 0:
            rows.append(("basin-level", "distance", 1700.0, "mm"))
        for device, quantity, value, unit in rows:
            seq += 1
            out.append(Reading(site=SITE, device=device, quantity=quantity, value=value, unit=unit, time=t,
                               gateway="gw-riverside-1", boot="b1", seq=seq))
    return out


def test_a_clock_ahead_of_the_stored_data_is_no_silence(tmp_path: Path) -> None:
    site = _site()
    with SqliteStore(tmp_path / "store.db") as store:
        store.write_readings(_readings())
        (wall,) = portfolio([site], store, [], NOW).rows
        result = portfolio([site], store, [], NOW, run=RUN)
    assert wall.silent == ("rain-1", "turb-up", "turb-down", "basin-level")  # judged at the clock
    assert result.data_time == DATA_END
    (row,) = result.rows
    assert row.silent == ()
    assert (row.rain_24h.text, row.rain_24h.state) == ("0.12 in", "ok")  # the day counts from the run's start
    assert "UNKNOWN" not in row.turbidity.text and row.turbidity.state != "unknown"
    assert "UNKNOWN" not in row.basin.text and row.basin.state != "unknown"


def test_a_device_that_missed_its_polls_is_silent_at_the_stored_time(tmp_path: Path) -> None:
    site = _site()
    with SqliteStore(tmp_path / "three.db") as store:
        store.write_readings(_readings(turb_down_until=DATA_END - timedelta(minutes=3)))
        (three,) = portfolio([site], store, [], NOW, run=RUN).rows
    with SqliteStore(tmp_path / "two.db") as store:
        store.write_readings(_readings(turb_down_until=DATA_END - timedelta(minutes=2)))
        (two,) = portfolio([site], store, [], NOW, run=RUN).rows
    assert three.silent == ("turb-down",) and three.turbidity.text == "UNKNOWN"
    assert "turb-down last reading Mon 01 Jun 2026 02:57 EDT" in three.turbidity.detail
    assert two.silent == () and two.turbidity.state != "unknown"


def test_before_the_first_reading_is_stored_nothing_is_silent(tmp_path: Path) -> None:
    site = _site()
    with SqliteStore(tmp_path / "store.db") as store:
        result = portfolio([site], store, [], START + timedelta(minutes=1), run=RUN)
    (row,) = result.rows
    assert result.data_time == START and row.silent == ()
    for shown in (row.rain_24h, row.turbidity, row.basin):
        assert (shown.text, shown.state) == ("-", "ok") and "no reading stored yet" in shown.detail


def test_the_site_page_hatches_only_the_runs_own_missed_polls(tmp_path: Path) -> None:
    site = _site()
    readings = _readings(turb_down_until=DATA_END - timedelta(minutes=3))
    start, end = NOW - timedelta(hours=48), NOW + timedelta(microseconds=1)
    with SqliteStore(tmp_path / "store.db") as store:
        store.write_readings(readings)
        judged = judged_site(site, store, [site], NOW, RUN)
        wall = site_series(site, readings, [], start, end)
    series = site_series(judged, readings, [], start, end)
    assert judged.data_end == DATA_END
    # judged at the clock: 44 h before the run hatched for every device, and 20 min after its data
    assert [(g.start, g.end) for g in wall.gaps["rain-1"]] == [(start, START), (DATA_END, end)]
    assert {d: [(g.start, g.end) for g in gaps] for d, gaps in series.gaps.items() if gaps} == {
        "turb-down": [(DATA_END - timedelta(minutes=3), DATA_END)]}


def test_a_probe_whose_readings_are_on_their_way_is_not_silent_before_the_engines_watermark(
        tmp_path: Path) -> None:
    """turb-down stored up to 06:57 while the others reached 07:00: silent judged at the store's
    07:00; not while the engine's watermark (every reading before it arrived or late) is 06:58."""
    site = _site()
    with SqliteStore(tmp_path / "store.db") as store:
        store.write_readings(_readings(turb_down_until=DATA_END - timedelta(minutes=3)))
        (stored,) = portfolio([site], store, [], NOW, run=RUN).rows
        held = portfolio([site], store, [], NOW, run=RunClock(simulated=True, start=START, live=True,
                                                               watermark=DATA_END - timedelta(minutes=2)))
    assert stored.silent == ("turb-down",)
    assert held.data_time == DATA_END - timedelta(minutes=2) and held.rows[0].silent == ()
