"""SDI-12 through a serial adapter: the gateway's driver against a simulated sensor on a pty.

Real serial I/O (pyserial on a pseudo-terminal); the simulator answers aM!/aD0! with realistic
timing and can drop an answer to exercise the retry (sensors.md "SDI-12").
"""

from __future__ import annotations

import logging
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stormwatch import topics
from stormwatch.clock import WallClock
from stormwatch.config import parse_site
from stormwatch.gateway.drivers.build import build_driver
from stormwatch.gateway.drivers.sdi12 import parse_values
from stormwatch.gateway.errors import BadDataError, NoDataError
from stormwatch.profiles import ProfileLibrary
from stormwatch.simulators.sdi12_device import RainSinceMeasurement, Sdi12Sim, d_buffers
from tests.conftest import REPO
from tests.gateway_support import Collector, LoopThread, run_on_lockstep
from tests.waits import wait_until

SIM_START = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
# ClariVUE10 M! values (sensors.md): index 0 turbidity (FNU), 5 temperature (Cel), 6 error code.
CLARIVUE = [12.5, 12.4, 12.6, 0.8, 0.1, 18.25, 0.0]


@pytest.fixture()
def loop() -> LoopThread:
    lt = LoopThread()
    yield lt
    lt.close()


def _site(devices: list[dict], site_id: str = "sdi") -> object:
    return parse_site(
        {"site": {"id": site_id, "jurisdiction": "ch133"}, "gateway_id": "gw-t", "devices": devices},
        "test-site", ProfileLibrary(),
    )


def _driver(profile: str, port: str, address: str):
    cfg = _site([{"id": "dev", "profile": profile, "sdi12_address": address,
                  "transport": {"kind": "serial", "port": port}}])
    return build_driver(cfg.devices[0], ProfileLibrary().get(profile), WallClock(), {})


def test_parse_values() -> None:
    assert parse_values("+1.23-4.56+7") == ["+1.23", "-4.56", "+7"]
    assert parse_values("") == []
    with pytest.raises(ValueError):
        parse_values("+1.2x")


def test_d_buffers_respect_35_characters() -> None:
    bufs = d_buffers([1234.567] * 7, 3)  # "+1234.567" is 9 characters: 3 per answer
    assert [len(b) for b in bufs] == [27, 27, 9]


def test_clarivue_measurement_with_a_dropped_answer_is_retried(loop: LoopThread, tmp_path: Path, caplog) -> None:
    sim = Sdi12Sim("3", lambda t: CLARIVUE, WallClock(), link=str(tmp_path / "sdi"), announce_s=2, ready_s=0.3,
                   drop={1})  # command #1 is the first aD0!: its answer is lost
    loop.run(sim.start())
    driver = _driver("campbell_clarivue10", str(tmp_path / "sdi"), "3")
    try:
        caplog.set_level(logging.DEBUG, logger="stormwatch.gateway.drivers.sdi12")
        t0 = time.monotonic()
        values = driver.poll()
        elapsed = time.monotonic() - t0
    finally:
        driver.close()
        loop.run(sim.stop())
    assert sim.commands == ["3M!", "3D0!", "3D0!", "3D1!"]  # 7 values of 6 chars: 35 + 7 characters
    by_q = {v.quantity: v for v in values}
    assert by_q["turbidity"].value == 12.5 and by_q["turbidity"].unit == "FNU"
    assert by_q["turbidity"].raw == "+12.500"
    assert by_q["temperature"].value == 18.25 and by_q["temperature"].unit == "Cel"
    assert by_q["device_error"].number == 0
    # Waited for the service request (0.3 s), not the announced 2 s; the retry cost one timeout (1 s).
    assert 1.2 < elapsed < 2.5
    assert any("attempt 1/4: no answer" in r.getMessage() for r in caplog.records)


@pytest.mark.slow  # real serial timeouts
def test_sensor_that_never_answers_is_no_data(loop: LoopThread, tmp_path: Path) -> None:
    sim = Sdi12Sim("0", lambda t: CLARIVUE, WallClock(), link=str(tmp_path / "sdi"))
    loop.run(sim.start())
    driver = _driver("campbell_clarivue10", str(tmp_path / "sdi"), "5")  # wrong address: silence
    try:
        with pytest.raises(NoDataError, match="5M!: no answer after 4 attempts"):
            driver.poll()
        # the simulator reads the last attempt from its pty on its own loop: wait for it before stopping
        wait_until(lambda: len(sim.commands) >= 4, 10, "the fourth attempt at the sensor", fail=False)
    finally:
        driver.close()
        loop.run(sim.stop())
    assert sim.commands == ["5M!"] * 4


