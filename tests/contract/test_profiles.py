"""Device profiles: a made-up sensor model is read right with no code change, written with 0-based
wire addresses or in Modicon notation; schema errors name the file and the key; an address that
looks like Modicon notation under 0-based addressing is refused with the wire address to write;
every shipped profile loads."""

from __future__ import annotations

import struct
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pymodbus.simulator import DataType, SimData, SimDevice

from stormwatch import topics
from stormwatch.config import parse_site
from stormwatch.profiles import ProfileError, ProfileLibrary, load_profile_file
from tests.gateway_support import Collector, DeviceServer, run_on_lockstep

SIM_START = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)

MADE_UP = """\
# A sensor model that exists only in this test: every data type, order and table at once.
model: acme_hydroprobe_x1
manufacturer: ACME
description: made-up multi-parameter probe
source: this test
protocol: modbus
modbus:
  default_unit_id: 7
  commands:
    - {name: wake, function: write_register, address: 0x0100, values: [1], delay_s: 0.5}
  points:
    - {quantity: temperature, unit: Cel, table: holding, address: 0x0000, type: int16, scale: 0.1}
    - {quantity: conductivity, unit: uS/cm, table: holding, address: 0x0001, type: float32, order: DCBA,
       valid_range: [0, 2000]}
    - {quantity: volume, unit: m3, table: holding, address: 0x0003, type: uint64, scale: 0.001}
    - {quantity: stage, unit: m, table: input, address: 0x0010, type: int32, order: BADC, scale: 0.001,
       offset: 0.5}
    - {quantity: flow, unit: L/s, table: input, address: 0x0012, type: uint32, order: CDAB}
    - {quantity: pump_on, unit: "1", table: coil, address: 0x0005}
"""

# The same model as a manual in Modicon notation lists it (docs/profiles.md). Wire address w of the
# holding table is reference 40001 + w, of the input table 30001 + w, coil w is 00001 + w:
# 0x0000 → 40001, 0x0001 → 40002, 0x0003 → 40004, input 0x0010 (16) → 30017, 0x0012 (18) → 30019,
# coil 0x0005 → 6, and the wake command's holding 0x0100 (256) → 40257.
MADE_UP_MODICON = """\
model: acme_hydroprobe_x1
manufacturer: ACME
description: made-up multi-parameter probe, Modicon register numbers
source: this test
protocol: modbus
modbus:
  addressing: modicon
  default_unit_id: 7
  commands:
    - {name: wake, function: write_register, address: 40257, values: [1], delay_s: 0.5}
  points:
    - {quantity: temperature, unit: Cel, table: holding, address: 40001, type: int16, scale: 0.1}
    - {quantity: conductivity, unit: uS/cm, table: holding, address: 40002, type: float32, order: DCBA,
       valid_range: [0, 2000]}
    - {quantity: volume, unit: m3, table: holding, address: 40004, type: uint64, scale: 0.001}
    - {quantity: stage, unit: m, table: input, address: 30017, type: int32, order: BADC, scale: 0.001,
       offset: 0.5}
    - {quantity: flow, unit: L/s, table: input, address: 30019, type: uint32, order: CDAB}
    - {quantity: pump_on, unit: "1", table: coil, address: 6}
"""


def _words(fmt: str, value: float, order: str) -> list[int]:
    """Wire words for ``value`` packed big-endian (ABCD) then reordered -- independent of the codec."""
    be = struct.pack(">" + fmt, value)
    if order == "DCBA":
        wire = be[::-1]
    elif order == "CDAB":
        wire = b"".join(reversed([be[i : i + 2] for i in range(0, len(be), 2)]))
    elif order == "BADC":
        wire = b"".join(be[i : i + 2][::-1] for i in range(0, len(be), 2))
    else:
        wire = be
    return [int.from_bytes(wire[i : i + 2], "big") for i in range(0, len(wire), 2)]


class _Server:
    """A real pymodbus TCP server with separate coil/discrete/holding/input tables."""

    def __init__(self, unit: int, holding: dict[int, int], inputs: dict[int, int], coils: dict[int, bool]) -> None:
        self.writes: list[tuple[int, int, list[int]]] = []

        def regs(table: dict[int, int], writable: set[int]) -> list[SimData]:
            out = [SimData(a, values=[v], datatype=DataType.REGISTERS, readonly=a not in writable)
                   for a, v in sorted(table.items())]
            return out + [SimData(a, values=[0], datatype=DataType.REGISTERS) for a in sorted(writable)]

        async def action(fc: int, _start: int, address: int, _count: int, _regs: list[int],
                         values: list[int] | list[bool] | None) -> None:
            if values is not None and fc in (5, 6, 15, 16):
                self.writes.append((fc, address, [int(v) for v in values]))

        self._serving = DeviceServer([SimDevice(unit, simdata=(
            [SimData(a, values=[v], datatype=DataType.BITS) for a, v in sorted(coils.items())],
            [SimData(0, values=[False], datatype=DataType.BITS)],
            regs(holding, {0x0100}),
            regs(inputs, set()),
        ), action=action)])
        self.port = self._serving.port

    def start(self) -> _Server:
        self._serving.start()
        return self

    def stop(self) -> None:
        self._serving.stop()


