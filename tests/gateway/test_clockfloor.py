"""The clock floor, gateway side: no reading is stamped while the clock reads before its floor.

An edge box without a real-time clock boots at 1970-01-01 and keeps that time until NTP sets it.
Here the gateway runs on such a wall clock (:class:`LyingClock`: the real time minus an offset the
test removes, as NTP would), polls a real pymodbus Modbus TCP rain counter and publishes to a real
Mosquitto. While the clock reads 1970 nothing is published and one ERROR names the clock and the
floor (the build date); once the clock is set, readings flow, every one stamped after the floor,
and one INFO says so. A configured floor (``--clock-floor``) holds a scenario clock the same way.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stormwatch import topics
from stormwatch.app.cli import app
from stormwatch.clock import ScenarioClock, WallClock
from stormwatch.config import parse_site
from stormwatch.gateway.clockfloor import BUILD_DATE, ClockFloor, parse_floor
from stormwatch.gateway.service import Gateway
from stormwatch.profiles import ProfileLibrary
from tests.conftest import REPO
from tests.gateway_support import Collector, RegisterServer
from tests.waits import wait_until

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class LyingClock(WallClock):
    """The wall clock of a box without a real-time clock: it starts at 1970-01-01 and runs at real
    speed until :meth:`ntp_sync` sets it to the real time."""

    def __init__(self) -> None:
        self.offset = datetime.now(UTC) - EPOCH
        self.reads = 0  # how often the gateway has looked at the clock

    def now(self) -> datetime:
        self.reads += 1
        return datetime.now(UTC) - self.offset

    def ntp_sync(self) -> None:
        self.offset = timedelta(0)


def _site(site_id: str, port: int, poll_s: float) -> object:
    return parse_site({"site": {"id": site_id, "jurisdiction": "ch133"}, "gateway_id": "gw-t", "devices": [
        {"id": "rain-1", "profile": "tipping_bucket_modbus_counter", "poll_interval_s": poll_s,
         "transport": {"kind": "modbus-tcp", "host": "127.0.0.1", "port": port, "unit_id": 1}}],
        "rain_gauge": "rain-1"}, "floor-site", ProfileLibrary())


def test_floor_sources() -> None:
    build_midnight = datetime(BUILD_DATE.year, BUILD_DATE.month, BUILD_DATE.day, tzinfo=UTC)
    assert ClockFloor.for_clock(WallClock(), None) == ClockFloor(build_midnight, "build date")
    assert BUILD_DATE <= datetime.now(UTC).date()  # the build date is never in the future
    sim = ScenarioClock(sim_start=datetime(2018, 9, 23, tzinfo=UTC), speed=100.0, wall_start=time.time())
    assert ClockFloor.for_clock(sim, None) is None  # a replay of 2018 rain is not a lying clock
    assert ClockFloor.for_clock(sim, date(2018, 9, 24)) == ClockFloor(datetime(2018, 9, 24, tzinfo=UTC),
                                                                       "--clock-floor")
    assert parse_floor("2026-06-01") == datetime(2026, 6, 1, tzinfo=UTC)
    assert parse_floor("2026-06-01T02:00:00+02:00") == datetime(2026, 6, 1, tzinfo=UTC)
    with pytest.raises(ValueError, match="--clock-floor 'june' is not an ISO 8601 date"):
        parse_floor("june")


@pytest.mark.mosquitto
def test_a_gateway_whose_clock_reads_1970_stamps_nothing_until_the_clock_is_set(
        mosquitto_server, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    srv = RegisterServer(unit_ids=(1,)).start()
    srv.registers[1][0] = 1420  # the gauge's tip counter
    site_id = f"floor-{uuid.uuid4().hex[:8]}"
    clock = LyingClock()
    caplog.set_level(logging.INFO, logger="stormwatch.gateway")
    sub = Collector(mosquitto_server.port, topics.readings(site_id, "gw-t"), f"sub-{site_id}")
    gw = Gateway(_site(site_id, srv.port, 1.0), ProfileLibrary(), clock, mosquitto_server.url, tmp_path / "gw",
                 confirm="broker")
    t = threading.Thread(target=gw.run, daemon=True)
    t.start()
    try:
        # three checks of a clock reading 1970: the one that logs the ERROR, then two more
        wait_until(lambda: any("before the clock floor" in r.getMessage() for r in caplog.records), 10,
                   "the clock-floor ERROR")
        checked = clock.reads
        wait_until(lambda: clock.reads >= checked + 2, 10, "two more checks of the clock")
        assert sub.wait_for(1, timeout_s=0.5) == []  # nothing stamped 1970, nothing published
        assert srv.reads == []  # nothing even polled
        clock.ntp_sync()
        synced_at = datetime.now(UTC)
        got = sub.wait_for(3, timeout_s=10)
    finally:
        gw.stop()
        t.join(15)
        sub.close()
        srv.stop()
    floor = datetime(BUILD_DATE.year, BUILD_DATE.month, BUILD_DATE.day, tzinfo=UTC)
    assert len(got) >= 3
    # every reading is stamped on the real clock's 1-second grid after NTP set it (and after the floor)
    assert all(r.time >= floor and r.time >= synced_at - timedelta(seconds=1) for r in got)
    assert all(r.time.microsecond == 0 for r in got)
    assert [r.value for r in got][:3] == [0, 0, 0] and got[0].flags == ("counter_baseline",)
    assert gw.missed_slots < 5  # the jump from 1970 is not counted as 56 years (1.8e9) of skipped slots
    msgs = [(r.levelno, r.getMessage()) for r in caplog.records if "clock floor" in r.getMessage()]
    assert len([m for lvl, m in msgs if lvl == logging.ERROR]) == 1
    error = next(m for lvl, m in msgs if lvl == logging.ERROR)
    assert error.startswith("clock reads 1970-01-01T00:00:0")
    assert f"before the clock floor {floor.isoformat()} (build date)" in error
    assert len([m for lvl, m in msgs if lvl == logging.INFO and m.startswith("clock set")]) == 1


@pytest.mark.mosquitto
def test_a_configured_floor_holds_a_scenario_clock(mosquitto_server, tmp_path: Path) -> None:
    srv = RegisterServer(unit_ids=(1,)).start()
    site_id = f"floor-{uuid.uuid4().hex[:8]}"
    floor = datetime(2026, 6, 1, tzinfo=UTC)
    start = floor - timedelta(minutes=2)  # the scenario starts 2 simulated minutes before the floor
    # A wall-paced clock (the floor is checked in real time, so it cannot be lockstep's): 1 real
    # second a slot, so a loaded machine does not skip one.
    clock = ScenarioClock(sim_start=start, speed=60.0, wall_start=time.time() + 0.2)
    sub = Collector(mosquitto_server.port, topics.readings(site_id, "gw-t"), f"sub-{site_id}")
    try:
        gw = Gateway(_site(site_id, srv.port, 60.0), ProfileLibrary(), clock, mosquitto_server.url, tmp_path / "gw",
                     clock_floor=floor, confirm="broker")
        gw.run(until=floor + timedelta(minutes=4))
        got = sub.wait_for(3)
    finally:
        sub.close()
        srv.stop()
    # the two slots before the floor are not polled; polling starts at the first slot once the
    # clock is past it (the floor itself, or the next minute if the check landed just after it)
    times = sorted(r.time for r in got)
    assert floor <= times[0] <= floor + timedelta(minutes=1)
    assert times == [times[0] + timedelta(minutes=m) for m in range(len(times))] and len(times) >= 3


def test_cli_refuses_a_bad_clock_floor() -> None:
    result = CliRunner().invoke(app, ["gateway", "--site", str(REPO / "examples" / "site.yaml"), "--check",
                                      "--clock-floor", "yesterday"])
    assert result.exit_code == 2
    assert "--clock-floor 'yesterday' is not an ISO 8601 date (e.g. 2026-06-01)" in result.output


def test_cli_refuses_a_clock_floor_on_the_lockstep_clock() -> None:
    """The floor is waited out in real time before the gateway joins the clock, which would wait for it."""
    result = CliRunner().invoke(app, ["gateway", "--site", str(REPO / "examples" / "site.yaml"), "--lockstep",
                                      "--clock-floor", "2026-06-01"])
    assert result.exit_code == 2
    assert "--clock-floor cannot be used with --lockstep" in result.output
