"""Modbus RTU on pseudo-terminals: real serial I/O, real pymodbus on both sides.

* #1 (failure-kinds.md): the RTU reply ``01 03 04 00 00 3F 80`` + CRC from a CDAB device is 1.0.
* #3 split frames: a reply arriving as 3 bytes then 6 bytes 20 ms later is one valid reply; the
  stale bytes of a timed-out reply are never decoded as the next answer (a raw pty the test
  writes to; the gateway's RTU driver on the other side).
* several devices on one RS-485 line (stormwatch.simulators.modbus_server.ModbusRtuSim), one of them
  failing: it is reported once and retried with backoff while the others keep their schedule.
* #4 unplugged adapter: every read fails → close, reopen with backoff, one ERROR per outage,
  one INFO on recovery, the device on another link keeps being polled.
"""

from __future__ import annotations

import logging
import os
import select
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from pymodbus.framer.rtu import FramerRTU

from stormwatch import topics
from stormwatch.app.pipeline import patient
from stormwatch.clock import Clock, WallClock
from stormwatch.config import ModbusRtu, SiteConfig, parse_site
from stormwatch.gateway.drivers.modbus import ModbusDriver, ModbusLink, client_factory, rtu_frame_gap_s
from stormwatch.gateway.errors import TransportError
from stormwatch.gateway.service import Gateway
from stormwatch.lockstep import LockstepClock
from stormwatch.profiles import DeviceProfile, ProfileLibrary
from stormwatch.simulators.modbus_server import ModbusRtuSim, SimulatedModbusDevice
from stormwatch.simulators.pty import PtyPair
from stormwatch.simulators.scenario import SiteScenario, load_scenario
from stormwatch.simulators.site import SimulatedSite, isolate_site
from tests.gateway_support import Collector, Conductor, LoopThread, RegisterServer, Script

SCENARIO = load_scenario("default")
#: The unplugged-adapter test's adapter is gone from minute 4 (after its polls) to minute 14.
UNPLUGGED_AT = SCENARIO.start + timedelta(minutes=4)
REPLUGGED_AT = SCENARIO.start + timedelta(minutes=14)


def frame(body: bytes) -> bytes:
    """An RTU frame: body + Modbus CRC-16 (low byte first), via pymodbus's own CRC."""
    return body + FramerRTU.compute_CRC(body).to_bytes(2, "big")


def test_crc_matches_the_real_y520_session() -> None:
    from tests.conftest import data_file

    text = data_file("yosemitech_y520_modbus_session.txt").read_text()
    frames = []
    for line in text.splitlines():
        if "{0x" in line:
            hexes = line[line.index("{") + 1 : line.index("}")].split(",")
            frames.append(bytes(int(h, 16) for h in hexes))
    assert len(frames) == 4
    for f in frames:  # every frame of the real session carries a valid CRC
        assert frame(f[:-2]) == f
    assert frames[0] == bytes.fromhex("010309000007") + bytes.fromhex("0794")


def test_rtu_frame_gap() -> None:
    # 3.5 characters of 11 bits at 9600 baud = 4.01 ms; fixed 1.75 ms above 19200 baud.
    assert rtu_frame_gap_s(9600) == pytest.approx(3.5 * 11 / 9600)
    assert rtu_frame_gap_s(115200) == 0.00175


def _read_request(fd: int, timeout_s: float = 3.0) -> bytes:
    """One 8-byte read request from the gateway (the test is the device)."""
    buf = b""
    deadline = time.monotonic() + timeout_s
    while len(buf) < 8 and time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 0.05)
        if r:
            buf += os.read(fd, 64)
    return buf


CDAB_PROFILE = DeviceProfile.model_validate({
    "model": "made_up_cdab", "manufacturer": "test", "description": "one CDAB float", "source": "test",
    "protocol": "modbus",
    "modbus": {"points": [{"quantity": "level", "unit": "m", "address": 0, "type": "float32", "order": "CDAB"}]},
})