@pytest.mark.mosquitto
@pytest.mark.parametrize("text", [MADE_UP, MADE_UP_MODICON], ids=["0-based", "modicon"])
def test_made_up_profile_is_read_right_with_no_code_change(mosquitto_server, tmp_path: Path, text: str) -> None:
    profiles_dir = tmp_path / "profiles"
    profiles_dir.mkdir()
    (profiles_dir / "acme_hydroprobe_x1.yaml").write_text(text)
    holding: dict[int, int] = {0x0000: 65535}  # int16 -1 × 0.1 = -0.1 °C (failure-kinds #2)
    for i, w in enumerate(_words("f", 1234.5, "DCBA")):
        holding[0x0001 + i] = w
    for i, w in enumerate(_words("Q", 2**40 + 5, "ABCD")):
        holding[0x0003 + i] = w
    inputs: dict[int, int] = {}
    for i, w in enumerate(_words("i", -2500, "BADC")):
        inputs[0x0010 + i] = w  # -2500 × 0.001 + 0.5 = -2.0 m
    for i, w in enumerate(_words("I", 70000, "CDAB")):
        inputs[0x0012 + i] = w
    srv = _Server(7, holding, inputs, {0x0005: True}).start()
    site_id = f"acme-{uuid.uuid4().hex[:8]}"
    lib = ProfileLibrary(profiles_dir)
    cfg = parse_site({"site": {"id": site_id, "jurisdiction": "ch133"}, "gateway_id": "gw-t", "devices": [
        {"id": "probe-1", "profile": "acme_hydroprobe_x1", "poll_interval_s": 60,
         "transport": {"kind": "modbus-tcp", "host": "127.0.0.1", "port": srv.port, "unit_id": 7}}]},
        "acme-site", lib)
    sub = Collector(mosquitto_server.port, topics.readings(site_id, "gw-t"), f"sub-{site_id}")
    try:  # the one slot is polled, however busy the machine
        run_on_lockstep(cfg, lib, mosquitto_server.url, tmp_path / "gw", SIM_START, SIM_START + timedelta(seconds=60))
        got = {r.quantity: r for r in sub.wait_for(6)}
    finally:
        sub.close()
        srv.stop()
    assert got["temperature"].value == pytest.approx(-0.1) and got["temperature"].raw == -1
    assert got["conductivity"].value == 1234.5 and got["conductivity"].unit == "uS/cm"
    assert got["volume"].value == pytest.approx((2**40 + 5) * 0.001)
    assert got["stage"].value == pytest.approx(-2.0) and got["stage"].unit == "m"
    assert got["flow"].value == 70000
    assert got["pump_on"].value == 1
    assert all(r.flags == () and r.time == SIM_START for r in got.values())
    assert srv.writes == [(6, 0x0100, [1])]  # the wake command, once after connecting


def test_profile_errors_name_the_file_and_the_key(tmp_path: Path) -> None:
    bad = tmp_path / "acme_bad.yaml"
    bad.write_text(MADE_UP.replace("acme_hydroprobe_x1", "acme_bad").replace("order: BADC", "order: BCDA"))
    with pytest.raises(ProfileError) as err:
        load_profile_file(bad)
    assert str(bad) in str(err.value) and "modbus.points.3.order" in str(err.value)
    bad.write_text(MADE_UP.replace("acme_hydroprobe_x1", "acme_bad").replace("type: int16, scale: 0.1",
                                                                              "type: int16, scale: 0.1, colour: red"))
    with pytest.raises(ProfileError, match=r"modbus\.points\.0\.colour: Extra inputs are not permitted"):
        load_profile_file(bad)
    bad.write_text(MADE_UP.replace("acme_hydroprobe_x1", "acme_bad").replace("address: 0x0003", "address: 0x0002"))
    with pytest.raises(ProfileError, match="overlap at holding 0x0002"):
        load_profile_file(bad)
    bad.write_text(MADE_UP.replace("acme_hydroprobe_x1", "acme_bad").replace("valid_range: [0, 2000]",
                                                                              "valid_range: [2000, 0]"))
    with pytest.raises(ProfileError, match=r"modbus\.points\.1: valid_range \[2000\.0, 0\.0\]"):
        load_profile_file(bad)
    bad.write_text(MADE_UP.replace("acme_hydroprobe_x1", "acme_other"))
    with pytest.raises(ProfileError, match="must equal the file name"):
        load_profile_file(bad)


