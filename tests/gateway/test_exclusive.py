"""Issue 19 item 2: every serial transport opens its port exclusively, and a refused open says why.

On real pseudo-terminals, against another *process* (a Python child running pyserial, like a
second gateway or a technician's tool opening the port exclusively):

* while the gateway's serial-line, SDI-12 and Modbus RTU transports hold their port, the other
  program's exclusive open is refused (before: serial-line and SDI-12 shared the port silently,
  each reader getting part of the byte stream);
* while the other program holds it, the gateway's open fails with a TransportError naming the
  real reason (``Could not exclusively lock port ...: the port is in use by another program``;
  before: RTU said only ``cannot connect``), and succeeds once the other program lets go.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest

from stormwatch.config import ModbusRtu, Serial
from stormwatch.gateway.drivers.modbus import ModbusLink, client_factory, rtu_frame_gap_s
from stormwatch.gateway.drivers.serial_bus import PortSettings, SerialBus
from stormwatch.gateway.drivers.serial_line import SerialLineDriver
from stormwatch.gateway.errors import TransportError
from stormwatch.profiles import ProfileLibrary
from stormwatch.simulators.pty import PtyPair

OTHER_PROGRAM = """
import sys, serial
try:
    port = serial.Serial(sys.argv[1], exclusive=True)
except serial.SerialException as exc:
    print("refused", exc, flush=True)
    sys.exit(3)
print("holding", flush=True)
sys.stdin.read()
"""


class OtherProgram:
    """A child process that opens ``path`` exclusively and holds it until :meth:`release`."""

    def __init__(self, path: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", OTHER_PROGRAM, path], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.status = self.proc.stdout.readline().strip()

    def release(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(10)


@pytest.fixture()
def pty() -> Iterator[PtyPair]:
    pair = PtyPair()
    yield pair
    pair.close()


def _serial_line(path: str) -> tuple[Callable[[], object], Callable[[], None]]:
    driver = SerialLineDriver("basin-level", ProfileLibrary().get("maxbotix_hrxl"),
                              Serial(kind="serial", port=path, timeout_s=0.2))
    return driver._open, driver.close  # opening is what is under test (a poll needs a sensor)


def _sdi12(path: str) -> tuple[Callable[[], object], Callable[[], None]]:
    bus = SerialBus(f"serial://{path}", PortSettings(path, 9600))
    return lambda: bus.open("turb-sdi"), bus.close


def _rtu(path: str) -> tuple[Callable[[], object], Callable[[], None]]:
    link = ModbusLink(f"modbus-rtu://{path}", client_factory(ModbusRtu(kind="modbus-rtu", port=path, timeout_s=0.2)),
                      frame_gap_s=rtu_frame_gap_s(9600))
    return lambda: link.client("turb-down"), link.close


TRANSPORTS = {"serial-line": _serial_line, "sdi12": _sdi12, "modbus-rtu": _rtu}


@pytest.mark.parametrize("kind", sorted(TRANSPORTS))
def test_the_gateway_holds_its_port_exclusively(pty: PtyPair, kind: str) -> None:
    open_, close = TRANSPORTS[kind](pty.slave_path)
    open_()
    try:
        other = OtherProgram(pty.slave_path)
        assert other.status.startswith("refused") and "Could not exclusively lock port" in other.status
        assert other.release() == 3
    finally:
        close()
    other = OtherProgram(pty.slave_path)  # closed: the port is free again
    try:
        assert other.status == "holding"
    finally:
        assert other.release() == 0


@pytest.mark.parametrize("kind", sorted(TRANSPORTS))
def test_a_refused_open_names_the_reason(pty: PtyPair, kind: str) -> None:
    open_, close = TRANSPORTS[kind](pty.slave_path)
    other = OtherProgram(pty.slave_path)
    assert other.status == "holding"
    try:
        with pytest.raises(TransportError) as err:
            open_()
        message = str(err.value)
        assert f"Could not exclusively lock port {pty.slave_path}" in message
        assert "the port is in use by another program" in message
    finally:
        other.release()
    try:
        open_()  # the other program let go: the next attempt opens
    finally:
        close()


def test_a_missing_port_names_the_reason(tmp_path) -> None:
    path = str(tmp_path / "ttyUSB9")
    for kind in sorted(TRANSPORTS):
        open_, close = TRANSPORTS[kind](path)
        with pytest.raises(TransportError, match="No such file or directory"):
            open_()
        close()
