"""Rain rates physics rules out, and rates that are extreme but possible (issue 11 item 5,
failure-kinds.md #24).

* A count beyond the world-record envelope over the time it covers is stored flagged
  ``rain_beyond_envelope`` -- kept, never counted as rain by anyone: R1, the desk's 24-hour rain,
  the Grafana rain panels (through real ingest into SQLite and a real InfluxDB 1.x).
* 25.4 mm in 3 minutes is extreme but possible: counted, flagged ``rain_extreme_rate`` for review
  (the review line: 100 mm in one hour along Jennings's exponent, docs/reference/rain-records.md),
  and the storm it shapes says ``needs_verification``.

Expected values by hand: the envelope over 60 s is 1.5 x 422 x (1/60)^0.475 = 90.5 mm = 356 tips of
0.254 mm; the review line over 180 s is 100 x (1/20)^0.475 = 24.10 mm, over 60 s 14.30 mm.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from stormwatch import resources, topics
from stormwatch.alerts.backfill import evaluate
from stormwatch.app import servers
from stormwatch.clock import ManualClock
from stormwatch.config import parse_site
from stormwatch.contract import Reading
from stormwatch.dashboards.build import JSON_DIR
from stormwatch.gateway.counter import CounterState, count_tips
from stormwatch.ingest.validate import Validator
from stormwatch.physics import envelope_mm, max_tips, review_mm
from stormwatch.profiles import CounterSpec, ProfileLibrary
from stormwatch.stores.base import ReadingStore
from stormwatch.stores.influx1 import Influx1Store
from stormwatch.stores.sqlite import SqliteStore
from stormwatch.web.overview import portfolio, site_model
from tests.ingest_support import Publisher, Running
from tests.names import RUN
from tests.waits import wait_until

SITE, GW = "riverside-commons", "gw-riverside-1"
T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)


def test_the_lines_by_hand() -> None:
    assert envelope_mm(60) == pytest.approx(1.5 * 422 * (1 / 60) ** 0.475) and max_tips(0.254, 60) == 356
    assert review_mm(180) == pytest.approx(24.0997, abs=1e-4) and review_mm(3600) == 100.0
    assert review_mm(60) == pytest.approx(14.3014, abs=1e-4)


def test_25_4_mm_in_3_minutes_is_kept_and_flagged_for_review() -> None:
    # failure-kinds.md #24: a 16-bit counter of 0.01-in tips polled every 3 minutes rises by 100.
    spec = CounterSpec(resolution="0.01 in")
    result = count_tips(CounterState(1000, T0), 1100, T0 + 3 * MIN, spec, expected_interval_s=180)
    assert (result.tips, result.outcome, result.flags) == (100, "rise", ("rain_extreme_rate",))  # 25.4 mm >= 24.10
    # 94 tips = 23.876 mm: below the review line, an ordinary rise
    assert count_tips(CounterState(1000, T0), 1094, T0 + 3 * MIN, spec, expected_interval_s=180).flags == ()
    # beyond the envelope (152.55 mm in 3 min: at most 600 tips): not rain at all -- a suspect sample
    assert count_tips(CounterState(1000, T0), 1601, T0 + 3 * MIN, spec, expected_interval_s=180).outcome == "suspect"


def test_an_extreme_storm_is_counted_and_needs_verification(tmp_path: Path) -> None:
    # The same 100 tips through R1 (evaluate on a store): counted -- the storm qualifies at 100 tips, 1.00 in --
    # and every storm event says the rain must be verified.
    cfg = parse_site(yaml.safe_load(resources.example_site().read_text(encoding="utf-8")), "site.yaml",
                     ProfileLibrary())
    store = SqliteStore(tmp_path / "s.db")
    readings = [Reading(site=SITE, device="rain-1", quantity="rain_tips", value=tips, unit="{tip}",
                        time=T0 + k * 3 * MIN, gateway=GW, boot="b", seq=k, raw=k, tip_size="0.01 in")
                for k, tips in enumerate([0, 100] + [0] * 130)]
    result = Validator.for_sites([cfg], ProfileLibrary(), ManualClock(T0 + timedelta(hours=8))).validate(
        topics.readings(SITE, GW), b'{"readings": [' + b",".join(json.dumps(r.to_wire()).encode() for r in readings)
        + b"]}")
    assert [r.flags for r in result.accepted][:2] == [(), ("rain_extreme_rate",)]  # ingest flags it too
    store.write_readings(result.accepted)
    ev = evaluate(cfg, ProfileLibrary(), store, T0, T0 + timedelta(hours=7))
    store.close()
    storm = [e for e in ev.events if e.kind.startswith("storm_")]
    assert [e.kind for e in storm] == ["storm_started", "storm_qualified", "storm_inspection_due"]
    assert {(e.details.tips, e.details.depth_in) for e in storm} == {(100, 1.0)}
    assert all(e.details.needs_verification == ["rain_extreme_rate"] for e in storm)


# -- an impossible count from a producer that does not judge it, through real ingest ---------------------------

#: A producer that is not stormwatch's counter (no counter flags): tips per minute from 12:00.
SENT = [0, 2, 5000, 100, 1, 0, 0, 0]


def _wire(k: int, tips: int) -> bytes:
    return json.dumps({"site": SITE, "device": "rain-1", "quantity": "rain_tips", "value": tips, "unit": "{tip}",
                       "tip_size": "0.01 in", "time": (T0 + k * MIN).isoformat(), "gateway": GW, "boot": "foreign",
                       "seq": k, "raw": None, "flags": []}).encode()


def _dashboard_query(title: str) -> str:
    board = json.loads((JSON_DIR / "stormwatch-site.json").read_text(encoding="utf-8"))
    return next(p["targets"][0]["query"] for p in board["panels"] if p.get("title") == title)


def _grafana(query: str, start: datetime, end: datetime) -> str:
    """``query`` with Grafana's macros and ``$site`` expanded (1-minute interval), as Grafana sends it."""
    values = {"site": SITE, "timeFilter": f"time >= {int(start.timestamp() * 1000)}ms and time <= "
                                           f"{int(end.timestamp() * 1000)}ms", "__interval": "1m",
              "__interval_ms": "60000", "tz": "America/New_York"}
    return re.sub(r"\$(\w+)", lambda m: values[m.group(1)], query)


