"""Simulated devices over real protocol stacks: pymodbus clients over TCP and over a pty (RTU),
pyserial on the HRXL pty. Expected values are computed independently: floats decoded from the
wire bytes with ``struct`` (Y511: little-endian ``<f``, sensors.md), distances from the geometry."""

from __future__ import annotations

import asyncio
import struct
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import serial
from pymodbus.client import AsyncModbusSerialClient, AsyncModbusTcpClient
from pymodbus.framer import FramerType

from stormwatch.clock import ManualClock
from stormwatch.config import ModbusRtu, ModbusTcp, Serial, SiteConfig, load_site
from stormwatch.profiles import ProfileLibrary
from stormwatch.simulators.scenario import load_scenario
from stormwatch.simulators.site import SimulatedSite, isolate_site
from tests.conftest import REPO

LIB = ProfileLibrary()


Running = tuple[SimulatedSite, SiteConfig, ManualClock]


def _le_float(words: list[int]) -> float:
    """Y511 float: the 4 data bytes as on the wire, little-endian (sensors.md)."""
    return struct.unpack("<f", b"".join(w.to_bytes(2, "big") for w in words))[0]


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


@pytest.fixture()
def site(tmp_path: Path) -> Iterator[Running]:
    cfg = isolate_site(load_site(REPO / "examples" / "site.yaml", LIB), tmp_path / "links")
    scenario = load_scenario("default")
    clock = ManualClock(scenario.start + timedelta(hours=13))  # storm hour 12: the peak
    sim = SimulatedSite(cfg, LIB, scenario, clock, hrxl_lines_per_s=50)
    sim.start()
    yield sim, cfg, clock
    sim.stop()


def test_tcp_gateway_serves_counter_and_y511_at_request_time(site: Running) -> None:
    sim, cfg, clock = site
    tr = cfg.device("turb-up").transport
    assert isinstance(tr, ModbusTcp)
    rain_unit = cfg.device("rain-1").transport.unit_id  # type: ignore[union-attr]

    async def run() -> None:
        client = AsyncModbusTcpClient(tr.host, port=tr.port, timeout=2)
        assert await client.connect()
        try:
            rr = await client.read_holding_registers(0x2600, count=5, device_id=tr.unit_id)
            assert not rr.isError()
            assert _le_float(rr.registers[2:4]) == _f32(sim.state.upstream_ntu(clock.now()))
            assert 7 < _le_float(rr.registers[2:4]) < 9  # background ~8 NTU
            assert _le_float(rr.registers[0:2]) == _f32(sim.state.water_temperature_c(clock.now()))
            assert rr.registers[4] == 0  # device_error
            # the tipping-bucket counter: 79 tips by storm hour 12 (floor(0.663 * 1.2 / 0.01))
            rr = await client.read_holding_registers(0, count=1, device_id=rain_unit)
            assert rr.registers == [79]
            clock.advance(timedelta(hours=12))  # after the storm: all 120 tips
            rr = await client.read_holding_registers(0, count=1, device_id=rain_unit)
            assert rr.registers == [120]
            # Y511 commands: start measurement (read 0x2500) and brush (write 0x3100) succeed
            assert not (await client.read_holding_registers(0x2500, count=1, device_id=tr.unit_id)).isError()
            assert not (await client.write_registers(0x3100, [0], device_id=tr.unit_id)).isError()
            # measurement registers are read-only; an unknown unit gets an exception, not silence
            assert (await client.write_registers(0x2600, [1], device_id=tr.unit_id)).isError()
            rr = await client.read_holding_registers(0, count=1, device_id=77)
            assert rr.isError() and rr.exception_code == 0x0B
            assert (await client.read_holding_registers(0x1000, count=1, device_id=tr.unit_id)).isError()
        finally:
            client.close()

    asyncio.run(run())


def test_rtu_line_on_a_pty_serves_the_downstream_probe(site: Running) -> None:
    sim, cfg, clock = site
    tr = cfg.device("turb-down").transport
    assert isinstance(tr, ModbusRtu)
    assert Path(tr.port).is_symlink() and Path(tr.port).resolve().as_posix().startswith("/dev/pts/")

    async def run() -> None:
        client = AsyncModbusSerialClient(tr.port, framer=FramerType.RTU, baudrate=tr.baud, timeout=2)
        assert await client.connect()
        try:
            rr = await client.read_holding_registers(0x2600, count=5, device_id=tr.unit_id)
            assert not rr.isError()
            ntu = _le_float(rr.registers[2:4])
            assert ntu == _f32(sim.state.downstream_ntu(clock.now()))
            assert ntu > sim.state.upstream_ntu(clock.now()) + 5  # the storm-peak plume
            clock.advance(-timedelta(hours=12, minutes=30))  # half an hour after the start: dry
            rr = await client.read_holding_registers(0x2600, count=5, device_id=tr.unit_id)
            assert _le_float(rr.registers[2:4]) < sim.state.upstream_ntu(clock.now()) + 5
            rr = await client.read_holding_registers(0x2600, count=5, device_id=9)
            assert rr.isError()
        finally:
            client.close()

    asyncio.run(run())


