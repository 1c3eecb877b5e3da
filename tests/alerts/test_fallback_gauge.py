"""Fallback gauge (issue 16): a representative station record fills ONLY the site gauge's data gaps.

The site's gauge is the Davis tipping bucket of the Tharandt rain-gauge comparison (0.2 mm a tip,
tests/data/tharandt_davis_tips_Sensor1.csv, one row per tip); the station is the co-located
reference Pluvio (tests/data/tharandt_ref_pluvio_10min.csv, 10-minute depths in mm, only non-zero
intervals listed). Both files are read here as UTC (the source states no zone) and each Pluvio
time is taken as the END of its 10-minute interval.

The gauge is polled every minute (a reading per minute: the tips stamped that minute, 0 when none)
from 2018-09-22 00:00 to 2018-09-24 12:00; a gap is cut into it on the biggest day: no reading
stamped 17:00 .. 18:59 on 2018-09-23. Derived by hand (rules.md R1, "Fallback gauge"):

* the gauge's last reading before the cut is 16:59, the first after it 19:00 (it covers the
  minute 18:59-19:00): the gap is (16:59, 19:00). Pluvio intervals wholly inside it end at
  17:10 .. 18:50 (17:00 covers 16:50-17:00, 19:00 covers 18:50-19:00: both overlap the gauge's
  own data). Their depths: 0.3 + 1.7 + 5.4 + 6.6 + 0.9 + 0.8 + 0.9 + 0.8 + 0.7 + 0.1 (18:40;
  18:50 is not listed: 0) = 18.2 mm.
* the storm begins with the first tip after a dry spell of >= 6 h; 0.5 in = 12.7 mm. The gauge's
  tips of the storm before 17:00 are 17 (3.4 mm: 12:xx 1, 13:xx 1, 14:xx 10, 15:xx 4, 16:xx 1);
  with the station 3.4 + 0.3 + 1.7 + 5.4 = 10.8 mm at 17:30, + 6.6 = 17.4 mm >= 12.7 at 17:40:
  ``storm_qualified`` at 17:40, said to come from station Tharandt-Pluvio (0.05 km away).
* without the station the same gauge record never reaches 64 tips in that storm (no storm_qualified):
  the fallback decides the inspection.
* the station's other intervals (its 26.9 mm of the day) are NOT counted: the storm's depth is the
  gauge's tips x 0.2 mm + 18.2 mm exactly.
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

from stormwatch.alerts.engine import Engine
from stormwatch.alerts.workorders import WorkOrders
from stormwatch.clock import ManualClock
from stormwatch.config import parse_site
from stormwatch.contract import Event, Reading
from stormwatch.profiles import ProfileLibrary
from stormwatch.rain import PRECIPITATION, STATION_GATEWAY
from tests.conftest import data_file
from tests.report_support import run_cli

DAVIS = "tharandt_davis_tips_Sensor1.csv"
PLUVIO = "tharandt_ref_pluvio_10min.csv"
STATION = "Tharandt-Pluvio"
MIN = timedelta(minutes=1)
START = datetime(2018, 9, 22, tzinfo=UTC)
END = datetime(2018, 9, 24, 12, tzinfo=UTC)
CUT_FROM = datetime(2018, 9, 23, 17, 0, tzinfo=UTC)  # first minute without a reading
CUT_TO = datetime(2018, 9, 23, 19, 0, tzinfo=UTC)  # first reading after the cut

#: Pluvio intervals wholly inside the gap (16:59, 19:00), by hand from the file (see the docstring).
GAP_PLUVIO_MM = {"17:10": "0.3", "17:20": "1.7", "17:30": "5.4", "17:40": "6.6", "17:50": "0.9", "18:00": "0.8",
                 "18:10": "0.9", "18:20": "0.8", "18:30": "0.7", "18:40": "0.1"}


def site_cfg(fallback: bool = True) -> Any:
    doc: dict[str, Any] = {
        "site": {"id": "tharandt", "jurisdiction": "ch133", "timezone": "UTC"},
        "devices": [{"id": "davis", "profile": "tipping_bucket_0_2mm_modbus_counter", "poll_interval_s": 60,
                     "transport": {"kind": "modbus-tcp", "host": "127.0.0.1"}}],
        "rain_gauge": "davis",
    }
    if fallback:
        doc["fallback_gauge"] = {"station": STATION, "name": "Tharandt reference Pluvio", "distance_km": 0.05,
                                 "interval_minutes": 10}
    return parse_site(doc, "tharandt.yaml", ProfileLibrary())


def rows(name: str) -> list[tuple[datetime, Decimal]]:
    with data_file(name).open(newline="") as f:
        body = list(csv.reader(f, delimiter=";"))[1:]
    return [(datetime.strptime(d, "%d.%m.%Y %H:%M").replace(tzinfo=UTC), Decimal(v)) for d, v in body]


def gauge_readings() -> list[Reading]:
    """One poll a minute, START .. END, the tips stamped that minute (one row = one 0.2-mm tip), cut."""
    tips = Counter(t for t, v in rows(DAVIS) if v)
    out = []
    t = START
    seq = 0
    while t <= END:
        if not CUT_FROM <= t < CUT_TO:
            out.append(Reading(site="tharandt", device="davis", quantity="rain_tips", value=tips.get(t, 0),
                               unit="{tip}", time=t, gateway="gw-1", boot="b", seq=seq))
            seq += 1
        t += MIN
    return out


def station_readings() -> list[Reading]:
    return [Reading(site="tharandt", device=STATION, quantity=PRECIPITATION, value=float(v), unit="mm", time=t,
                    gateway=STATION_GATEWAY, boot="s", seq=i)
            for i, (t, v) in enumerate(rows(PLUVIO)) if START <= t <= END]


def run(fallback: bool, book: WorkOrders | None = None) -> list[Event]:
    engine = Engine.for_site(site_cfg(fallback), ProfileLibrary(), book)
    readings = sorted(gauge_readings() + (station_readings() if fallback else []),
                      key=lambda r: (r.time, r.gateway, r.seq))
    return engine.replay(readings) + engine.flush()


def storm_tips_by_hand() -> tuple[datetime, int, int]:
    """The storm around the cut: its first tip, the gauge's tips before the cut, and in all (cut removed)."""
    tips = sorted(t for t, v in rows(DAVIS) if v and START <= t <= END and not CUT_FROM <= t < CUT_TO)
    start = None
    prev = None
    for t in tips:
        if t >= CUT_FROM:
            break
        if prev is None or t - prev >= timedelta(hours=6):
            start = t
        prev = t
    assert start is not None
    storm = [t for t in tips if t >= start]
    end_i = next((i for i in range(1, len(storm)) if storm[i] - storm[i - 1] >= timedelta(hours=6)), len(storm))
    storm = storm[:end_i]
    return start, sum(1 for t in storm if t < CUT_FROM), len(storm)


