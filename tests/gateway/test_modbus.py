"""The gateway against a real pymodbus Modbus TCP server and a real Mosquitto broker."""

from __future__ import annotations

import struct
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from stormwatch import topics
from stormwatch.clock import ScenarioClock
from stormwatch.config import parse_site
from stormwatch.gateway.service import Gateway
from stormwatch.profiles import ProfileLibrary
from tests.gateway_support import Collector, RegisterServer, run_on_lockstep
from tests.waits import wait_until

pytestmark = pytest.mark.mosquitto

SIM_START = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def dcba_words(value: float) -> list[int]:
    """Y511 float: the 4 data bytes are the little-endian (<f) bytes (sensors.md)."""
    b = struct.pack("<f", value)
    return [int.from_bytes(b[0:2], "big"), int.from_bytes(b[2:4], "big")]


def f32(value: float) -> float:
    return struct.unpack("<f", struct.pack("<f", value))[0]


def site(devices: list[dict], site_id: str) -> object:
    return parse_site(
        {"site": {"id": site_id, "jurisdiction": "ch133"}, "gateway_id": "gw-t", "devices": devices},
        "test-site",
        ProfileLibrary(),
    )


def run_gateway(cfg: Any, broker_url: str, state: Path, seconds: float) -> Gateway:
    """A gateway polling from SIM_START for ``seconds`` on the lockstep clock (a wall-paced clock skips slots
    on a busy machine)."""
    return run_on_lockstep(cfg, ProfileLibrary(), broker_url, state, SIM_START, SIM_START + timedelta(seconds=seconds))


def test_y511_turbidity_over_modbus_tcp_reaches_mqtt(mosquitto_server, tmp_path: Path) -> None:
    srv = RegisterServer(unit_ids=(2,)).start()
    regs = srv.registers[2]
    # Register map of a Y511 (sensors.md): 0x2600 temperature, 0x2602 turbidity, 0x2604 error.
    for i, w in enumerate(dcba_words(18.5) + dcba_words(123.4) + [0]):
        regs[0x2600 + i] = w
    site_id = f"y511-{uuid.uuid4().hex[:8]}"
    cfg = site(
        [{"id": "turb-up", "profile": "yosemitech_y511", "poll_interval_s": 60,
          "transport": {"kind": "modbus-tcp", "host": "127.0.0.1", "port": srv.port, "unit_id": 2}}],
        site_id,
    )
    sub = Collector(mosquitto_server.port, topics.readings(site_id, "gw-t"), f"sub-{site_id}")
    try:
        run_gateway(cfg, mosquitto_server.url, tmp_path / "gw", 180)  # slots 0, 60, 120 s
        got = sub.wait_for(6)
    finally:
        sub.close()
        srv.stop()
    turb = sorted((r for r in got if r.quantity == "turbidity"), key=lambda r: r.seq)
    temp = [r for r in got if r.quantity == "temperature"]
    assert len(turb) == 3 and len(temp) == 3
    assert {r.quantity for r in got} == {"turbidity", "temperature"}  # device_error is not a reading
    assert turb[0].value == f32(123.4) and turb[0].value == pytest.approx(123.4, rel=1e-6)
    assert turb[0].unit == "NTU" and turb[0].flags == ()
    assert turb[0].raw == dcba_words(123.4)
    assert {r.value for r in temp} == {18.5}
    assert [r.time for r in turb] == [SIM_START + timedelta(seconds=s) for s in (0, 60, 120)]
    assert len({r.identity for r in got}) == 6
    # Profile commands: start-measurement read of 0x2500 once after connecting; brush on poll 0.
    assert [r for r in srv.reads if r[1] == 0x2500] == [(2, 0x2500, 1)]
    assert srv.writes == [(2, 0x3100, [0])]
    # One 5-register read per poll (contiguous points coalesced).
    assert [r for r in srv.reads if r[1] == 0x2600] == [(2, 0x2600, 5)] * 3