def test_modicon_notation_converts_to_the_wire_addresses(tmp_path: Path) -> None:
    path = tmp_path / "acme_hydroprobe_x1.yaml"
    path.write_text(MADE_UP_MODICON)
    modicon = load_profile_file(path).modbus
    path.write_text(MADE_UP)
    wire = load_profile_file(path).modbus
    assert modicon.addressing == "modicon" and wire.addressing == "0-based"
    assert [(p.table, p.address) for p in modicon.wire_points] == [(p.table, p.address) for p in wire.points] == [
        ("holding", 0), ("holding", 1), ("holding", 3), ("input", 16), ("input", 18), ("coil", 5)]
    assert [c.address for c in modicon.wire_commands] == [0x0100]
    assert [p.address for p in modicon.points][:2] == [40001, 40002]  # the profile keeps its notation
    # six-digit references reach the whole table: 465536 is holding wire address 65535
    six = MADE_UP_MODICON.replace("address: 40004, type: uint64", "address: 465533, type: uint64")
    path.write_text(six)
    assert load_profile_file(path).modbus.wire_points[2].address == 65532
    # the plan the lean gateway runs holds wire addresses, and round-trips through JSON
    from stormwatch.gateway.plan import GatewayPlan, compile_plan

    profiles_dir = tmp_path / "lib"
    profiles_dir.mkdir()
    (profiles_dir / "acme_hydroprobe_x1.yaml").write_text(MADE_UP_MODICON)
    lib = ProfileLibrary(profiles_dir)
    cfg = parse_site({"site": {"id": "acme", "jurisdiction": "ch133"}, "gateway_id": "gw-t", "devices": [
        {"id": "probe-1", "profile": "acme_hydroprobe_x1",
         "transport": {"kind": "modbus-tcp", "host": "127.0.0.1", "port": 502, "unit_id": 7}}]}, "acme-site", lib)
    plan = compile_plan(cfg, lib)
    points = plan.profiles["acme_hydroprobe_x1"].modbus.points
    assert [p.address for p in points] == [0, 1, 3, 16, 18, 5]
    assert GatewayPlan.from_json(plan.to_json()) == plan


@pytest.mark.parametrize(("table", "address", "wire"), [
    ("holding", 40001, 0), ("holding", 40010, 9), ("input", 30001, 0), ("discrete", 10005, 4)])
def test_a_modicon_lookalike_under_0_based_is_refused_with_the_wire_address(tmp_path: Path, table: str,
                                                                           address: int, wire: int) -> None:
    path = tmp_path / "acme_lookalike.yaml"
    path.write_text(f"""\
model: acme_lookalike
manufacturer: ACME
description: register number copied from the manual
source: this test
protocol: modbus
modbus:
  points:
    - {{quantity: level, unit: m, table: {table}, address: {address}}}
""")
    with pytest.raises(ProfileError) as err:
        load_profile_file(path)
    message = str(err.value)
    assert str(path) in message and "points.0 (level)" in message
    assert f"address {address} looks like Modicon notation" in message
    assert f"write address: {wire} (0x{wire:04X})" in message and "addressing: modicon" in message
    # Stated as Modicon notation, the same number is the wire address the message suggested.
    path.write_text(path.read_text().replace("modbus:\n", "modbus:\n  addressing: modicon\n"))
    assert load_profile_file(path).modbus.wire_points[0].address == wire


def test_modicon_notation_errors_name_the_table(tmp_path: Path) -> None:
    path = tmp_path / "acme_hydroprobe_x1.yaml"
    path.write_text(MADE_UP_MODICON.replace("table: holding, address: 40001", "table: holding, address: 30001"))
    with pytest.raises(ProfileError, match=r"points\.0 \(temperature\): 30001 is not a Modicon holding reference "
                                           r"\(40001-49999 or 400001-465536\); 30001 is a Modicon input reference"):
        load_profile_file(path)
    path.write_text(MADE_UP_MODICON.replace("address: 40257", "address: 257"))
    with pytest.raises(ProfileError, match=r"commands\.0 \(wake\): 257 is not a Modicon holding reference"):
        load_profile_file(path)
    path.write_text(MADE_UP_MODICON.replace("addressing: modicon", "addressing: 1-based"))
    with pytest.raises(ProfileError, match=r"modbus\.addressing: Input should be '0-based' or 'modicon'"):
        load_profile_file(path)


def test_every_shipped_profile_loads() -> None:
    lib = ProfileLibrary()
    names = set(lib.names())
    assert {"yosemitech_y511", "yosemitech_y532", "campbell_clarivue10", "keller_acculevel", "maxbotix_hrxl",
            "tipping_bucket_modbus_counter", "tipping_bucket_modbus_counter_32bit", "campbell_rainvue10"} <= names
    for name in names:
        lib.get(name)
    assert lib.get("campbell_clarivue10").sdi12.values[0].unit == "FNU"
    assert lib.get("tipping_bucket_modbus_counter_32bit").counter.width_bits == 32
    assert lib.get("campbell_rainvue10").counter.mode == "delta"