def test_wrong_value_count_is_bad_data(loop: LoopThread, tmp_path: Path) -> None:
    sim = Sdi12Sim("0", lambda t: [1.0, 2.0], WallClock(), link=str(tmp_path / "sdi"), ready_s=0.05)
    loop.run(sim.start())
    driver = _driver("campbell_clarivue10", str(tmp_path / "sdi"), "0")
    try:
        with pytest.raises(BadDataError, match="value index 5 missing"):
            driver.poll()
    finally:
        driver.close()
        loop.run(sim.stop())


@pytest.mark.mosquitto
def test_rainvue_tips_since_last_measurement_reach_mqtt(loop: LoopThread, mosquitto_server, tmp_path: Path) -> None:
    """RainVUE10 value 2 (index 1) is raw tips since the last aM!: a delta counter, integer tips."""
    deltas = iter([7.0, 0.0, 3.0, 12.0])  # the first M returns tips of an unknown period: baseline
    sim = Sdi12Sim("1", lambda t: [0.0, next(deltas), 0.0, 0.0, 0.0], WallClock(), link=str(tmp_path / "rain"),
                   ready_s=0.05, decimals=0)
    loop.run(sim.start())
    site_id = f"rv-{uuid.uuid4().hex[:8]}"
    cfg = _site([{"id": "rain-1", "profile": "campbell_rainvue10", "sdi12_address": "1", "poll_interval_s": 60,
                  "transport": {"kind": "serial", "port": str(tmp_path / "rain")}}], site_id)
    sub = Collector(mosquitto_server.port, topics.readings(site_id, "gw-t"), f"sub-{site_id}")
    try:  # four slots polled, however busy the machine
        run_on_lockstep(cfg, ProfileLibrary(), mosquitto_server.url, tmp_path / "gw", SIM_START,
                        SIM_START + timedelta(seconds=240))
        got = sorted(sub.wait_for(4), key=lambda r: r.seq)
    finally:
        sub.close()
        loop.run(sim.stop())
    assert [(r.value, r.flags) for r in got] == [(0, ("counter_baseline",)), (0, ()), (3, ()), (12, ())]
    assert all(isinstance(r.value, int) and r.unit == "{tip}" for r in got)
    assert [r.time for r in got] == [SIM_START + timedelta(seconds=s) for s in (0, 60, 120, 180)]


def test_rainvue_data_lost_in_one_poll_are_read_before_the_next_measure(loop: LoopThread, tmp_path: Path) -> None:
    """aM! resets the tips: its data are read again with aD0! (not aM!), garbled or lost answers alike."""
    profile = (REPO / "device_profiles" / "campbell_rainvue10.yaml").read_text()
    (tmp_path / "campbell_rainvue10.yaml").write_text(profile.replace("response_timeout_s: 1.0",
                                                                      "response_timeout_s: 0.2"))
    clock = WallClock()
    now = clock.now()
    model = RainSinceMeasurement([now + timedelta(seconds=s) for s in range(-50, 3600, 2)])
    # #1 poll 0's aD0! garbled; #4-#7 every attempt of poll 1's aD0! lost; #10 poll 2's first aD0!
    # lost (asked again); #12 poll 3's aM! answer lost
    sim = Sdi12Sim("1", model, clock, link=str(tmp_path / "rain"), ready_s=0.02, decimals=2, garble={1},
                   drop={4, 5, 6, 7, 10, 12})
    loop.run(sim.start())
    cfg = _site([{"id": "dev", "profile": "campbell_rainvue10", "sdi12_address": "1",
                  "transport": {"kind": "serial", "port": str(tmp_path / "rain")}}])
    driver = build_driver(cfg.devices[0], ProfileLibrary(tmp_path).get("campbell_rainvue10"), clock, {})
    try:
        first = driver.poll()[0]
        time.sleep(0.1)  # tips fall meanwhile
        with pytest.raises(NoDataError, match="1D0!: no answer after 4 attempts"):
            driver.poll()
        time.sleep(0.1)
        recovered = driver.poll()[0]
        with pytest.raises((NoDataError, BadDataError), match="1M!: "):  # (or its service request alone)
            driver.poll()
        after_gap = driver.poll()[0]
    finally:
        driver.close()
        loop.run(sim.stop())
    m = model.measured
    assert sim.commands == ["1M!", "1D0!", "1D0!", "1M!", "1D0!", "1D0!", "1D0!", "1D0!", "1D0!", "1M!", "1D0!",
                            "1D0!", "1M!", "1M!", "1D0!"]
    assert (first.number, first.gap_before) == (model.tips_between(None, m[0]), False)
    assert (recovered.number, recovered.gap_before) == (model.tips_between(m[0], m[2]), False)
    assert (after_gap.number, after_gap.gap_before) == (model.tips_between(m[3], m[4]), True)
