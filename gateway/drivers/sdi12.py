"""SDI-12 sensors through a serial SDI-12 adapter (pyserial), e.g. Campbell ClariVUE10, RainVUE10.

The adapter passes ASCII commands through (sensors.md "SDI-12"): a poll sends ``aM!`` (or
``aMn!``) and expects ``atttn`` -- ``ttt`` seconds until the data are ready, ``n`` values -- then
waits until the sensor's service request ``a<CR><LF>`` or ``ttt`` seconds have passed, and sends
``aD0!``, ``aD1!``... collecting ``+``/``-`` signed values until ``n`` arrived. Values are
indexed 0.. across the concatenated D answers; the profile maps indices to points.

The design: docs/gateway.md ("The modules", `gateway/drivers/sdi12.py`).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import serial

from stormwatch.codec import scale
from stormwatch.gateway.drivers import PointValue
from stormwatch.gateway.drivers.serial_bus import SerialBus
from stormwatch.gateway.errors import BadDataError, NoDataError, TransportError

if TYPE_CHECKING:
    from stormwatch.gateway.plan import ProfilePlan

log = logging.getLogger(__name__)

#: One SDI-12 value: sign, digits, optional decimals (SDI-12 v1.4 §4.4.7: up to 7 digits).
VALUE = re.compile(r"[+-]\d+(?:\.\d+)?")
#: Most D commands a measurement may need (aD0! .. aD9!).
MAX_D_COMMANDS = 10


def parse_values(body: str) -> list[str]:
    """The ``+``/``-`` signed values of a D answer body (after the address), as text.

    Raises:
        ValueError: the body has characters that are not values (``"+1.2x"``).
    """
    values = VALUE.findall(body)
    if "".join(values) != body:
        raise ValueError(f"not a list of +/- signed values: {body!r}")
    return values


class Sdi12Driver:
    """Polls one SDI-12 sensor on a shared adapter port.

    A measure command whose values include a ``mode: delta`` counter (RainVUE10: raw tips since
    the last measurement) has a side effect -- it resets that count -- so it is never sent again
    after a lost answer; the data of a measurement whose D answers were lost are read at the next
    poll, before the next measure command (they stay readable until then), and added to it; counts
    that cannot be recovered make the next count a gap (:attr:`PointValue.gap_before`).

    Args:
        device_id: the site's device id.
        profile: a ``protocol: sdi12`` profile.
        address: the sensor's SDI-12 address (the site's ``sdi12_address`` or the profile default).
        bus: the shared adapter port.
    """

    def __init__(self, device_id: str, profile: ProfilePlan, address: str, bus: SerialBus) -> None:
        if profile.sdi12 is None:
            raise ValueError(f"profile {profile.model!r} has no sdi12 section")
        self.device_id = device_id
        self.link_key = bus.key
        self.address = address
        self._spec = profile.sdi12
        self._bus = bus
        self._start = re.compile(rf"^{re.escape(address)}(\d{{3}})(\d{{1,2}})$")
        counter = profile.counter
        #: value indices the measure command resets (counts since the last measurement).
        self.resets = frozenset(
            i for i, spec in self._spec.values.items()
            if counter is not None and counter.mode == "delta" and spec.quantity == counter.quantity
        )
        self._unread: int | None = None  # value count of a measurement made but not read
        self._carried: dict[int, float] = {}  # counts of measurements read but not yet returned
        self._lost = False  # a reset count was lost: the next one starts after a gap

    def close(self) -> None:
        self._bus.close()

    def poll(self) -> list[PointValue]:
        """Measure and read. Raises TransportError/NoDataError/BadDataError."""
        with self._bus.lock:
            port = self._bus.open(self.device_id)
            try:
                if self._unread is not None:
                    self._recover(port, self._unread)
                texts = self._measure(port)
            except (serial.SerialException, OSError) as exc:
                self._bus.close()
                raise TransportError(self.device_id, f"{self._bus.settings.port}: I/O error {exc}") from exc
        try:
            values = self._values(texts)
        except BadDataError:
            self._lost = self._lost or bool(self.resets)  # the measurement reset counts no one will see
            raise
        self._carried.clear()
        self._lost = False
        return values

    # -- protocol -----------------------------------------------------------------------------

    def _measure(self, port: serial.Serial) -> list[str]:
        a = self.address
        command = f"{a}{self._spec.measure_command}!"
        try:
            # A measure command with a side effect is sent once: a resend would reset the count again.
            answer = self._command(port, command, lambda line: self._start.match(line) is not None,
                                   attempts=1 if self.resets else None)
        except (NoDataError, BadDataError):
            if self.resets:
                self._lost = True
                log.warning("%s: %s got no well-formed answer and is not sent again (it resets the tip count): "
                            "the interval up to the next measurement is a data gap", self.device_id, command)
            raise
        m = self._start.match(answer)
        assert m is not None
        wait_s, count = int(m.group(1)), int(m.group(2))
        if wait_s > self._spec.max_wait_s:
            raise BadDataError(self.device_id, f"{command} announced {wait_s} s, more than {self._spec.max_wait_s} s")
        if count == 0:
            raise BadDataError(self.device_id, f"{command} announced 0 values (sensor not measuring)")
        if self.resets:
            self._unread = count
        if wait_s > 0:
            self._await_service_request(port, wait_s)
        values = self._read_data(port, count)
        self._unread = None
        return values

    def _read_data(self, port: serial.Serial, count: int) -> list[str]:
        """``aD0!``, ``aD1!``... until ``count`` values arrived; each D command retried (no side effect)."""
        a = self.address
        values: list[str] = []
        for i in range(MAX_D_COMMANDS):
            if len(values) >= count:
                break
            d = f"{a}D{i}!"
            line = self._command(port, d, self._is_data)
            got = parse_values(line[len(a):])
            if not got:
                raise BadDataError(self.device_id, f"{d} answered no values ({len(values)} of {count} read)")
            values.extend(got)
        if len(values) < count:
            raise BadDataError(self.device_id, f"only {len(values)} of {count} values after aD0!..aD9!")
        return values[:count]

    def _is_data(self, line: str) -> bool:
        """A D answer: this address, then only signed values (anything else is garbled: asked again)."""
        if not line.startswith(self.address):
            return False
        try:
            parse_values(line[len(self.address):])
        except ValueError:
            return False
        return True

    def _recover(self, port: serial.Serial, count: int) -> None:
        """Read the unread measurement's data (kept by the sensor until the next measure command).

        Raises:
            NoDataError: the sensor is silent; its data stay unread (no measure command is sent).
        """
        try:
            texts = self._read_data(port, count)
        except BadDataError as exc:
            self._unread = None
            self._lost = True
            log.warning("%s: the data of the last measurement are gone (%s): the interval is a data gap",
                        self.device_id, exc)
            return
        self._unread = None
        for i in self.resets:
            if i < len(texts):
                self._carried[i] = self._carried.get(i, 0.0) + float(texts[i])
        log.info("%s: recovered the data of a measurement whose answer was lost (%s)", self.device_id,
                 ", ".join(f"value {i}: {texts[i]}" for i in sorted(self.resets) if i < len(texts)))

    def _await_service_request(self, port: serial.Serial, wait_s: int) -> None:
        """Wait up to ``wait_s`` (real) seconds for ``a<CR><LF>``; other lines are ignored."""
        deadline = time.monotonic() + wait_s
        buf = b""
        while time.monotonic() < deadline:
            chunk = port.read(max(1, port.in_waiting))
            buf += chunk
            while b"\r\n" in buf:
                line, buf = buf.split(b"\r\n", 1)
                if line.decode("ascii", errors="replace").strip() == self.address:
                    return
        log.debug("%s: no service request within %d s; reading anyway", self.device_id, wait_s)

    def _command(self, port: serial.Serial, command: str, accept: Callable[[str], bool],
                 attempts: int | None = None) -> str:
        """Send ``command``, return the first answer line ``accept`` takes; retry on silence or a
        garbled answer, ``attempts`` times in all (default: the profile's ``retries`` + 1)."""
        attempts = self._spec.retries + 1 if attempts is None else attempts
        last = ""
        for attempt in range(1, attempts + 1):
            port.reset_input_buffer()
            port.write(command.encode("ascii"))
            port.flush()
            line = self._read_line(port, command)
            if line is not None and accept(line):
                if attempt > 1:
                    log.debug("%s: %s answered on attempt %d", self.device_id, command, attempt)
                return line
            last = "no answer" if line is None else f"unexpected answer {line!r}"
            log.debug("%s: %s attempt %d/%d: %s", self.device_id, command, attempt, attempts, last)
        if last == "no answer":
            raise NoDataError(self.device_id, f"{command}: no answer after {attempts} attempts")
        raise BadDataError(self.device_id, f"{command}: {last} after {attempts} attempts")

    def _read_line(self, port: serial.Serial, command: str) -> str | None:
        """The next CR LF terminated line within ``response_timeout_s``, skipping an adapter echo."""
        deadline = time.monotonic() + self._spec.response_timeout_s
        buf = b""
        while time.monotonic() < deadline:
            chunk = port.read(max(1, port.in_waiting))
            if not chunk:
                continue
            buf += chunk
            while b"\r\n" in buf:
                raw, buf = buf.split(b"\r\n", 1)
                line: str = raw.decode("ascii", errors="replace").strip()
                if line and line != command:  # some adapters echo the command
                    return line
        return None

    def _values(self, texts: list[str]) -> list[PointValue]:
        out: list[PointValue] = []
        for index, spec in sorted(self._spec.values.items()):
            if index >= len(texts):
                raise BadDataError(self.device_id, f"value index {index} missing: sensor sent {len(texts)} values")
            number = float(texts[index])
            reset = index in self.resets
            if reset:
                number += self._carried.get(index, 0.0)  # counts of a measurement recovered this poll
            out.append(
                PointValue(
                    spec.quantity, spec.unit, texts[index], number, scale(number, spec.scale, spec.offset),
                    spec.valid_range, spec.error_codes, spec.qc, gap_before=reset and self._lost,
                )
            )
        return out
