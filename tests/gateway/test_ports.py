"""`gateway --check` says whether each serial port is there; `--check --ports` refuses a site
whose port is not, naming the device, the path and the line."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from stormwatch.app.cli import app
from stormwatch.gateway.ports import port_state
from tests.demo_support import example_doc


@pytest.fixture
def pty(tmp_path: Path) -> Iterator[Path]:
    """A pty's slave side behind a link, as the simulator (or udev's /dev/serial/by-id) makes one."""
    master, slave = os.openpty()
    link = tmp_path / "ttyLINK"
    link.symlink_to(os.ttyname(slave))
    yield link
    os.close(master)
    os.close(slave)


def test_port_states(tmp_path: Path, pty: Path) -> None:
    (tmp_path / "file").write_text("")
    (tmp_path / "dangling").symlink_to(tmp_path / "unplugged")
    assert port_state(str(pty)) is None
    assert port_state(str(tmp_path / "nope")) == "no such port"
    assert port_state(str(tmp_path / "dangling")).startswith("a link to nothing (the adapter unplugged")  # type: ignore[union-attr]
    assert port_state(str(tmp_path / "file")) == "not a serial port (not a character device)"
    assert port_state(str(tmp_path)) == "not a serial port (a directory)"
    assert port_state(str(tmp_path / "file" / "x")) == "Not a directory"


def _site(tmp_path: Path, turb_down: str, basin: str) -> Path:
    doc = example_doc()
    doc["devices"][2]["transport"]["port"] = turb_down
    doc["devices"][3]["transport"]["port"] = basin
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_check_names_a_missing_port_and_ports_refuses_it(tmp_path: Path, pty: Path) -> None:
    path = _site(tmp_path, "/dev/ttyNOPE", str(pty))
    lines = path.read_text().splitlines()
    line = next(i for i, t in enumerate(lines, 1) if "/dev/ttyNOPE" in t)
    desk = CliRunner().invoke(app, ["gateway", "--check", "--site", str(path)], catch_exceptions=False)
    assert desk.exit_code == 0, desk.output
    assert desk.output.splitlines() == [
        "ok: site riverside-commons, gateway gw-riverside-1, 4 devices: rain-1 (tipping_bucket_modbus_counter "
        "via modbus-tcp), turb-up (yosemitech_y511 via modbus-tcp), turb-down (yosemitech_y511 via modbus-rtu; "
        "port /dev/ttyNOPE: no such port here), basin-level (maxbotix_hrxl via serial) -- 1 serial port not "
        "usable here (on the gateway box, add --ports to refuse the site for that)"]
    box = CliRunner().invoke(app, ["gateway", "--check", "--ports", "--site", str(path)], catch_exceptions=False)
    assert box.exit_code == 2
    assert box.output == (f"error: {path}: devices.2.transport.port: device 'turb-down': port /dev/ttyNOPE: no such "
                          f"port (line {line}) (plug the adapter in, or correct the path)\n")


def test_every_port_there_passes_ports(tmp_path: Path, pty: Path) -> None:
    master, slave = os.openpty()  # the basin sensor's own port (one port, one protocol)
    try:
        path = _site(tmp_path, str(pty), os.ttyname(slave))
        result = CliRunner().invoke(app, ["gateway", "--check", "--ports", "--site", str(path)],
                                    catch_exceptions=False)
    finally:
        os.close(master)
        os.close(slave)
    assert result.exit_code == 0, result.output
    assert "here" not in result.output and result.output.startswith("ok: site riverside-commons")


def test_ports_needs_check(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["gateway", "--ports", "--site", str(tmp_path / "site.yaml")])
    assert result.exit_code == 2
    assert result.output.startswith("error: --ports needs --check")
