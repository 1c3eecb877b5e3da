"""Failure kind #19 (docs/reference/failure-kinds.md), "Coils off by a bit": coils 0-7 hold
0,0,1,0,0,0,1,0; reading only coils 4-7 returns 0,0,1,0 -- bit 0 of the reply is the first coil
asked for (coil 4), not coil 0 (Modbus Application Protocol v1.1b3, 6.1 "Read Coils": "The LSB of
the first data byte contains the output addressed in the query").

A real pymodbus Modbus TCP server holds the eight coils; a plain pymodbus client reads them
first (the independent reference: all eight, then 4-7), then the gateway's own Modbus driver
(stormwatch.gateway.drivers.modbus, built from a compiled plan as the gateway builds it) polls a
profile whose four points are coils 4, 5, 6 and 7 -- one read_coils(4, count=4) request.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pymodbus.client import ModbusTcpClient
from pymodbus.simulator import DataType, SimData, SimDevice

from stormwatch.clock import ManualClock
from stormwatch.config import parse_site
from stormwatch.gateway.drivers.build import build_driver
from stormwatch.gateway.drivers.modbus import plan_reads
from stormwatch.gateway.plan import compile_plan
from stormwatch.profiles import ProfileLibrary
from tests.alerts_support import T0
from tests.gateway_support import DeviceServer

UNIT = 3
COILS = [False, False, True, False, False, False, True, False]  # coils 0..7 (failure-kinds.md #19)

PROFILE = """\
model: acme_relay_x4
manufacturer: ACME
description: a made-up relay module whose four outputs are coils 4-7
source: tests/gateway/test_failure_kinds_coils.py
protocol: modbus
modbus:
  default_unit_id: 3
  points:
    - {quantity: valve_4, unit: "1", table: coil, address: 4}
    - {quantity: valve_5, unit: "1", table: coil, address: 5}
    - {quantity: valve_6, unit: "1", table: coil, address: 6}
    - {quantity: valve_7, unit: "1", table: coil, address: 7}
"""


def coil_device() -> SimDevice:
    """A pymodbus device whose coil table holds :data:`COILS` at bit addresses 0-7 (separate tables
    -- coils, discrete inputs, holding, input --: a coil's address is its bit)."""
    return SimDevice(UNIT, simdata=(
        [SimData(0, values=list(COILS), datatype=DataType.BITS)],
        [SimData(0, values=[False], datatype=DataType.BITS)],
        [SimData(0, values=[0], datatype=DataType.REGISTERS)],
        [SimData(0, values=[0], datatype=DataType.REGISTERS)],
    ))


@pytest.fixture()
def coil_server() -> DeviceServer:
    srv = DeviceServer([coil_device()])
    srv.start()
    yield srv  # type: ignore[misc]
    srv.stop()


def test_the_server_holds_the_coils_as_the_case_says(coil_server: DeviceServer) -> None:
    """The reference, with pymodbus's own client: 0,0,1,0,0,0,1,0, and 0,0,1,0 for coils 4-7."""
    client = ModbusTcpClient("127.0.0.1", port=coil_server.port)
    assert client.connect()
    try:
        assert [int(b) for b in client.read_coils(0, count=8, device_id=UNIT).bits[:8]] == [0, 0, 1, 0, 0, 0, 1, 0]
        assert [int(b) for b in client.read_coils(4, count=4, device_id=UNIT).bits[:4]] == [0, 0, 1, 0]
    finally:
        client.close()


def test_the_gateway_driver_reads_coils_4_to_7_as_0_0_1_0(coil_server: DeviceServer, tmp_path: Path) -> None:
    (tmp_path / "acme_relay_x4.yaml").write_text(PROFILE, encoding="utf-8")
    profiles = ProfileLibrary(tmp_path)
    cfg = parse_site({"site": {"id": "coils", "jurisdiction": "ch133"}, "gateway_id": "gw-coils", "devices": [
        {"id": "relays", "profile": "acme_relay_x4", "poll_interval_s": 60,
         "transport": {"kind": "modbus-tcp", "host": "127.0.0.1", "port": coil_server.port, "unit_id": UNIT}}]},
        "coils-site.yaml", profiles)
    plan = compile_plan(cfg, profiles)
    (device,) = plan.devices
    profile = plan.profile(device)
    assert profile.modbus is not None
    blocks = plan_reads(profile.modbus.points)  # one request for the four coils, starting at coil 4
    assert [(b.table, b.address, b.count) for b in blocks] == [("coil", 4, 4)]
    driver = build_driver(device, profile, ManualClock(T0), {})
    try:
        values = driver.poll()
    finally:
        driver.close()
    assert [(v.quantity, v.number, v.value) for v in values] == [
        ("valve_4", 0, 0.0), ("valve_5", 0, 0.0), ("valve_6", 1, 1.0), ("valve_7", 0, 0.0)]