def test_cdab_reply_split_frames_and_stale_bytes_on_a_raw_pty() -> None:
    pty = PtyPair()
    # a 1-s reply timeout: at 0.3 s a loaded machine (load 28, 2 cores) timed out the answered first poll
    link = ModbusLink("rtu-test", client_factory(ModbusRtu(kind="modbus-rtu", port=pty.slave_path, timeout_s=1.0)),
                      frame_gap_s=rtu_frame_gap_s(9600))
    driver = ModbusDriver("lvl", CDAB_PROFILE, 1, link, WallClock())
    results: list[object] = []

    def poll() -> None:
        try:
            results.append(driver.poll()[0].value)
        except TransportError as exc:
            results.append(exc)

    request = frame(bytes.fromhex("010300000002"))
    try:
        # 1. failure-kinds #1: reply 01 03 04 00 00 3F 80 + CRC from a CDAB device is 1.0.
        t = threading.Thread(target=poll)
        t.start()
        assert _read_request(pty.master_fd) == request
        os.write(pty.master_fd, frame(bytes.fromhex("010304") + bytes.fromhex("00003F80")))
        t.join(3)
        # 2. no answer: the poll times out ...
        t = threading.Thread(target=poll)
        t.start()
        assert _read_request(pty.master_fd) == request
        t.join(3)
        # ... and the late reply (2.0) arrives after the timeout: stale bytes.
        os.write(pty.master_fd, frame(bytes.fromhex("010304") + bytes.fromhex("00004000")))
        time.sleep(0.05)
        # 3. the next poll gets its answer (1.5) as 3 bytes, then 6 bytes 20 ms later.
        t = threading.Thread(target=poll)
        t.start()
        assert _read_request(pty.master_fd) == request
        fresh = frame(bytes.fromhex("010304") + bytes.fromhex("00003FC0"))
        os.write(pty.master_fd, fresh[:3])
        time.sleep(0.020)
        os.write(pty.master_fd, fresh[3:])
        t.join(3)
    finally:
        driver.close()
        pty.close()
    assert results[0] == 1.0
    assert isinstance(results[1], TransportError)
    assert results[2] == 1.5  # never 2.0 (the stale reply)
    assert len(results) == 3


def _rtu_site(tmp_path: Path, site_id: str) -> SiteConfig:
    line = "/tmp/stormwatch-sim/bus-1"
    cfg = parse_site({
        "site": {"id": site_id, "jurisdiction": "ch133"}, "gateway_id": "gw-t",
        "devices": [
            {"id": "rain-1", "profile": "tipping_bucket_modbus_counter", "poll_interval_s": 120,
             "transport": {"kind": "modbus-rtu", "port": line, "unit_id": 3, "timeout_s": 0.2}},
            {"id": "turb-up", "profile": "yosemitech_y511", "poll_interval_s": 120,
             "transport": {"kind": "modbus-rtu", "port": line, "unit_id": 1, "timeout_s": 0.2}},
            {"id": "turb-down", "profile": "yosemitech_y511", "poll_interval_s": 120,
             "transport": {"kind": "modbus-rtu", "port": line, "unit_id": 2, "timeout_s": 0.2}},
        ],
        "rain_gauge": "rain-1", "turbidity_pair": {"upstream": "turb-up", "downstream": "turb-down"},
    }, "rtu-site", ProfileLibrary())
    return isolate_site(cfg, tmp_path / "links")


def _with_device(cfg: SiteConfig, device: dict) -> SiteConfig:
    data = cfg.model_dump(mode="json")
    data["devices"].append(device)
    return SiteConfig.model_validate(data)


