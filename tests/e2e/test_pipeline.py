"""End to end on real servers: simulators → gateway → Mosquitto → ingest → InfluxDB/SQLite → alerts.

Expected values are derived here, independently of the pipeline's code:

* the design storm's tips by hand from hydrology.md (1.2 in at 0.01 in per tip = 120 tips; the
  Type II cumulative fraction is 1.000 at hour 24, so the last tip falls 24 h after the storm's
  start, i.e. 25 h into the default scenario; the first tip at 0.01 in = fraction 1/120 falls at
  (1/120)/0.011 h into the first hour (linear between 0.000 and 0.011));
* the turbidity violation and the basin half-volume from the *stored* readings, with a
  Washington-rule check and a bisection on the prismoidal stage–storage formula written here;
* the real storm of 23 September 2018 from the Tharandt tip file, parsed here with ``csv``.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stormwatch.app.pipeline import Pipeline
from stormwatch.config import load_site
from stormwatch.contract import Event
from stormwatch.profiles import ProfileLibrary
from tests.conftest import data_file
from tests.demo_support import EXAMPLE_SITE, half_volume_depth_ft, prismoid_ft3, washington_violation_start
from tests.shared_runs import DemoRun

SCENARIO_START = datetime(2026, 6, 1, 4, 0, tzinfo=UTC)  # simulators/scenarios/default.yaml
POLL = timedelta(seconds=60)


def _one(events: list[Event], kind: str) -> Event:
    found = [e for e in events if e.kind == kind]
    assert len(found) == 1, f"expected one {kind}, got {[e.to_wire() for e in found]}"
    return found[0]


def _influx_series(influx, db: str, q: str) -> list[list]:
    res = influx.query(q, db)["results"][0]
    assert "error" not in res, res
    series = res.get("series") or []
    return series[0]["values"] if series else []


def _slot_at_or_after(t: datetime) -> datetime:
    """The first one-minute poll slot of the scenario at or after ``t``."""
    k = -((SCENARIO_START - t) // POLL)  # ceiling division
    return SCENARIO_START + k * POLL


def _ns(t: int) -> datetime:
    """InfluxDB's ns time as a reading's time: cut to the microsecond, as the store reads it back (the
    ns below it are the reading's timestamp slot, stormwatch.stores.influxwrite; float division would
    round a slot of 500+ ns up to the next microsecond)."""
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=t // 1000)


@pytest.mark.timeout(400)
def test_default_storm_end_to_end_on_mosquitto_and_influxdb(mosquitto_server, influx_server, tmp_path: Path) -> None:
    from stormwatch.simulators.scenario import load_scenario

    profiles = ProfileLibrary()
    cfg = load_site(EXAMPLE_SITE, profiles)
    scenario = load_scenario("default")
    assert scenario.start == SCENARIO_START
    db = f"e2e_{uuid.uuid4().hex[:8]}"
    result = Pipeline(  # lockstep: every poll slot is polled, however loaded the machine
        cfg, profiles, scenario, tmp_path, broker_url=mosquitto_server.url, store_url=influx_server.store_url(db),
    ).run()
    assert result.dead_lettered == {}
    assert result.missed_slots == 0
    # 32 h of the example site's polls: 1,920 one-minute slots of the rain gauge (1 reading) and the two
    # turbidity probes (turbidity and temperature), 384 five-minute slots of the basin level sensor --
    # less the readings of polls that failed (a device error, logged: a gap, never a reading made up)
    per_poll = {"rain-1": 1, "turb-up": 2, "turb-down": 2, "basin-level": 1}
    lost = sum(per_poll[device] * n for device, n in result.failed_polls.items())
    assert result.readings_stored == result.readings_made == 1920 * (1 + 2 + 2) + 384 - lost

    # Rain stored in InfluxDB = the scenario's 120 tips x 0.01 in.
    [[_, tips_sum]] = _influx_series(
        influx_server, db, "SELECT sum(\"tips\") FROM \"readings\" WHERE \"quantity\" = 'rain_tips'"
    )
    assert tips_sum == 120
    assert result.resolution.depth_in(int(tips_sum)) * 100 == 120  # exactly 1.20 in

    # R1: one storm, 120 tips, due 24 h after its last tip.
    storm_start_expected = SCENARIO_START + timedelta(hours=1)
    first_tip = storm_start_expected + timedelta(hours=(1 / 120) / 0.011)
    last_tip = storm_start_expected + timedelta(hours=24)
    tip_rows = _influx_series(
        influx_server, db,
        "SELECT \"tips\" FROM \"readings\" WHERE \"quantity\" = 'rain_tips' AND \"tips\" > 0",
    )
    stored_first, stored_last = _ns(tip_rows[0][0]), _ns(tip_rows[-1][0])
    storm = _one(result.events, "storm_inspection_due")
    assert storm.tips == 120 and storm.depth_in == pytest.approx(1.2)
    assert storm.citation == "Ch. 133 §133-7A(2)"
    assert storm.storm_end == stored_last
    # The gateway stamps its poll-grid time; the poll that first counts a tip is the one at or after it.
    assert storm.storm_end == _slot_at_or_after(last_tip)
    assert storm.storm_start == _slot_at_or_after(first_tip)
    assert storm.storm_start == stored_first
    assert storm.due_at == storm.storm_end + timedelta(hours=24)
    assert storm.work_order

    # R2: turbidity contrast, found independently from the stored series.
    def series(device: str) -> dict[datetime, float]:
        rows = _influx_series(
            influx_server, db,
            f"SELECT \"value\" FROM \"readings\" WHERE \"device\" = '{device}' AND \"quantity\" = 'turbidity'",
        )
        return {_ns(t): v for t, v in rows}

    violation_at = washington_violation_start(series("turb-up"), series("turb-down"))
    turb = _one(result.events, "turbidity_contrast")
    assert turb.citation == "Ch. 133 §133-6C"
    assert abs(turb.event_time - violation_at) <= timedelta(minutes=5)
    assert turb.downstream_ntu > turb.upstream_ntu + 5
    assert turb.due_at == turb.event_time + timedelta(hours=24)  # pack R2 confirm_within_hours

    # R3: cleanout when the sediment has taken half the design VOLUME (not half the height).
    d_half = half_volume_depth_ft()
    assert 2.0 < d_half < 4.0 and abs(prismoid_ft3(d_half) - 3424) < 1e-6
    rows = _influx_series(
        influx_server, db, "SELECT \"value\" FROM \"readings\" WHERE \"device\" = 'basin-level'"
    )
    depths = [(_ns(t), 8.0 - v / 304.8) for t, v in rows]  # mount height 8 ft; HRXL reports mm
    crossed = next(t for t, d in depths if d >= d_half)
    basin = _one(result.events, "basin_cleanout_due")
    assert basin.citation == "Ch. 133 §133-7A(1)"
    assert basin.lost_capacity >= 0.5
    assert crossed <= basin.event_time <= crossed + timedelta(minutes=30)
    assert basin.due_at == basin.event_time + timedelta(hours=72)  # pack R3 cleanout_within_hours

    # Every opening event has exactly one work order; nothing is opened twice.
    orders = {w.kind: w for w in result.workorders}
    assert {"storm_inspection", "turbidity_review", "basin_cleanout"} <= set(orders)
    assert orders["storm_inspection"].due_at == storm.due_at
    assert len({(w.rule, w.occurrence) for w in result.workorders}) == len(result.workorders)


def tharandt_storm(path: Path, day: datetime) -> tuple[list[datetime], datetime]:
    """Tips (UTC, one per 0.2 mm row) of the storm that rains on ``day`` (6-h dry gaps), and the
    last tip before the storm (for the window)."""
    with path.open(newline="") as f:
        rows = list(csv.reader(f, delimiter=";"))
    assert rows[0] == ["date", "davis1"]
    tips = [
        datetime.strptime(d, "%d.%m.%Y %H:%M").replace(tzinfo=UTC) for d, v in rows[1:] if v.strip() == "0.2"
    ]
    storms: list[list[datetime]] = []
    for t in tips:
        if storms and t - storms[-1][-1] < timedelta(hours=6):
            storms[-1].append(t)
        else:
            storms.append([t])
    storm = max((s for s in storms if s[0].date() <= day.date() <= s[-1].date()), key=len)
    return storm, storm[0]


@pytest.mark.timeout(400)
def test_real_storm_of_23_september_2018_drives_the_gauge(mosquitto_server, tmp_path: Path) -> None:
    from stormwatch.simulators.scenario import RainRecordSpec, load_scenario

    path = data_file("tharandt_davis_tips_Sensor1.csv")
    tips, first = tharandt_storm(path, datetime(2018, 9, 23, tzinfo=UTC))
    last = tips[-1]
    assert len(tips) >= 64  # 0.2 mm tips: 64 tips = 12.8 mm >= 0.5 in qualifies (rules.md R1)

    profiles = ProfileLibrary()
    base = load_site(EXAMPLE_SITE, profiles)
    devices = tuple(
        d.model_copy(update={"profile": "tipping_bucket_0_2mm_modbus_counter"}) if d.id == base.rain_gauge else d
        for d in base.devices
    )
    cfg = base.model_copy(update={"devices": devices})
    start = first - timedelta(hours=1)
    record = RainRecordSpec(
        path=path, tip_size="0.2", unit="mm", time_format="%d.%m.%Y %H:%M", delimiter=";",
        tz="UTC",  # as tharandt_storm reads the file
        start=first.replace(tzinfo=None), end=(last + timedelta(minutes=1)).replace(tzinfo=None),
    )
    hours = (last + timedelta(hours=7) - start) / timedelta(hours=1)
    scenario = load_scenario("default").with_rain_record(record).model_copy(
        update={"start": start, "duration_h": hours}
    )
    result = Pipeline(cfg, profiles, scenario, tmp_path, broker_url=mosquitto_server.url).run()

    assert result.stored_tips == len(tips)
    storm = _one(result.events, "storm_inspection_due")
    assert storm.tips == len(tips)
    assert storm.depth_in == pytest.approx(len(tips) * 0.2 / 25.4)
    # A tip in minute M is counted by the poll stamped M (the gauge's minute grid starts on a minute).
    assert storm.storm_end == last
    assert storm.due_at == storm.storm_end + timedelta(hours=24)
    assert storm.citation == "Ch. 133 §133-7A(2)"


@pytest.mark.timeout(400, func_only=True)  # setup: the session's demo run, its own 900 s
def test_demo_json_on_the_embedded_broker(default_demo: DemoRun, tmp_path: Path) -> None:
    """The README's main job, as a newcomer runs it (embedded broker and SQLite store, lockstep; the
    session's run, without this session's ``STORMWATCH_*`` settings): quiet by default (no INFO lines,
    and a normal stop logs no warning), and its work orders are read afterwards at the simulated time
    the run reached, not today's date."""
    env = {k: v for k, v in os.environ.items() if k not in ("STORMWATCH_LOG_LEVEL", "STORMWATCH_LOG_FILE")}
    assert default_demo.returncode == 0, default_demo.stderr[-3000:]
    logged = default_demo.stderr.splitlines()
    assert [line for line in logged if " INFO " in line or " DEBUG " in line] == [], logged[:5]
    assert [line for line in logged if "disconnect" in line.lower() or "Traceback" in line] == [], logged
    events = default_demo.events
    state = default_demo.copy_state(tmp_path / "demo")  # the workorders commands below may write
    kinds = {e["kind"]: e for e in events}
    for kind, citation in (
        ("storm_inspection_due", "Ch. 133 §133-7A(2)"),
        ("turbidity_contrast", "Ch. 133 §133-6C"),
        ("basin_cleanout_due", "Ch. 133 §133-7A(1)"),
    ):
        e = kinds[kind]
        assert e["citation"] == citation
        for key in ("kind", "site", "event_time", "citation", "work_order", "due_at"):
            assert key in e, (kind, key)
    storm = kinds["storm_inspection_due"]
    assert storm["tips"] == 120 and storm["depth_in"] == 1.2
    end = datetime.fromisoformat(storm["storm_end"])
    assert datetime.fromisoformat(storm["due_at"]) - end == timedelta(hours=24)
    assert "storm_start" in storm
    assert {"upstream_ntu", "downstream_ntu"} <= set(kinds["turbidity_contrast"])
    assert kinds["turbidity_contrast"]["turbidity_unit"] == "NTU"
    assert kinds["basin_cleanout_due"]["lost_capacity"] >= 0.5

    listed = subprocess.run([sys.executable, "-m", "stormwatch", "workorders", "list", "--state-dir", str(state),
                             "--json"], capture_output=True, text=True, timeout=60, env=env, cwd=state)
    assert listed.returncode == 0, listed.stderr
    orders = {o["kind"]: o for o in json.loads(listed.stdout)}
    assert orders["storm_inspection"]["id"] == storm["work_order"]
    # the run ended 7 h after the storm's last tip: its inspection (due 24 h after it) is not overdue
    assert orders["storm_inspection"]["status"] == "open" and orders["storm_inspection"]["overdue"] is False
    walled = subprocess.run([sys.executable, "-m", "stormwatch", "workorders", "list", "--state-dir", str(state),
                             "--wall-time", "--overdue", "--json"], capture_output=True, text=True, timeout=60,
                            env=env, cwd=state)
    wall_overdue = datetime.now(UTC) > datetime.fromisoformat(storm["due_at"])  # today's date decides
    assert (storm["work_order"] in {o["id"] for o in json.loads(walled.stdout)}) == wall_overdue
