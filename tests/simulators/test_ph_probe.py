"""The Yosemitech Y532 pH probe: its profile against the datasheet, its simulator, the washout chemistry.

Expected values come from outside the code under test:

* the register map and the example frames of Yosemitech's "pH (or ORP) Sensor MODBUS RTU Programmer
  Manual" (software Rev1.7; docs/reference/sensors.md, "pH probes"): request ``01 03 28 00 00 02 CD AB``
  (Figure 23) answered by ``01 03 04 33 33 F3 40 40 78`` = pH 7.6 (Figures 24-25), temperature
  ``01 03 24 00 00 02 CE FB`` → ``01 03 04 CD CC 7C 41 E4 50`` = 15.8 °C (Figures 45-47), potential
  ``01 03 12 00 00 02 C1 73`` → ``01 03 04 E1 7A 24 C1 37 46`` = −10.28 mV (Figures 31-33);
* the ideal electrode's Nernst slope table (0.19842 mV/K per pH: 54.20 mV at 0 °C ... 64.12 mV at 50 °C,
  sensors.md) and pH arithmetic by hand (14 + log10 of the hydroxide molarity).
"""

from __future__ import annotations

import asyncio
import math
import os
import select
import struct
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pymodbus.client import AsyncModbusSerialClient
from pymodbus.framer import FramerType

from stormwatch.clock import ManualClock, WallClock
from stormwatch.codec import decode_point
from stormwatch.config import ModbusRtu, device_profiles, load_site
from stormwatch.gateway.drivers.modbus import ModbusDriver, ModbusLink, client_factory, rtu_frame_gap_s
from stormwatch.profiles import ProfileLibrary
from stormwatch.simulators.ph import mix_ph, nernst_slope_mv
from stormwatch.simulators.scenario import SiteScenario, load_scenario
from stormwatch.simulators.site import SimulatedSite, isolate_site
from tests.conftest import REPO

LIB = ProfileLibrary()
Y532 = LIB.get("yosemitech_y532")
CA_SITE = REPO / "examples" / "ca-cgp-site.yaml"
#: The manual's example exchanges: request -> response (both with their CRCs, verbatim).
MANUAL_FRAMES = {
    bytes.fromhex("010312000002C173"): bytes.fromhex("010304E17A24C13746"),  # -10.28 mV
    bytes.fromhex("010324000002CEFB"): bytes.fromhex("010304CDCC7C41E450"),  # 15.8 °C
    bytes.fromhex("010328000002CDAB"): bytes.fromhex("0103043333F3404078"),  # pH 7.6
}


def _words(data: bytes) -> list[int]:
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]