def test_hrxl_pty_writes_the_scenario_distance(site: Running) -> None:
    sim, cfg, clock = site
    tr = cfg.device("basin-level").transport
    assert isinstance(tr, Serial)
    basin = cfg.basin
    assert basin is not None and basin.sensor_mount_height_ft == 8.0
    depth_ft = sim.state.sediment_depth_ft(clock.now())
    expected_mm = round((8.0 - depth_ft) * 304.8)  # 1 ft = 304.8 mm exactly
    with serial.Serial(tr.port, tr.baud, timeout=2) as port:
        lines = [port.read_until(b"\r") for _ in range(3)]
    assert all(len(x) == 6 and x.startswith(b"R") and x.endswith(b"\r") for x in lines), lines
    assert lines[-1] == f"R{expected_mm:04d}\r".encode()


def test_started_site_exposes_what_it_runs(site: Running) -> None:
    sim, _cfg, _ = site
    ends = sim.endpoints()
    assert set(ends) == {"rain-1", "turb-up", "turb-down", "basin-level"}
    assert len(sim.tcp_servers) == 1  # rain-1 and turb-up share one TCP gateway
    assert ends["rain-1"].rsplit("#", 1)[0] == ends["turb-up"].rsplit("#", 1)[0]
    assert sim.skipped == {}


def test_stop_removes_links_and_a_file_at_a_link_path_is_refused(tmp_path: Path) -> None:
    cfg = isolate_site(load_site(REPO / "examples" / "site.yaml", LIB), tmp_path)
    sc = load_scenario("default")
    clock = ManualClock(sc.start)
    with SimulatedSite(cfg, LIB, sc, clock):
        assert (tmp_path / "turb-down").is_symlink()
    assert not (tmp_path / "turb-down").exists()
    (tmp_path / "turb-down").write_text("not a port")
    sim = SimulatedSite(cfg, LIB, sc, clock)
    with pytest.raises(OSError, match="not a symlink"):
        sim.start()
    assert (tmp_path / "turb-down").read_text() == "not a port"


def test_two_outfalls_and_two_basins_each_on_their_own_line(tmp_path: Path) -> None:
    """examples/two-outfalls.yaml under the default scenario (every point and basin takes its defaults):
    each HRXL reports the sediment of ITS basin, each compliance probe its own point's plume.

    By hand at the start (45 % of each design volume lost, hydrology.md): basin-1 (40 x 20 ft, 3:1,
    H = 4 ft, V(H) = 6,848 ft³) holds 3,081.6 ft³ below the sediment; trap-2's table gives 45 % of
    1,500 ft³ = 675 ft³ at 1 + (675 - 300) / 500 = 1.75 ft, 6 ft below the sensor: (6 - 1.75) x 304.8 mm.
    """
    cfg = isolate_site(load_site(REPO / "examples" / "two-outfalls.yaml", LIB), tmp_path / "links")
    scenario = load_scenario("default")
    clock = ManualClock(scenario.start)
    with SimulatedSite(cfg, LIB, scenario, clock, hrxl_lines_per_s=50) as sim:
        assert sim.skipped == {}
        assert set(sim.serial_devices) == {"basin-level-1", "basin-level-2"}
        lines = {}
        for dev in ("basin-level-1", "basin-level-2"):
            tr = cfg.device(dev).transport
            assert isinstance(tr, Serial)
            with serial.Serial(tr.port, tr.baud, timeout=2) as port:
                lines[dev] = [port.read_until(b"\r") for _ in range(3)][-1]
        assert lines["basin-level-2"] == f"R{round((6 - 1.75) * 304.8):04d}\r".encode()  # R1295
        d1 = (8.0 * 304.8 - int(lines["basin-level-1"][1:5])) / 304.8
        assert 40 * 20 * d1 + 60 * 3 * d1**2 + 4 / 3 * 9 * d1**3 == pytest.approx(0.45 * 6848, abs=3.1)  # ±0.5 mm

        tr1, tr2 = cfg.device("turb-down-1").transport, cfg.device("turb-down-2").transport
        assert isinstance(tr1, ModbusRtu) and isinstance(tr2, ModbusRtu) and tr1.port != tr2.port  # two lines
        clock.advance(timedelta(hours=13))  # the storm's peak

        async def read(tr: ModbusRtu) -> float:
            client = AsyncModbusSerialClient(tr.port, framer=FramerType.RTU, baudrate=tr.baud, timeout=2)
            assert await client.connect()
            try:
                rr = await client.read_holding_registers(0x2600, count=5, device_id=tr.unit_id)
                assert not rr.isError()
                return _le_float(rr.registers[2:4])
            finally:
                client.close()

        now = clock.now()
        ntu1, ntu2 = asyncio.run(read(tr1)), asyncio.run(read(tr2))
        assert ntu1 == _f32(sim.state.downstream_ntu(now, "outfall-1"))
        assert ntu2 == _f32(sim.state.downstream_ntu(now, "outfall-2"))
        assert ntu1 > sim.state.upstream_ntu(now) + 5 and ntu2 > sim.state.upstream_ntu(now) + 5  # defaults


def test_a_start_cut_short_leaves_no_server_thread_behind(tmp_path: Path) -> None:
    """A start abandoned mid-way (Ctrl-C, a timeout) stops its servers' loop: no thread left
    serving, and no unclosed event loop for the interpreter to trip over at exit."""
    cfg = isolate_site(load_site(REPO / "examples" / "site.yaml", LIB), tmp_path)
    sc = load_scenario("default")
    sim = SimulatedSite(cfg, LIB, sc, ManualClock(sc.start))
    with pytest.raises((TimeoutError, RuntimeError)):
        sim.start(timeout_s=1e-9)
    assert not [t for t in threading.enumerate() if t.name == "stormwatch-simulated-site"]
    sim.start()  # and the site can start again
    sim.stop()