def at(hhmm: str) -> datetime:
    h, m = hhmm.split(":")
    return datetime(2018, 9, 23, int(h), int(m), tzinfo=UTC)


def test_the_hand_derivation_matches_the_files() -> None:
    pluvio = dict(rows(PLUVIO))
    inside = {t: v for t, v in pluvio.items() if CUT_FROM - MIN <= t - timedelta(minutes=10) and t <= CUT_TO - MIN}
    assert {f"{t:%H:%M}": str(v) for t, v in inside.items()} == GAP_PLUVIO_MM
    assert sum(inside.values()) == Decimal("18.2")
    start, before, total = storm_tips_by_hand()
    assert start.date() == at("12:00").date() and start.hour == 12  # the storm begins at 12:xx on the 23rd
    assert before == 17
    assert total < 64  # the gauge alone never qualifies this storm


def test_station_rain_counts_only_inside_the_gauge_gap_and_says_so(tmp_path: Path) -> None:
    book = WorkOrders(tmp_path / "orders.db", ManualClock(END))
    events = run(fallback=True, book=book)
    start, before, total = storm_tips_by_hand()
    gap_in = Fraction(182, 10) / Fraction(254, 10)  # 18.2 mm, exact inches

    gaps = [e for e in events if e.kind == "data_gap"]
    assert [(e.gap_start, e.gap_end) for e in gaps] == [(at("16:59"), None), (at("16:59"), CUT_TO)]
    closed = gaps[1]
    assert closed.source == f"station {STATION}" and closed.station_distance_km == 0.05
    assert closed.station_depth_in == float(gap_in)
    assert "station Tharandt-Pluvio (Tharandt reference Pluvio), 0.05 km away: 0.716 in" in closed.message

    qualified = [e for e in events if e.kind == "storm_qualified"]
    assert len(qualified) == 1
    q = qualified[0]
    assert q.event_time == at("17:40")  # 3.4 mm of the gauge + 0.3 + 1.7 + 5.4 + 6.6 mm of the station
    assert q.storm_start == start and q.tips == before
    assert q.source == f"station {STATION}" and q.station_distance_km == 0.05
    assert Fraction(q.station_depth_in).limit_denominator(1000) == Fraction(14, 1) / Fraction(254, 10)
    assert "station Tharandt-Pluvio (Tharandt reference Pluvio), 0.05 km away" in q.message

    due = [e for e in events if e.kind == "storm_inspection_due"]
    assert len(due) == 1
    d = due[0]
    assert d.tips == total
    assert d.depth_in == float(Fraction(total, 127) + gap_in)  # 0.2 mm = 1/127 in a tip; not the station's 26.9 mm
    assert d.source == f"station {STATION}"
    assert d.due_at == d.storm_end + timedelta(hours=24)
    station_evidence = [x for x in d.evidence if "station" in x]
    assert [x["time"][11:16] for x in station_evidence] == list(GAP_PLUVIO_MM)
    assert [x["precipitation"] for x in station_evidence] == [float(v) for v in GAP_PLUVIO_MM.values()]
    order = book.get(d.work_order)  # the inspection order says where its rain came from
    assert f"from station {STATION} (Tharandt reference Pluvio), 0.05 km away, for the rain gauge's data gap" \
        in order.message
    other = [e for e in events if e.kind.startswith("storm") and e.storm_start != start]
    assert all(e.source is None for e in other)  # storms without a gap never use the station