def _f32(x: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", x))[0])


def _slope_by_hand(celsius: float) -> float:
    """0.19842 mV per kelvin per pH (sensors.md)."""
    return 0.19842 * (273.15 + celsius)


def test_the_profile_is_the_manuals_register_map() -> None:
    assert Y532.protocol == "modbus" and Y532.modbus is not None
    points = {p.quantity: p for p in Y532.modbus.wire_points}
    assert {q: (p.table, p.address, p.type, p.order, p.unit) for q, p in points.items()} == {
        "ph": ("holding", 0x2800, "float32", "DCBA", "[pH]"),
        "temperature": ("holding", 0x2400, "float32", "DCBA", "Cel"),
        "electrode_potential": ("holding", 0x1200, "float32", "DCBA", "mV"),
    }
    assert points["ph"].valid_range == (2.0, 12.0)  # the user manual's range
    assert points["temperature"].valid_range == (0.0, 50.0)
    assert Y532.modbus.commands == ()  # no start-measurement command in either manual
    assert Y532.modbus.default_unit_id == 1 and Y532.modbus.default_baud == 9600
    # the manual's data bytes decode with the profile's order
    for quantity, data, expected in (("ph", "3333F340", 7.6), ("temperature", "CDCC7C41", 15.8),
                                     ("electrode_potential", "E17A24C1", -10.28)):
        _, value = decode_point(points[quantity], _words(bytes.fromhex(data)))
        assert value == pytest.approx(expected, abs=1e-5), quantity


def test_the_gateway_sends_the_manuals_requests_and_reads_its_replies_on_a_raw_pty() -> None:
    """The test is the probe on the master side of a pty: it answers each request with the manual's
    own reply frame, byte for byte; the gateway's RTU driver on the other side decodes them."""
    from stormwatch.simulators.pty import PtyPair

    pty = PtyPair()
    link = ModbusLink("rtu-y532", client_factory(ModbusRtu(kind="modbus-rtu", port=pty.slave_path, timeout_s=1.0)),
                      frame_gap_s=rtu_frame_gap_s(9600))
    driver = ModbusDriver("ph-1", Y532, 1, link, WallClock())
    out: list[object] = []
    seen: list[bytes] = []

    def poll() -> None:
        try:
            out.extend(driver.poll())
        except Exception as exc:  # reported below
            out.append(exc)

    t = threading.Thread(target=poll)
    t.start()
    try:
        for _ in MANUAL_FRAMES:
            buf = b""
            deadline = time.monotonic() + 5
            while len(buf) < 8 and time.monotonic() < deadline:
                ready, _, _ = select.select([pty.master_fd], [], [], 0.05)
                if ready:
                    buf += os.read(pty.master_fd, 64)
            seen.append(buf)
            os.write(pty.master_fd, MANUAL_FRAMES[buf])
        t.join(5)
    finally:
        driver.close()
        pty.close()
    assert sorted(seen) == sorted(MANUAL_FRAMES)  # exactly the manual's three requests, CRCs included
    values = {v.quantity: v.value for v in out}  # type: ignore[union-attr]
    assert values == {"ph": pytest.approx(7.6, abs=1e-6), "temperature": pytest.approx(15.8, abs=1e-6),
                      "electrode_potential": pytest.approx(-10.28, abs=1e-5)}


def test_nernst_slope_and_unbuffered_mixing_by_hand() -> None:
    # the ideal electrode's slope table (sensors.md): mV per pH unit
    for celsius, mv in ((0, 54.20), (10, 56.18), (20, 58.17), (25, 59.16), (30, 60.15), (40, 62.14), (50, 64.12)):
        assert nernst_slope_mv(celsius) == pytest.approx(mv, abs=0.01)
        assert nernst_slope_mv(celsius) == pytest.approx(_slope_by_hand(celsius), abs=0.005)
    # half washout water of pH 12 (10^-2 mol/L of OH-) in neutral runoff: [OH-] = 0.005 -> pH 14 + log10(0.005)
    assert mix_ph([(0.5, 12.0), (0.5, 7.2)]) == pytest.approx(14 + math.log10(0.005), abs=1e-4)  # 11.699
    assert mix_ph([(0.01, 12.0), (0.99, 7.0)]) == pytest.approx(10.0, abs=1e-4)  # 1 % of it still reads pH 10
    assert mix_ph([(1.0, 12.0)]) == pytest.approx(12.0, abs=1e-9)
    # equal volumes of pH 3 and pH 11 neutralise exactly; of pH 3 and pH 10 the acid wins:
    # [H+] = (1e-3 - 1e-4) / 2 = 4.5e-4 -> pH 3.35 (an average of the pH values would say 6.5)
    assert mix_ph([(0.5, 3.0), (0.5, 11.0)]) == pytest.approx(7.0, abs=1e-6)
    assert mix_ph([(0.5, 3.0), (0.5, 10.0)]) == pytest.approx(-math.log10(4.5e-4), abs=1e-6)
    with pytest.raises(ValueError, match=r"sum to 0\.9"):
        mix_ph([(0.4, 7.0), (0.5, 8.0)])


def test_concrete_washout_scenario_by_hand() -> None:
    sc = load_scenario("concrete-washout")
    assert sc.site is not None and sc.site.resolve() == CA_SITE.resolve()  # its own bundled site
    cfg = load_site(sc.site, LIB)
    ss = SiteScenario(sc, cfg, device_profiles(cfg, LIB))
    assert ss.roles == {"rain-1": "rain", "turb-1": "turbidity_downstream", "ph-1": "ph"}
    day = datetime(2026, 6, 2, 7, 0, tzinfo=UTC)  # Tue 2 June 2026 00:00 PDT
    assert sc.start == day

    def ph_at(hour: float) -> float:
        return ss.value("ph-1", "ph", day + timedelta(hours=hour))

    assert abs(ph_at(9.99) - 7.2) <= 0.05  # runoff before the pit overflows
    assert abs(ph_at(12) - (14 + math.log10(0.5 * 1e-2))) <= 0.001  # 11.699: half the flow is pH-12 water
    # 20 min (one time constant) after the overflow stops: a share of 0.5/e -> pH drops by log10(e) = 0.434
    assert abs(ph_at(17 + 1 / 3) - (14 + math.log10(0.5 * 1e-2 / math.e))) <= 0.001
    # two hours on: 0.5e-2·e^-6 = 1.24e-5 mol/L, plus the runoff's own ~1e-7 (0.004 pH units): 9.09
    assert abs(ph_at(17 + 2) - (14 + math.log10(0.5 * 1e-2 * math.exp(-6)))) <= 0.005
    assert abs(ph_at(23) - 7.2) <= 0.06
    # the electrode potential is that of an ideal glass electrode at the water temperature
    t = day + timedelta(hours=12)
    temp = ss.value("ph-1", "temperature", t)
    assert ss.value("ph-1", "electrode_potential", t) == pytest.approx(-_slope_by_hand(temp) * (ph_at(12) - 7),
                                                                      rel=1e-4)


@pytest.fixture()
def washout_site(tmp_path: Path) -> Iterator[tuple[SimulatedSite, ModbusRtu, ManualClock]]:
    sc = load_scenario("concrete-washout")
    cfg = isolate_site(load_site(CA_SITE, LIB), tmp_path / "links")
    clock = ManualClock(sc.start + timedelta(hours=12))  # noon, the pit overflowing
    sim = SimulatedSite(cfg, LIB, sc, clock)
    sim.start()
    tr = cfg.device("ph-1").transport
    assert isinstance(tr, ModbusRtu)
    yield sim, tr, clock
    sim.stop()


def test_simulated_y532_answers_on_its_rs485_line_temperature_compensated(washout_site) -> None:
    sim, tr, clock = washout_site
    # the Y511 and the Y532 answer on one RS-485 line (a multi-drop bus), as the site file wires them
    (line,) = sim.rtu_lines.values()
    assert {d.device_id for d in line.devices} == {"turb-1", "ph-1"}

    async def run() -> dict[str, float]:
        client = AsyncModbusSerialClient(tr.port, framer=FramerType.RTU, baudrate=tr.baud, timeout=2)
        assert await client.connect()
        try:
            got = {}
            for name, address in (("ph", 0x2800), ("temperature", 0x2400), ("potential", 0x1200)):
                rr = await client.read_holding_registers(address, count=2, device_id=tr.unit_id)
                assert not rr.isError(), (name, rr)
                got[name] = struct.unpack("<f", b"".join(w.to_bytes(2, "big") for w in rr.registers))[0]
            # registers the profile does not list are not served (the probe answers only its manual's)
            assert (await client.read_holding_registers(0x2600, count=4, device_id=tr.unit_id)).isError()
            return got
        finally:
            client.close()

    got = asyncio.run(run())
    now = clock.now()
    assert got["ph"] == _f32(sim.state.value("ph-1", "ph", now))
    assert 11.6 < got["ph"] < 11.8
    # automatic temperature compensation: the reported pH is 7 - E / S(T) at the MEASURED temperature
    assert got["ph"] == pytest.approx(7 - got["potential"] / _slope_by_hand(got["temperature"]), abs=2e-4)
    uncompensated = 7 - got["potential"] / _slope_by_hand(25.0)  # what a meter fixed at 25 °C would say
    assert abs(uncompensated - got["ph"]) > 0.05

