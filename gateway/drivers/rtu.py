"""Modbus RTU line integrity: every reply belongs to the request it answers.

An RTU frame carries a unit id and a function code but no transaction id, so a reply that
arrives late -- after its request timed out -- looks exactly like the answer to the next request
with the same unit id and byte count: two devices behind one adapter (unit 1, registers 0-9 and
100-109), the device answers the first read 0.31-0.5 s after a 0.3 s timeout, and the second read
would decode the first one's registers as its own. Three guards make that impossible: a line
that failed a transaction is drained until silent, nothing waiting is kept before a request, and a
reply must answer its request (unit, function, byte count).

The design: docs/gateway.md ("The modules", `gateway/drivers/rtu.py`).
"""

from __future__ import annotations

import time

import serial
from pymodbus.client import ModbusSerialClient
from pymodbus.framer import FramerType
from pymodbus.framer.rtu import FramerRTU

from stormwatch.gateway.drivers.replies import FUNCTION_CODES, ExpectedReply
from stormwatch.gateway.drivers.serial_bus import open_port

__all__ = ["DRAIN_MAX_WINDOWS", "FUNCTION_CODES", "ExpectedReply", "RtuClient", "describe", "drain", "reply_problem"]

#: Longest drain after a failed transaction, in reply windows (a babbling line is closed instead).
DRAIN_MAX_WINDOWS = 10


def describe(frame: bytes) -> str:
    """A short description of received bytes for logs: unit, function, byte count, CRC, hex."""
    if not frame:
        return "no bytes"
    head = f"{len(frame)} bytes"
    if len(frame) >= 2:
        head += f", unit {frame[0]} function 0x{frame[1]:02X}"
    if len(frame) >= 5:
        crc_ok = FramerRTU.check_CRC(frame[:-2], int.from_bytes(frame[-2:], "big"))
        head += f", byte count {frame[2]}" if frame[1] < 0x80 else ""
        head += ", one frame with a valid CRC" if crc_ok else ""
    shown = frame[:24].hex(" ")
    return f"{head}: {shown}{' ...' if len(frame) > 24 else ''}"


def reply_problem(received: bytes, expected: ExpectedReply) -> tuple[str, str] | None:
    """``(reason, detail)`` when ``received`` is not exactly one reply to the request, else ``None``.

    An exception reply (function | 0x80, 5 bytes) from the request's unit is a valid reply.
    """
    if len(received) == 5 and received[0] == expected.unit and received[1] == expected.function | 0x80:
        return None
    if not received:
        return ("wrong_length", "no bytes recorded for a decoded reply")
    if received[0] != expected.unit:
        return ("wrong_unit", f"expected unit {expected.unit}, got {describe(received)}")
    if len(received) < 2 or received[1] != expected.function:
        return ("wrong_function", f"expected function 0x{expected.function:02X}, got {describe(received)}")
    if expected.byte_count is not None and (len(received) < 3 or received[2] != expected.byte_count):
        return ("wrong_byte_count", f"expected byte count {expected.byte_count}, got {describe(received)}")
    if len(received) != expected.length:
        return ("wrong_length", f"expected one {expected.length}-byte frame, got {describe(received)}")
    return None


def drain(port: serial.Serial, quiet_s: float, max_s: float) -> tuple[bytes, bool]:
    """Read and keep everything arriving until the line has been silent for ``quiet_s``.

    Real time (line timing, not event time). Returns ``(bytes read, True)`` once silent, or
    ``(bytes read, False)`` when ``max_s`` passed without ``quiet_s`` of silence.

    Raises:
        serial.SerialException, OSError: the port failed while draining.
    """
    got = bytearray()
    start = last = time.monotonic()
    step = max(0.001, min(0.005, quiet_s / 4))
    while True:
        waiting = port.in_waiting
        if waiting:
            got += port.read(waiting)
            last = time.monotonic()
            continue
        now = time.monotonic()
        if now - last >= quiet_s:
            return bytes(got), True
        if now - start >= max_s:
            return bytes(got), False
        time.sleep(min(step, quiet_s - (now - last)))


class RtuClient(ModbusSerialClient):
    """pymodbus's RTU serial client, opened exclusively with the real reason on refusal, and
    recording every byte received since the last :meth:`start_transaction`.

    Args:
        port: device path or pyserial URL.
        baudrate, bytesize, parity, stopbits: line settings.
        timeout: the reply window (real seconds).
    """

    def __init__(self, port: str, *, baudrate: int, bytesize: int, parity: str, stopbits: int,
                 timeout: float) -> None:
        super().__init__(port, framer=FramerType.RTU, baudrate=baudrate, bytesize=bytesize, parity=parity,
                         stopbits=stopbits, timeout=timeout, retries=0)
        self.received = bytearray()

    @property
    def reply_window_s(self) -> float:
        """Seconds a reply may take (the client's timeout)."""
        return float(self.comm_params.timeout_connect)

    def connect(self) -> bool:
        """Open the port exclusively (no-op when open).

        Raises:
            stormwatch.gateway.drivers.serial_bus.PortOpenError: the port cannot be opened; the
                message is pyserial's reason (pymodbus's own ``connect`` logs it and returns False).
        """
        if self.socket is not None:
            return True
        p = self.comm_params
        port = open_port(p.host, timeout=p.timeout_connect, write_timeout=p.timeout_connect, bytesize=p.bytesize,
                         stopbits=p.stopbits, baudrate=p.baudrate, parity=p.parity)
        port.inter_byte_timeout = self.inter_byte_timeout
        self.socket = port
        return True

    def start_transaction(self) -> None:
        """Forget the bytes of the previous transaction."""
        self.received.clear()

    def recv(self, size: int | None) -> bytes:
        """pymodbus's read, recording what was read."""
        data: bytes = super().recv(size)
        self.received += data
        return data