def test_without_the_station_the_gap_leaves_the_storm_unqualified() -> None:
    events = run(fallback=False)
    assert not [e for e in events if e.kind in ("storm_qualified", "storm_inspection_due")
                and e.storm_start.date() == at("12:00").date()]
    gaps = [e for e in events if e.kind == "data_gap"]
    assert [(e.gap_start, e.gap_end) for e in gaps] == [(at("16:59"), None), (at("16:59"), CUT_TO)]
    assert all(e.source is None for e in gaps)


SITE_YAML = """
site: {id: tharandt, jurisdiction: ch133, timezone: UTC}
gateway_id: gw-1
devices:
  - id: davis
    profile: tipping_bucket_0_2mm_modbus_counter
    transport: {kind: modbus-tcp, host: 127.0.0.1}
    poll_interval_s: 60
rain_gauge: davis
fallback_gauge: {station: Tharandt-Pluvio, name: Tharandt reference Pluvio, distance_km: 0.05, interval_minutes: 10}
"""


def _davis_part(path: Path, lo: datetime, hi: datetime, first: str, last: str) -> Path:
    """The Davis rows in [lo, hi) between two 0-depth marker rows (an event log: no row, no tip)."""
    with data_file(DAVIS).open(newline="") as f:
        body = list(csv.reader(f, delimiter=";"))[1:]
    keep = [(d, v) for d, v in body if lo <= datetime.strptime(d, "%d.%m.%Y %H:%M").replace(tzinfo=UTC) < hi]
    path.write_text("date;davis1\n" + "\n".join(f"{d};{v}" for d, v in [(first, "0"), *keep, (last, "0")]) + "\n",
                    encoding="utf-8")
    return path


def test_station_import_evaluate_and_report_name_the_station(tmp_path: Path) -> None:
    """The commands a user runs: import the station record and the cut gauge record, evaluate, report."""
    site = tmp_path / "site.yaml"
    site.write_text(SITE_YAML, encoding="utf-8")
    url = f"sqlite:///{tmp_path}/store.db"
    davis = ["--site", str(site), "--device", "davis", "--store", url, "--delimiter", ";", "--time-format",
             "%d.%m.%Y %H:%M", "--tip-mm", "0.2", "--silence", "dry"]
    run_cli("import", str(_davis_part(tmp_path / "a.csv", START, CUT_FROM, "22.09.2018 00:00", "23.09.2018 16:59")),
            *davis)
    run_cli("import", str(_davis_part(tmp_path / "b.csv", CUT_TO, END, "23.09.2018 19:00", "24.09.2018 12:00")),
            *davis)
    station = ["station", "import", str(data_file(PLUVIO)), "--site", str(site), "--store", url, "--format",
               "delimited", "--delimiter", ";", "--time-format", "%d.%m.%Y %H:%M", "--value-column",
               "pluvio=precipitation:mm"]
    first = json.loads(run_cli(*station, "--json"))
    with data_file(PLUVIO).open(newline="") as f:
        n_rows = len(list(csv.reader(f, delimiter=";"))) - 1
    assert first["values"] == first["stored"] == n_rows and first["station"] == STATION
    again = json.loads(run_cli(*station, "--json"))
    assert again["stored"] == 0 and again["already_stored"] == n_rows  # re-import adds nothing

    out = json.loads(run_cli("evaluate", "--site", str(site), "--store", url, "--from", "2018-09-22T00:00Z",
                             "--until", "2018-09-24T12:00Z", "--json"))
    qualified = [e for e in out["events"] if e["kind"] == "storm_qualified"]
    assert [(e["event_time"], e["source"], e["station_distance_km"]) for e in qualified] == [
        ("2018-09-23T17:40:00Z", f"station {STATION}", 0.05)]
    gaps = [e for e in out["events"] if e["kind"] == "data_gap" and "gap_end" in e]
    assert [(g["gap_start"], g["gap_end"], g["source"]) for g in gaps] == [
        ("2018-09-23T16:59:00Z", "2018-09-23T19:00:00Z", f"station {STATION}")]

    csv_out = tmp_path / "report.csv"
    run_cli("report", "--site", str(site), "--store", url, "--no-work-orders",
            "--from", "2018-09-22", "--until", "2018-09-25", "-o", str(csv_out))
    report = list(csv.DictReader(io.StringIO(csv_out.read_text(encoding="utf-8"))))
    storm = [r for r in report if r["section"] == "storm" and r["qualifying"] == "yes"]
    assert len(storm) == 1
    total = storm_tips_by_hand()[2]
    assert storm[0]["tips"] == str(total)
    assert f"+ 0.716 in from station {STATION}" in storm[0]["depth"]
    assert f"station {STATION}, 0.05 km away" in storm[0]["note"]
    unknown = [r for r in report if r["section"] == "unknown" and "station" in r["note"]]
    assert len(unknown) == 1 and "0.716 in" in unknown[0]["note"]