@pytest.mark.mosquitto
def test_three_devices_on_one_rtu_line_and_a_failing_one(mosquitto_server, tmp_path: Path, caplog) -> None:
    site_id = f"rtu-{uuid.uuid4().hex[:8]}"
    sim_cfg = _rtu_site(tmp_path, site_id)
    port = sim_cfg.devices[0].transport.port
    # The gateway also knows unit 9 on the same line, which is not there: the line answers with
    # an exception (pymodbus simulator), the device is reported once and retried with backoff.
    gw_cfg = _with_device(sim_cfg, {"id": "ghost", "profile": "keller_acculevel", "poll_interval_s": 120,
                                    "transport": {"kind": "modbus-rtu", "port": port, "unit_id": 9,
                                                  "timeout_s": 0.2}})
    # 2-minute polling: after (re)connecting, each Y511 holds the line for its 8 s warm-up and 40 s
    # stabilisation (profile), 96 s for the two -- more than a 1-minute slot on one shared line.
    end = SCENARIO.start + timedelta(minutes=20)
    clock = LockstepClock(SCENARIO.start, end)
    site = SimulatedSite(sim_cfg, ProfileLibrary(), SCENARIO, clock)
    site.start()
    sub = Collector(mosquitto_server.port, topics.readings(site_id, "gw-t"), f"sub-{site_id}")
    caplog.set_level(logging.INFO, logger="stormwatch.gateway")
    try:
        # patient: a reply late only because the machine is loaded is no failed poll (the ghost's
        # exception reply is immediate)
        gw = Gateway(patient(gw_cfg), ProfileLibrary(), clock, mosquitto_server.url, tmp_path / "gw",
                     confirm="broker")
        conductor = Conductor(clock)
        gw.run(until=end)
        conductor.join()
        got = sub.wait_for(10 * 5)
    finally:
        clock.stop()
        sub.close()
        site.stop()
    assert len(got) == gw.readings_made == 10 * 5 and gw.missed_slots == 0
    slots = [SCENARIO.start + timedelta(minutes=m) for m in range(0, 20, 2)]
    for dev in ("turb-up", "turb-down"):
        turb = sorted((r for r in got if r.device == dev and r.quantity == "turbidity"), key=lambda r: r.time)
        assert [r.time for r in turb] == slots, dev  # every slot, on one shared line
        for r in turb:
            expected = site.state.value(dev, "turbidity", r.time)
            # values are taken when the request is served (after the Y511 warm-up), not at the slot
            assert r.value == pytest.approx(expected, abs=0.45)  # dry hour: 8 / 9 ± 0.4 NTU
    assert {round(r.value) for r in got if r.device == "turb-up" and r.quantity == "turbidity"} == {8}
    assert {round(r.value) for r in got if r.device == "turb-down" and r.quantity == "turbidity"} == {9}
    rain = sorted((r for r in got if r.device == "rain-1"), key=lambda r: r.time)
    assert [r.time for r in rain] == slots and sum(r.value for r in rain) == 0  # dry hour: no rain
    ghost = gw.health("ghost")
    # Backoff: failures at slots 0, 1, 3, 7 (skipping 0, 1, 3 slots), then 15 slots.
    assert ghost.total_failures == 4
    errors = [r for r in caplog.records if r.levelno == logging.ERROR and "ghost" in r.getMessage()]
    assert len(errors) == 1 and "exception code" in errors[0].getMessage()


def _rtu_sim(cfg: SiteConfig, device_id: str, scenario_state: SiteScenario, clock: Clock,
             link: str) -> ModbusRtuSim:
    dev = cfg.device(device_id)
    sim = SimulatedModbusDevice(device_id, dev.transport.unit_id, scenario_state.profiles[device_id],
                                scenario_state, clock)
    return ModbusRtuSim([sim], link=link)


