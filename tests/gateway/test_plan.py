"""The compiled gateway plan and the lean process: no pydantic at run time, exact plan JSON round
trip, lean payloads the contract parser accepts field for field, and the exec'd field process
polling a real pymodbus server and publishing to a real Mosquitto."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path

import pytest
import yaml

from stormwatch import topics
from stormwatch.clock import ScenarioClock
from stormwatch.config import load_site, parse_site
from stormwatch.contract import dump_readings, parse_readings
from stormwatch.gateway.plan import GatewayPlan, PlanError, compile_plan
from stormwatch.gateway.run import read_plan, write_plan
from stormwatch.gateway.service import Gateway
from stormwatch.profiles import ProfileLibrary
from stormwatch.wire import WireReading, dump_payload
from tests.conftest import REPO
from tests.gateway_support import Collector, RegisterServer
from tests.waits import wait_until

SIM_START = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
RUNTIME_MODULES = (
    "stormwatch.gateway.__main__", "stormwatch.gateway.run", "stormwatch.gateway.service", "stormwatch.gateway.plan",
    "stormwatch.gateway.drivers.build", "stormwatch.gateway.drivers.modbus", "stormwatch.gateway.drivers.sdi12",
    "stormwatch.gateway.drivers.serial_line", "stormwatch.gateway.counter", "stormwatch.gateway.qc",
    "stormwatch.gateway.outbox", "stormwatch.gateway.publisher", "stormwatch.codec", "stormwatch.wire",
)


def test_runtime_modules_import_no_pydantic() -> None:
    code = (
        "import sys\n"
        f"for m in {RUNTIME_MODULES!r}: __import__(m)\n"
        "print(sorted(m for m in ('pydantic', 'pydantic_core', 'typer', 'yaml') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]"


def test_a_modbus_tcp_site_loads_no_serial_driver(tmp_path: Path) -> None:
    """The serial drivers load with the first device that needs one: a Modbus TCP site's lean process
    spends no memory on them (nor on the statistics module)."""
    profiles = ProfileLibrary()
    cfg = parse_site({"site": {"id": "tcp-only", "jurisdiction": "ch133"}, "gateway_id": "gw-1", "devices": [
        {"id": "level-1", "profile": "keller_acculevel", "poll_interval_s": 60,
         "transport": {"kind": "modbus-tcp", "host": "127.0.0.1", "port": 1502, "unit_id": 1}}]}, "test", profiles)
    plan_path = write_plan(compile_plan(cfg, profiles), tmp_path / "plan.json")
    code = (
        "import sys\n"
        "from stormwatch.clock import WallClock\n"
        "from stormwatch.gateway.run import read_plan\n"
        "from stormwatch.gateway.service import Gateway\n"
        f"Gateway.from_plan(read_plan(__import__('pathlib').Path({str(plan_path)!r})), WallClock(), "
        f"'mqtt://127.0.0.1:1', __import__('pathlib').Path({str(tmp_path / 'gw')!r}))\n"
        "print(sorted(m for m in ('stormwatch.gateway.drivers.rtu', 'stormwatch.gateway.drivers.sdi12',"
        " 'stormwatch.gateway.drivers.serial_line', 'stormwatch.gateway.drivers.serial_bus', 'statistics')"
        " if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]"


T = datetime(2026, 6, 1, 12, 0, 0, tzinfo=UTC)
LEAN = [
    # rain: integer tips, the counter value as raw, a counter flag
    WireReading(site="riverside", device="rain-1", quantity="rain_tips", value=10, unit="{tip}", time=T,
                gateway="gw-1", boot="b00t", seq=0, raw=4, flags=("counter_wrap",)),
    # turbidity: a float32 value, its two register words, two QC flags; microseconds in the time
    WireReading(site="riverside", device="turb-down", quantity="turbidity", value=1500.0, unit="NTU",
                time=T + timedelta(microseconds=250), gateway="gw-1", boot="b00t", seq=1,
                raw=[0x8000, 0x44BB], flags=("out_of_range", "device_error")),
    # distance: the serial line as raw, no flags; a time given in another zone (UTC on the wire)
    WireReading(site="riverside", device="basin-level", quantity="distance", value=250.0, unit="mm",
                time=datetime.fromisoformat("2026-06-01T08:05:00-04:00"), gateway="gw-1", boot="b00t", seq=2,
                raw="R0250", flags=()),
]


@pytest.mark.parametrize("lean", LEAN, ids=lambda r: r.quantity)
def test_lean_payload_parses_back_field_for_field(lean: WireReading) -> None:
    payload = dump_payload([lean.to_wire()])
    (parsed,) = parse_readings(payload)
    assert parsed.site == lean.site and parsed.device == lean.device and parsed.quantity == lean.quantity
    assert parsed.value == lean.value and type(parsed.value) is type(lean.value)
    assert parsed.unit == lean.unit and parsed.time == lean.time and parsed.time.tzinfo == UTC
    assert parsed.identity == (lean.gateway, lean.boot, lean.seq)
    assert parsed.raw == lean.raw and parsed.flags == lean.flags
    # byte for byte what the validating contract model writes for the same reading
    assert payload == dump_readings([parsed])


def test_lean_batch_payload_and_wire_text() -> None:
    payload = dump_payload([r.to_wire() for r in LEAN])
    assert parse_readings(payload) == [parse_readings(dump_payload([r.to_wire()]))[0] for r in LEAN]
    assert payload == dump_readings(parse_readings(payload))
    first = json.loads(dump_payload([LEAN[0].to_wire()]))
    assert list(first) == ["site", "device", "quantity", "value", "unit", "time", "gateway", "boot", "seq",
                           "raw", "flags"]
    assert first["time"] == "2026-06-01T12:00:00Z" and first["value"] == 10 and first["flags"] == ["counter_wrap"]
    assert json.loads(dump_payload([LEAN[1].to_wire()]))["time"] == "2026-06-01T12:00:00.000250Z"
    assert json.loads(dump_payload([LEAN[2].to_wire()]))["time"] == "2026-06-01T12:05:00Z"


def _all_profiles_site(profiles: ProfileLibrary) -> object:
    devices = []
    for i, name in enumerate(profiles.names()):
        protocol = profiles.get(name).protocol
        transport = ({"kind": "modbus-tcp", "host": "127.0.0.1", "port": 502, "unit_id": i + 1}
                     if protocol == "modbus" else {"kind": "serial", "port": f"/dev/ttyUSB{i}", "baud": 9600})
        devices.append({"id": f"dev-{name}", "profile": name, "transport": transport, "poll_interval_s": 30})
    return parse_site({"site": {"id": "plan-site", "jurisdiction": "ch133"}, "gateway_id": "gw-plan",
                       "devices": devices}, "test", profiles)


def test_plan_of_every_shipped_profile_round_trips_json(tmp_path: Path) -> None:
    profiles = ProfileLibrary()
    plan = compile_plan(_all_profiles_site(profiles), profiles)
    again = read_plan(write_plan(plan, tmp_path / "plan.json"))
    assert again == plan
    p = plan.profiles
    # 0.01 in per tip exactly; 0.2 mm = 0.2 / 25.4 in = 1/127 in exactly (1 in = 25.4 mm)
    assert p["tipping_bucket_modbus_counter"].counter.resolution_in == Fraction(1, 100)
    assert p["tipping_bucket_0_2mm_modbus_counter"].counter.resolution_in == Fraction(1, 127)
    assert p["tipping_bucket_0_2mm_modbus_counter"].counter.tip_resolution.depth_mm(5) == 1
    assert p["campbell_rainvue10"].counter.width_bits == 32 and p["campbell_rainvue10"].counter.unit == "{tip}"
    assert isinstance(again.profiles["campbell_rainvue10"].sdi12.values[1].quantity, str)  # int keys survive JSON
    # Y511 (sensors.md): floats at 0x2600/0x2602, little-endian bytes (DCBA), 2 registers each
    turb = next(pt for pt in p["yosemitech_y511"].modbus.points if pt.quantity == "turbidity")
    assert (turb.address, turb.type, turb.order, turb.count, turb.valid_range) == (0x2602, "float32", "DCBA", 2,
                                                                                   (0.0, 1000.0))
    assert [c.name for c in p["yosemitech_y511"].modbus.commands] == ["start_measurement", "brush"]
    cfg = load_site(REPO / "examples" / "site.yaml", profiles)
    example = compile_plan(cfg, profiles)
    assert GatewayPlan.from_json(example.to_json()) == example
    assert [d.transport.kind for d in example.devices] == ["modbus-tcp", "modbus-tcp", "modbus-rtu", "serial"]


def test_plan_file_errors_name_file_and_key(tmp_path: Path) -> None:
    profiles = ProfileLibrary()
    good = json.loads(compile_plan(load_site(REPO / "examples" / "site.yaml", profiles), profiles).to_json())
    with pytest.raises(PlanError, match="version 0"):
        GatewayPlan.from_json(json.dumps({**good, "version": 0}), "p.json")
    bad = json.loads(json.dumps(good))
    bad["devices"][1]["transport"]["kind"] = "carrier-pigeon"
    with pytest.raises(PlanError, match=r"p\.json: devices\.1\.transport\.kind"):
        GatewayPlan.from_json(json.dumps(bad), "p.json")
    bad = json.loads(json.dumps(good))
    bad["devices"][0]["poll_interval"] = 60
    with pytest.raises(PlanError, match=r"devices\.0: unknown keys \['poll_interval'\]"):
        GatewayPlan.from_json(json.dumps(bad), "p.json")
    bad = json.loads(json.dumps(good))
    del bad["profiles"]["maxbotix_hrxl"]
    with pytest.raises(PlanError, match="basin-level: profile 'maxbotix_hrxl' is not in the plan"):
        GatewayPlan.from_json(json.dumps(bad), "p.json")
    missing = tmp_path / "nope.json"
    run = subprocess.run([sys.executable, "-m", "stormwatch.gateway", "--plan", str(missing)],
                         capture_output=True, text=True, cwd=REPO, timeout=60)
    assert run.returncode == 2 and f"{missing}: cannot read" in run.stderr


def test_compile_rejects_a_quantity_the_contract_would_dead_letter(tmp_path: Path) -> None:
    quantity = "q" * 65  # the contract allows 64 characters (stormwatch/contract.py Reading.quantity)
    (tmp_path / "long_name_sensor.yaml").write_text(yaml.safe_dump({
        "model": "long_name_sensor", "manufacturer": "test", "description": "made up", "source": "this test",
        "protocol": "modbus", "modbus": {"points": [{"quantity": quantity, "unit": "1", "address": 0}]},
    }))
    profiles = ProfileLibrary(tmp_path)
    cfg = parse_site({"site": {"id": "s", "jurisdiction": "ch133"}, "devices": [
        {"id": "odd-1", "profile": "long_name_sensor", "transport": {"kind": "modbus-tcp", "host": "127.0.0.1"}}]},
        "test", profiles)
    with pytest.raises(PlanError, match=r"device odd-1 \(long_name_sensor\).*quantity"):
        compile_plan(cfg, profiles)


def _counter_site(site_id: str, port: int, poll_interval_s: float = 60) -> dict:
    return {"site": {"id": site_id, "jurisdiction": "ch133"}, "gateway_id": "gw-plan",
            "devices": [{"id": "rain-1", "profile": "tipping_bucket_modbus_counter", "poll_interval_s": poll_interval_s,
                         "transport": {"kind": "modbus-tcp", "host": "127.0.0.1", "port": port, "unit_id": 1}}]}


@pytest.mark.mosquitto
def test_gateway_from_a_plan_file_counts_tips_from_a_real_counter(mosquitto_server, tmp_path: Path) -> None:
    srv = RegisterServer(unit_ids=(1,)).start()
    counts = [1400, 1403, 1410]  # cumulative counter at the slots 0, 60, 120 s
    srv.dynamic[1] = lambda address, read_no: counts[min(read_no, 2)] if address == 0 else None
    site_id = f"plan-{uuid.uuid4().hex[:8]}"
    profiles = ProfileLibrary()
    cfg = parse_site(_counter_site(site_id, srv.port), "test", profiles)
    plan = read_plan(write_plan(compile_plan(cfg, profiles), tmp_path / "plan.json"))
    sub = Collector(mosquitto_server.port, topics.readings(site_id, "gw-plan"), f"sub-{site_id}")
    try:
        clock = ScenarioClock(sim_start=SIM_START, speed=600.0, wall_start=time.time() + 0.3)
        gw = Gateway.from_plan(plan, clock, mosquitto_server.url, tmp_path / "gw", confirm="broker")
        gw.run(until=SIM_START + timedelta(seconds=180))
        got = sorted(sub.wait_for(3), key=lambda r: r.seq)
    finally:
        sub.close()
        srv.stop()
    # first sample is the baseline (0 tips), then 1403 - 1400 = 3 and 1410 - 1403 = 7 tips
    assert [(r.value, r.raw, r.flags) for r in got] == [(0, 1400, ("counter_baseline",)), (3, 1403, ()),
                                                         (7, 1410, ())]
    assert all(type(r.value) is int and r.unit == "{tip}" and r.quantity == "rain_tips" for r in got)
    # stored rain describes itself: the lean process names the profile's counter resolution on each reading
    assert {r.tip_size for r in got} == {"0.01 in"}
    assert [r.time for r in got] == [SIM_START + timedelta(seconds=s) for s in (0, 60, 120)]
    assert {r.boot for r in got} == {gw.boot} and [r.seq for r in got] == [0, 1, 2]


@pytest.mark.mosquitto
def test_stormwatch_gateway_execs_the_lean_process(mosquitto_server, tmp_path: Path) -> None:
    srv = RegisterServer(unit_ids=(1,)).start()
    srv.registers[1][0] = 1420
    site_id = f"exec-{uuid.uuid4().hex[:8]}"
    site_path = tmp_path / "site.yaml"
    site_path.write_text(yaml.safe_dump(_counter_site(site_id, srv.port, poll_interval_s=1)))
    state = tmp_path / "gw"
    sub = Collector(mosquitto_server.port, topics.readings(site_id, "gw-plan"), f"sub-{site_id}")
    proc = subprocess.Popen(
        [sys.executable, "-m", "stormwatch", "gateway", "--site", str(site_path), "--broker", mosquitto_server.url,
         "--state-dir", str(state)],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env={k: v for k, v in os.environ.items() if not k.startswith("STORMWATCH_SIM_")},  # wall clock
    )
    try:
        def cmdline() -> str:
            return Path(f"/proc/{proc.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()

        wait_until(lambda: "--plan" in cmdline(), 30, "the exec of the lean process", every_s=0.1)
        assert f"-m stormwatch.gateway --plan {state / 'plan.json'}" in cmdline()  # same pid, the lean process
        got = sub.wait_for(1, timeout_s=20)  # wall clock, 1 s grid
        maps = Path(f"/proc/{proc.pid}/maps").read_text()
        assert "pydantic_core" not in maps and "_pydantic" not in maps
        assert got and got[0].raw == 1420 and got[0].flags == ("counter_baseline",)
        assert GatewayPlan.from_json((state / "plan.json").read_text()).site == site_id
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        sub.close()
        srv.stop()
    assert proc.returncode == 0, err.decode()[-2000:]


def test_the_plan_cannot_drift_from_the_models() -> None:
    """Every lean dataclass has exactly the fields of its pydantic twin, except the differences
    plan.TWINS names (and each named difference is still real): a field added on one side only fails
    here, so the lean gateway never silently drops a profile or site setting."""
    import dataclasses
    import importlib
    import typing

    from stormwatch.gateway import plan as plan_module

    lean_classes = {obj for obj in vars(plan_module).values() if dataclasses.is_dataclass(obj)
                    and isinstance(obj, type) and obj.__module__ == plan_module.__name__}
    assert lean_classes == set(plan_module.TWINS), "every plan dataclass names its pydantic twin in TWINS"
    problems = []
    for cls, (twin_path, not_carried, lean_only) in plan_module.TWINS.items():
        module, name = twin_path.rsplit(".", 1)
        model = getattr(importlib.import_module(module), name)
        lean_fields = {f.name for f in dataclasses.fields(cls)}
        model_fields = set(model.model_fields)
        for field in sorted(model_fields - lean_fields - not_carried):
            problems.append(f"{name}.{field} is not in {cls.__name__} (carry it, or name it in not_carried)")
        for field in sorted(lean_fields - set(lean_only) - model_fields - {f for f in lean_fields
                                                                          if hasattr(model, f)}):
            problems.append(f"{cls.__name__}.{field} has no twin in {name} (name its source in lean_only)")
        for field in sorted(not_carried - model_fields):
            problems.append(f"{cls.__name__}: not_carried names {field!r}, which {name} does not have")
        for field in sorted(set(lean_only) - lean_fields):
            problems.append(f"{cls.__name__}: lean_only names {field!r}, which it does not have")
        for f in dataclasses.fields(cls):  # shared defaults agree (a default changed on one side only)
            mf = model.model_fields.get(f.name)
            if mf is None or f.default is dataclasses.MISSING or mf.is_required():
                continue
            carried = plan_module._carry(typing.get_type_hints(cls)[f.name], mf.default)
            if carried != f.default:
                problems.append(f"{cls.__name__}.{f.name} default {f.default!r} != {name}.{f.name} {mf.default!r}")
    assert problems == []


def test_a_new_model_field_without_a_plan_field_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """The drift check itself: a field on the model side only is reported."""
    from pydantic import create_model

    from stormwatch import profiles as profiles_module
    from stormwatch.gateway import plan as plan_module

    grown = create_model("LevelSpec", __base__=profiles_module.LevelSpec, mount_angle_deg=(float, 0.0))
    monkeypatch.setattr(profiles_module, "LevelSpec", grown)
    with pytest.raises(AssertionError, match=r"LevelSpec.mount_angle_deg is not in LevelPlan"):
        test_the_plan_cannot_drift_from_the_models()
    assert plan_module.TWINS  # unchanged
