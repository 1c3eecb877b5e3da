"""One address, one device: ``stormwatch gateway --check`` refuses two devices that one request
reaches -- two SDI-12 sensors at one address on one port, two Modbus RTU devices with one unit id on
one line, two Modbus TCP devices at one host, port and unit id -- with one line naming both
(failure-kinds.md, "Two devices at one address"; docs/gateway.md, "One address, one device")."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from stormwatch.app.cli import app


def _check(tmp_path: Path, devices: list[dict]) -> tuple[int, list[str], Path]:
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump({"site": {"id": "pond", "jurisdiction": "ch133"}, "gateway_id": "gw-1",
                                    "devices": devices}, sort_keys=False))
    result = CliRunner().invoke(app, ["gateway", "--check", "--site", str(path)])
    assert "Traceback" not in result.output
    return result.exit_code, result.output.splitlines(), path


def _sdi12(dev_id: str, port: str, address: str | None) -> dict:
    dev = {"id": dev_id, "profile": "campbell_clarivue10", "transport": {"kind": "serial", "port": port}}
    return dev if address is None else {**dev, "sdi12_address": address}


def _rtu(dev_id: str, port: str, unit: int) -> dict:
    return {"id": dev_id, "profile": "yosemitech_y511",
            "transport": {"kind": "modbus-rtu", "port": port, "unit_id": unit}}


def _tcp(dev_id: str, host: str, port: int, unit: int) -> dict:
    return {"id": dev_id, "profile": "keller_acculevel",
            "transport": {"kind": "modbus-tcp", "host": host, "port": port, "unit_id": unit}}


@pytest.mark.parametrize(("devices", "why"), [
    # the second sensor's address is the profile's default "0", like the first one's
    ([_sdi12("turb-up", "/dev/ttyUSB0", "0"), _sdi12("turb-down", "/dev/ttyUSB0", None)],
     "devices.1.sdi12_address: devices 'turb-up' and 'turb-down' are both SDI-12 address '0' on port "
     "/dev/ttyUSB0"),
    ([_rtu("y511-a", "/dev/ttyUSB1", 3), _rtu("y511-b", "/dev/ttyUSB1", 3)],
     "devices.1.transport.unit_id: devices 'y511-a' and 'y511-b' are both Modbus unit id 3 on port /dev/ttyUSB1"),
    ([_tcp("level-1", "10.0.0.5", 502, 1), _tcp("level-2", "10.0.0.5", 502, 1)],
     "devices.1.transport.unit_id: devices 'level-1' and 'level-2' are both unit id 1 on Modbus TCP endpoint "
     "10.0.0.5:502"),
], ids=["sdi12", "modbus-rtu", "modbus-tcp"])
def test_two_devices_at_one_address_are_refused_naming_both(tmp_path: Path, devices: list[dict], why: str) -> None:
    code, lines, path = _check(tmp_path, devices)
    assert code == 2
    assert len(lines) == 1
    assert lines[0].startswith(f"error: {path}: {why}: one address, one device"), lines[0]
    assert "(line " in lines[0]


def test_distinct_addresses_pass(tmp_path: Path) -> None:
    code, lines, _ = _check(tmp_path, [
        _sdi12("turb-up", "/dev/ttyUSB0", "0"), _sdi12("turb-down", "/dev/ttyUSB0", "1"),
        _sdi12("turb-3", "/dev/ttyUSB3", "0"),
        _rtu("y511-a", "/dev/ttyUSB1", 3), _rtu("y511-b", "/dev/ttyUSB1", 4), _rtu("y511-c", "/dev/ttyUSB2", 3),
        _tcp("level-1", "10.0.0.5", 502, 1), _tcp("level-2", "10.0.0.5", 502, 2), _tcp("level-3", "10.0.0.5", 503, 1),
        _tcp("level-4", "10.0.0.6", 502, 1),
    ])
    assert code == 0, lines
    assert len(lines) == 1 and lines[0].startswith("ok: site pond")


def test_one_port_carries_one_protocol(tmp_path: Path) -> None:
    code, lines, path = _check(tmp_path, [_rtu("y511-a", "/dev/ttyUSB1", 3), _sdi12("turb", "/dev/ttyUSB1", "3")])
    assert code == 2 and len(lines) == 1
    assert lines[0].startswith(f"error: {path}: devices.1.transport.port: devices 'y511-a' and 'turb' share port "
                               "/dev/ttyUSB1, which carries one bus of one protocol")