@pytest.mark.mosquitto
def test_unplugged_rtu_adapter_reopens_with_backoff_others_keep_polling(mosquitto_server, tmp_path: Path,
                                                                         caplog) -> None:
    """failure-kinds #4: the adapter vanishes (every read fails, the path is gone), then returns."""
    site_id = f"unplug-{uuid.uuid4().hex[:8]}"
    srv = RegisterServer(unit_ids=(1,)).start()
    srv.registers[1][0] = 100  # the rain counter on another link (Modbus TCP)
    link = str(tmp_path / "usb-rs485")
    cfg = parse_site({
        "site": {"id": site_id, "jurisdiction": "ch133"}, "gateway_id": "gw-t",
        "devices": [
            {"id": "rain-1", "profile": "tipping_bucket_modbus_counter", "poll_interval_s": 60,
             "transport": {"kind": "modbus-tcp", "host": "127.0.0.1", "port": srv.port, "unit_id": 1}},
            {"id": "turb-down", "profile": "yosemitech_y511", "poll_interval_s": 60,
             "transport": {"kind": "modbus-rtu", "port": link, "unit_id": 1, "timeout_s": 0.2}},
        ],
        "rain_gauge": "rain-1", "discharge_points": [{"id": "outfall-1", "downstream": "turb-down"}],
    }, "unplug-site", ProfileLibrary())
    end = SCENARIO.start + timedelta(minutes=30)
    clock = LockstepClock(SCENARIO.start, end)
    state = SiteScenario(SCENARIO, cfg, {d.id: ProfileLibrary().get(d.profile) for d in cfg.devices})
    loop = LoopThread()
    rtu = [_rtu_sim(cfg, "turb-down", state, clock, link)]
    loop.run(rtu[0].start())
    sub = Collector(mosquitto_server.port, topics.readings(site_id, "gw-t"), f"sub-{site_id}")
    caplog.set_level(logging.DEBUG, logger="stormwatch.gateway")
    # patient: a reply late only because the machine is loaded is no failed poll (the unplugged
    # adapter's reads fail at once)
    gw = Gateway(patient(cfg), ProfileLibrary(), clock, mosquitto_server.url, tmp_path / "gw", confirm="broker")

    def replug() -> None:
        rtu[0] = _rtu_sim(cfg, "turb-down", state, clock, link)
        loop.run(rtu[0].start())  # plugged back in (same path)

    # unplugged once the minute-4 polls are done (the pty and its path vanish under the open port),
    # back 10 simulated minutes later
    clock.add(Script("the adapter", {UNPLUGGED_AT: lambda: loop.run(rtu[0].stop()), REPLUGGED_AT: replug}))
    t = threading.Thread(target=gw.run, kwargs={"until": end})
    t.start()
    conductor = Conductor(clock)
    try:
        conductor.join()
        t.join(30)
        got = sub.wait_for(gw.readings_made)
    finally:
        clock.stop()
        gw.stop()
        t.join(10)
        sub.close()
        loop.run(rtu[0].stop())
        loop.close()
        srv.stop()
    assert len(got) == gw.readings_made and gw.missed_slots == 0
    minutes = [SCENARIO.start + timedelta(minutes=m) for m in range(30)]
    rain_times = sorted(r.time for r in got if r.device == "rain-1")
    assert rain_times == minutes  # never held up
    # Backoff in poll slots: failures at minutes 5, 6, 8 and 12 (skipping 0, 1, 3 slots); the 7
    # skipped after the fourth bring the next attempt, the recovery, to minute 20.
    turb = sorted(r.time for r in got if r.device == "turb-down" and r.quantity == "turbidity")
    assert turb == minutes[:5] + minutes[20:]
    assert gw.health("turb-down").total_failures == 4
    msgs = [(r.levelno, r.getMessage()) for r in caplog.records if "turb-down" in r.getMessage()]
    errors = [m for lvl, m in msgs if lvl == logging.ERROR]
    infos = [m for lvl, m in msgs if lvl == logging.INFO and "recovered" in m]
    assert len(errors) == 1, errors  # one ERROR per outage
    assert len(infos) == 1, infos  # one INFO on recovery
    failures = [m for lvl, m in msgs if lvl == logging.DEBUG and "still failing" in m]
    assert len(failures) == 3  # the second to fourth failures