def test_y511_error_register_and_out_of_range_flags(mosquitto_server, tmp_path: Path) -> None:
    srv = RegisterServer(unit_ids=(1,)).start()
    regs = srv.registers[1]
    for i, w in enumerate(dcba_words(20.0) + dcba_words(1500.0) + [3]):
        regs[0x2600 + i] = w
    site_id = f"y511e-{uuid.uuid4().hex[:8]}"
    cfg = site(
        [{"id": "turb-down", "profile": "yosemitech_y511", "poll_interval_s": 60,
          "transport": {"kind": "modbus-tcp", "host": "127.0.0.1", "port": srv.port, "unit_id": 1}}],
        site_id,
    )
    sub = Collector(mosquitto_server.port, topics.readings(site_id, "gw-t"), f"sub-{site_id}")
    try:
        run_gateway(cfg, mosquitto_server.url, tmp_path / "gw", 60)
        got = sub.wait_for(2)
    finally:
        sub.close()
        srv.stop()
    by_q = {r.quantity: r for r in got}
    # 1500 NTU is above the Y511's 0-1000 NTU range; error register 3 flags every value.
    assert by_q["turbidity"].value == 1500.0
    assert by_q["turbidity"].flags == ("out_of_range", "device_error")
    assert by_q["temperature"].flags == ("device_error",)


def test_rain_counter_restart_creates_no_rain_and_failing_device_recovers(mosquitto_server, tmp_path: Path) -> None:
    """Failure #7 end to end, and #5: a device failing many polls resumes by itself."""
    srv = RegisterServer(unit_ids=(1,)).start()
    srv.registers[1][0] = 1420
    site_id = f"rain-{uuid.uuid4().hex[:8]}"
    cfg = site(
        [{"id": "rain-1", "profile": "tipping_bucket_modbus_counter", "poll_interval_s": 60,
          "transport": {"kind": "modbus-tcp", "host": "127.0.0.1", "port": srv.port, "unit_id": 1,
                        "timeout_s": 0.2}}],
        site_id,
    )
    state = tmp_path / "gw"
    sub = Collector(mosquitto_server.port, topics.readings(site_id, "gw-t"), f"sub-{site_id}")
    try:
        run_gateway(cfg, mosquitto_server.url, state, 120)
        first = sub.wait_for(2)
        # Restart: the counter still reads 1,420.
        gw2 = run_gateway(cfg, mosquitto_server.url, state, 120)
        got = sub.wait_for(4)
    finally:
        sub.close()
        srv.stop()
    assert [(r.value, r.flags, r.raw) for r in sorted(first, key=lambda r: r.seq)] == [
        (0, ("counter_baseline",), 1420), (0, (), 1420),
    ]
    second = [r for r in got if r.boot == gw2.boot]
    assert len(second) == 2
    assert all(r.value == 0 and r.flags == () and isinstance(r.value, int) for r in second)
    assert sum(r.value for r in got) == 0


def test_device_failing_then_answering_resumes(mosquitto_server, tmp_path: Path) -> None:
    """Failure #5: many consecutive Modbus errors, then the device answers: readings resume."""
    srv = RegisterServer(unit_ids=(1,)).start()
    srv.registers[1][0] = 500
    port = srv.port
    srv.stop()  # the device is gone: connection refused on every poll
    site_id = f"fail-{uuid.uuid4().hex[:8]}"
    cfg = site(
        [{"id": "rain-1", "profile": "tipping_bucket_modbus_counter", "poll_interval_s": 60,
          "transport": {"kind": "modbus-tcp", "host": "127.0.0.1", "port": port, "unit_id": 1, "timeout_s": 0.2}}],
        site_id,
    )
    sub = Collector(mosquitto_server.port, topics.readings(site_id, "gw-t"), f"sub-{site_id}")
    clock = ScenarioClock(sim_start=SIM_START, speed=3000.0, wall_start=time.time() + 1.5)  # real-time retries
    gw = Gateway(cfg, ProfileLibrary(), clock, mosquitto_server.url, tmp_path / "gw", confirm="broker")
    t = threading.Thread(target=gw.run, kwargs={"until": SIM_START + timedelta(hours=12)})
    t.start()
    srv2: RegisterServer | None = None
    try:
        wait_until(lambda: gw.health("rain-1").total_failures >= 8, what="8 failed polls")
        assert gw.readings_made == 0
        srv2 = RegisterServer(unit_ids=(1,), port=port)
        srv2.registers[1][0] = 500
        srv2.start()
        got = sub.wait_for(2, timeout_s=15)
    finally:
        gw.stop()
        t.join(20)
        sub.close()
        if srv2 is not None:
            srv2.stop()
    assert len(got) >= 2
    assert got[0].raw == 500 and got[0].flags == ("counter_baseline",)
    assert gw.health("rain-1").failures == 0
