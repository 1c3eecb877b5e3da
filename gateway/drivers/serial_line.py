"""Serial text-line devices (pyserial), e.g. MaxBotix HRXL ``R####\\r`` (sensors.md).

A poll discards whatever is buffered (stale lines from before this poll, and the partial line the
buffer may start in the middle of), then reads until the first fresh complete line matching the
profile pattern -- the latest line the device has sent. Named groups of the pattern become points
(scale/offset via :func:`stormwatch.codec.scale`).

The port is opened exclusively (:func:`stormwatch.gateway.drivers.serial_bus.open_port`): a second
program reading the same sensor is refused instead of stealing part of its lines.

The design: docs/gateway.md ("The modules", `gateway/drivers/serial_line.py`).
"""

from __future__ import annotations

import logging
import re
import time
from typing import TYPE_CHECKING

import serial

from stormwatch.codec import scale
from stormwatch.gateway.drivers import PointValue
from stormwatch.gateway.drivers.serial_bus import PortOpenError, open_port
from stormwatch.gateway.errors import BadDataError, NoDataError, TransportError

if TYPE_CHECKING:
    from stormwatch.gateway.plan import ProfilePlan, SerialLinePlan, SerialLink

log = logging.getLogger(__name__)


def line_values(device_id: str, spec: SerialLinePlan, pattern: re.Pattern[str], line: str) -> list[PointValue]:
    """The point values of one line that matches ``pattern`` (the profile's, compiled): a value per
    named group (scale/offset applied), ``raw`` the line itself.

    Raises:
        BadDataError: the line does not match, or a field is not a number.
    """
    match = pattern.match(line)
    if match is None:
        raise BadDataError(device_id, f"line {line!r} does not match {spec.pattern!r}")
    out: list[PointValue] = []
    for group, field in spec.fields.items():
        text = match.group(group)
        try:
            number = float(text)
        except (TypeError, ValueError) as exc:
            raise BadDataError(device_id, f"field {group}={text!r} of line {line!r} is not a number") from exc
        out.append(PointValue(field.quantity, field.unit, line, number, scale(number, field.scale, field.offset),
                              field.valid_range, field.error_codes, field.qc))
    return out


class SerialLineDriver:
    """Polls one line-oriented serial device.

    Args:
        device_id: the site's device id.
        profile: a ``protocol: serial_line`` profile.
        transport: the site's ``kind: serial`` transport (port, baud, timeout_s).
    """

    def __init__(self, device_id: str, profile: ProfilePlan, transport: SerialLink) -> None:
        if profile.serial_line is None:
            raise ValueError(f"profile {profile.model!r} has no serial_line section")
        self.device_id = device_id
        self.link_key = f"serial://{transport.port}"
        self._spec = profile.serial_line
        self._transport = transport
        self._pattern = re.compile(self._spec.pattern)
        self._terminator = self._spec.terminator.encode("ascii")
        self._port: serial.Serial | None = None

    def _open(self) -> serial.Serial:
        if self._port is None:
            try:
                self._port = open_port(
                    self._transport.port,
                    baudrate=self._transport.baud or self._spec.baud,
                    bytesize=self._spec.bytesize,
                    parity=self._spec.parity,
                    stopbits=self._spec.stopbits,
                    timeout=min(0.05, self._transport.timeout_s),
                )
            except PortOpenError as exc:
                raise TransportError(self.device_id, f"cannot open {self._transport.port}: {exc}") from exc
        return self._port

    def close(self) -> None:
        if self._port is not None:
            try:
                self._port.close()
            except (serial.SerialException, OSError):
                pass
            self._port = None

    def poll(self) -> list[PointValue]:
        """Read the latest complete line. Raises TransportError/NoDataError/BadDataError."""
        port = self._open()
        try:
            line, seen = self._fresh_line(port)
        except (serial.SerialException, OSError) as exc:
            self.close()
            raise TransportError(self.device_id, f"{self._transport.port}: I/O error {exc}") from exc
        if line is None:
            self.close()
            if not seen:
                raise NoDataError(self.device_id, f"{self._transport.port}: no data in {self._transport.timeout_s} s")
            raise BadDataError(
                self.device_id,
                f"{self._transport.port}: no line matching {self._spec.pattern!r} in {self._transport.timeout_s} s"
                f" (last bytes {seen[-40:]!r})",
            )
        return self._values(line)

    def _fresh_line(self, port: serial.Serial) -> tuple[str | None, bytes]:
        port.reset_input_buffer()  # stale lines from before this poll
        deadline = time.monotonic() + self._transport.timeout_s
        buf = b""
        seen = b""
        synced = False  # the first fragment may be the tail of a line: discard it
        while time.monotonic() < deadline:
            chunk = port.read(max(1, port.in_waiting))
            if not chunk:
                continue
            seen += chunk
            buf += chunk
            while self._terminator in buf:
                raw_line, buf = buf.split(self._terminator, 1)
                if not synced:
                    synced = True
                    continue
                text = raw_line.decode("ascii", errors="replace").strip()
                if self._pattern.match(text):
                    return text, seen
                log.debug("%s: ignoring line %r", self.device_id, text)
        return None, seen

    def _values(self, line: str) -> list[PointValue]:
        return line_values(self.device_id, self._spec, self._pattern, line)