@pytest.mark.mosquitto
@pytest.mark.influxdb
def test_an_impossible_count_is_stored_flagged_and_counted_by_no_one(own_mosquitto: servers.Mosquitto,
                                                                     influx_server: servers.InfluxDB1,
                                                                     tmp_path: Path) -> None:
    cfg = parse_site(yaml.safe_load(resources.example_site().read_text(encoding="utf-8")), "site.yaml",
                     ProfileLibrary())
    db = f"rates_{RUN}"
    stores: list[ReadingStore] = [SqliteStore(tmp_path / "rates.db"), Influx1Store(influx_server.url, db)]
    now = T0 + 10 * MIN
    runs = [Running(own_mosquitto, s, clock=ManualClock(now, on_sleep="wait"),
                    validator=Validator.for_sites([cfg], ProfileLibrary(), ManualClock(now)), batch_ms=50)
            for s in stores]
    pub = Publisher(own_mosquitto)
    try:
        for k, tips in enumerate(SENT):  # one message per poll, in order
            pub.send(_wire(k, tips), topics.readings(SITE, GW))
        wait_until(lambda: all(r.ingest.written == len(SENT) for r in runs), what="every reading in both stores")
    finally:
        pub.close()
        for r in runs:
            r.stop()
    try:
        got = [s.query_readings(SITE) for s in stores]
        assert got[0] == got[1]  # the same readings, flags included, in both stores
        # 5,000 tips in a minute > 356: kept, flagged; 100 tips (25.4 mm) in a minute >= 14.30 mm: extreme
        assert [(int(r.value), r.flags) for r in got[0]] == [
            (0, ()), (2, ()), (5000, ("rain_beyond_envelope",)), (100, ("rain_extreme_rate",)), (1, ()),
            (0, ()), (0, ()), (0, ())]
        for s in stores:
            # the desk's store summary: 2 + 100 + 1 = 103 tips of rain, not 5,103
            (summary,) = s.summarize(T0, now, [(SITE, "rain-1", "rain_tips")])  # type: ignore[attr-defined]
            assert (summary.total, summary.tips_by_size) == (103, (("0.01 in", 103),))
            # R1: 0 tips and a data gap for the impossible minute; the storm says so
            ev = evaluate(cfg, ProfileLibrary(), s, T0, now)
            (qualified,) = [e for e in ev.events if e.kind == "storm_qualified"]
            assert (qualified.event_time, qualified.details.tips) == (T0 + 3 * MIN, 102)
            assert qualified.details.needs_verification == ["rain_beyond_envelope", "rain_extreme_rate"]
            assert [(g.start, g.end) for g in ev.gaps if g.end is not None and g.end <= now][:1] == [
                (T0 + MIN, T0 + 2 * MIN)]
            s.write_events(ev.events)
            # the desk: 1.03 in in 24 h (the gauge's day is not covered before 12:00: "at least"), and the
            # storm in progress 1.03 in -- never 51.03 in
            (row,) = portfolio([site_model(cfg, ProfileLibrary(), "site.yaml")], s, [], now).rows  # type: ignore[arg-type]
            assert row.rain_24h.text == "≥ 1.03 in" and "103 tips" in row.rain_24h.detail
            assert row.storm.text == "1.03 in (103 tips) qualified"
        # The Grafana rain panels on the same InfluxDB: depth of rain only, 1.03 in.
        rows = influx_server.query(_grafana(_dashboard_query("Cumulative rainfall (in)"), T0, now), db)
        values = rows["results"][0]["series"][0]["values"]
        assert math.isclose(values[-1][1], 1.03, abs_tol=1e-9)
        daily = influx_server.query(_grafana(_dashboard_query("Daily rainfall (in, local days)"), T0, now), db)
        assert [math.isclose(v[1], 1.03, abs_tol=1e-9) for v in daily["results"][0]["series"][0]["values"]] == [True]
        peak = influx_server.query(_grafana(_dashboard_query("Rain intensity (in/h)"), T0, now), db)
        assert max(v[1] for v in peak["results"][0]["series"][0]["values"]) == pytest.approx(60.0)  # 1 in/min
    finally:
        for s in stores:
            s.close()
