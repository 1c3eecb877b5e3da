"""Modbus TCP and RTU driver (pymodbus 3.16 synchronous clients).

* :class:`ModbusLink` is one connection -- a TCP endpoint or one RS-485 serial line -- shared by
  every device on it, with ONE lock: a device's commands and reads run under the lock as one
  transaction, so two devices on one bus never interleave frames.
* :class:`ModbusDriver` polls one device: the profile's commands that are due (``every_n_polls``
  0 = once after each (re)connect, n = every n-th poll, the first poll included; ``delay_s`` is
  waited in CLOCK time), then reads each run of contiguous points of one table in one request and
  decodes every point through :func:`stormwatch.codec.decode_point`.

The design: docs/gateway.md ("The modules", `gateway/drivers/modbus.py`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pymodbus.client import ModbusTcpClient
from pymodbus.client.base import ModbusBaseSyncClient
from pymodbus.exceptions import ModbusException

from stormwatch.clock import Clock
from stormwatch.codec import DecodeError, decode_point, scale
from stormwatch.gateway.drivers import PointValue
from stormwatch.gateway.drivers.replies import ExpectedReply
from stormwatch.gateway.errors import BadDataError, DeviceReplyError, TransportError

if TYPE_CHECKING:
    from stormwatch.gateway.drivers.rtu import RtuClient
    from stormwatch.gateway.plan import CommandPlan, ModbusRtuLink, ModbusTcpLink, PointPlan, ProfilePlan

log = logging.getLogger(__name__)

#: Most registers one read request may ask for (Modbus application protocol, function 0x03).
MAX_REGISTERS_PER_READ = 125


def link_key(transport: ModbusTcpLink | ModbusRtuLink) -> str:
    """Devices with the same key share one connection and one lock."""
    if transport.kind == "modbus-tcp":
        return f"modbus-tcp://{transport.host}:{transport.port}"
    return f"modbus-rtu://{transport.port}"


def rtu_frame_gap_s(baud: int) -> float:
    """Silent interval between RTU frames: 3.5 characters of 11 bits, or 1.75 ms above 19200 baud.

    Source: Modbus over Serial Line Specification v1.02 §2.5.1.1. Example: 9600 baud → 4.01 ms.
    """
    if baud > 19200:
        return 0.00175
    return 3.5 * 11.0 / baud


def client_factory(transport: ModbusTcpLink | ModbusRtuLink) -> Callable[[], ModbusBaseSyncClient]:
    """A function building the (unconnected) pymodbus client for ``transport``.

    ``retries=0``: the gateway retries at the next poll slot with backoff instead of blocking
    the bus with immediate retries. ``transport``: the plan's link or the site's pydantic
    transport (same attributes).
    """
    if transport.kind == "modbus-tcp":
        return lambda: ModbusTcpClient(
            transport.host, port=transport.port, timeout=transport.timeout_s, retries=0
        )
    from stormwatch.gateway.drivers.rtu import RtuClient  # the serial stack only for a serial line

    return lambda: RtuClient(
        transport.port,
        baudrate=transport.baud,
        bytesize=8,
        parity=transport.parity,
        stopbits=transport.stopbits,
        timeout=transport.timeout_s,
    )


class ModbusLink:
    """One Modbus connection (TCP endpoint or serial line) shared by its devices.

    Attributes:
        key: see :func:`link_key`.
        lock: held by a driver for a whole poll (commands + reads).
        generation: increments on every successful connect (drivers re-run once-commands).
        frame_gap_s: RTU inter-frame silence (0 for TCP).
        discarded: RTU replies/bytes discarded, by reason (:mod:`stormwatch.gateway.drivers.rtu`).
    """

    def __init__(self, key: str, factory: Callable[[], ModbusBaseSyncClient], frame_gap_s: float = 0.0) -> None:
        self.key = key
        self.lock = threading.RLock()
        self.generation = 0
        self.frame_gap_s = frame_gap_s
        self.discarded: Counter[str] = Counter()
        self._factory = factory
        self._client: ModbusBaseSyncClient | None = None
        self._last_frame_end = 0.0
        self._request = ""
        self._expected: ExpectedReply | None = None

    def before_request(self, what: str = "", expected: ExpectedReply | None = None) -> None:
        """Before sending request ``what`` (for logs), whose reply should be ``expected``: wait out
        the inter-frame silence since the last frame, then discard whatever is already waiting
        (RTU; a no-op for TCP)."""
        self._request = what
        self._expected = expected
        if self.frame_gap_s <= 0:
            return
        wait = self._last_frame_end + self.frame_gap_s - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        client = self._rtu()
        if client is not None:
            from stormwatch.gateway.drivers.rtu import DRAIN_MAX_WINDOWS, describe, drain

            port = client.socket
            if port is not None and port.in_waiting:
                stale, _ = drain(port, self.frame_gap_s, client.reply_window_s * DRAIN_MAX_WINDOWS)
                self._discard("late_reply", f"{describe(stale)} arrived with no request outstanding, "
                                            f"before {what}")
            client.start_transaction()

    def after_request(self) -> None:
        """Record the end of a transaction (the reply's last byte, or the timeout)."""
        self._last_frame_end = time.monotonic()

    def verify_reply(self, device: str, expected: ExpectedReply, what: str) -> None:
        """Check that the bytes of the transaction just done are exactly one reply to it (RTU).

        Raises:
            BadDataError: the reply was discarded (counted by reason, logged; the line drained).
        """
        client = self._rtu()
        if client is None:
            return
        from stormwatch.gateway.drivers.rtu import reply_problem

        problem = reply_problem(bytes(client.received), expected)
        if problem is None:
            return
        reason, detail = problem
        self._discard(reason, f"reply to {what} of {device}: {detail}")
        self._drain_after_failure(client, what)
        raise BadDataError(device, f"{what}: reply discarded ({reason}): {detail}")

    def failed(self, device: str) -> str:
        """A transaction failed (timeout, garbled or refused reply, I/O error): drain the line until
        it has been silent for the reply window (RTU: a late reply must not meet the next request),
        then close the connection; the next :meth:`client` call reopens it. Call with :attr:`lock` held.

        Returns:
            ``""``, or why bytes received in the failed transaction were discarded (RTU: e.g. a
            frame of another unit that pymodbus skipped, swallowing the reply behind it), for the
            caller's error message.
        """
        client = self._rtu()
        why = ""
        if client is not None:
            import serial

            from stormwatch.gateway.drivers.rtu import describe, reply_problem

            what = self._request or f"a request of {device}"
            if client.received:
                problem = None if self._expected is None else reply_problem(bytes(client.received), self._expected)
                reason, detail = problem or ("wrong_length", f"an incomplete or garbled reply: "
                                                             f"{describe(bytes(client.received))}")
                self._discard(reason, f"reply to {what} of {device}: {detail}")
                why = f"reply discarded ({reason}): {detail}"
                client.start_transaction()
            if client.socket is not None:
                try:
                    self._drain_after_failure(client, what)
                except (serial.SerialException, OSError) as exc:
                    log.debug("%s: draining after a failure: %s", self.key, exc)
        self.close()
        return why

    def _rtu(self) -> RtuClient | None:
        """The connected client when it is a serial line's (RTU): the TCP path never loads the serial stack."""
        client = self._client
        if client is None or isinstance(client, ModbusTcpClient):
            return None
        from stormwatch.gateway.drivers.rtu import RtuClient

        return client if isinstance(client, RtuClient) else None

    def _drain_after_failure(self, client: RtuClient, what: str) -> None:
        from stormwatch.gateway.drivers.rtu import DRAIN_MAX_WINDOWS, describe, drain

        port = client.socket
        if port is None:
            return
        window = max(client.reply_window_s, self.frame_gap_s)
        late, quiet = drain(port, window, window * DRAIN_MAX_WINDOWS)
        self._last_frame_end = time.monotonic()
        if late:
            self._discard("late_reply", f"{describe(late)} arrived after the {client.reply_window_s:g} s window "
                                        f"of {what}")
        if not quiet:
            log.warning("%s: the line did not fall silent for %.3g s within %.3g s after %s; reopening the port",
                        self.key, window, window * DRAIN_MAX_WINDOWS, what)
            self.close()

    def _discard(self, reason: str, detail: str) -> None:
        self.discarded[reason] += 1
        n = self.discarded[reason]
        level = logging.WARNING if n == 1 else logging.DEBUG
        log.log(level, "%s: discarded (%s, %d on this line): %s", self.key, reason, n, detail)

    def client(self, device: str) -> ModbusBaseSyncClient:
        """The connected client, connecting first if needed. Call with :attr:`lock` held.

        Raises:
            TransportError: the connection cannot be opened (the reason named: for a serial port
                e.g. ``Could not exclusively lock port ...``).
        """
        if self._client is None:
            client = self._factory()
            try:
                ok = client.connect()
            except (ModbusException, OSError) as exc:
                client.close()
                raise TransportError(device, f"cannot connect to {self.key}: {exc}") from exc
            if not ok:
                client.close()
                raise TransportError(device, f"cannot connect to {self.key}")
            self._client = client
            self.generation += 1
            log.debug("connected to %s (generation %d)", self.key, self.generation)
        return self._client

    def close(self) -> None:
        """Close the connection; the next :meth:`client` call reopens it."""
        with self.lock:
            if self._client is not None:
                try:
                    self._client.close()
                finally:
                    self._client = None


@dataclass(frozen=True)
class _Block:
    table: str
    address: int
    count: int
    points: tuple[PointPlan, ...]


def plan_reads(points: Sequence[PointPlan]) -> list[_Block]:
    """Group points into read requests: contiguous points of one table, ≤ 125 registers each."""
    blocks: list[_Block] = []
    for point in sorted(points, key=lambda p: (p.table, p.address)):
        last = blocks[-1] if blocks else None
        if (
            last is not None
            and last.table == point.table
            and point.address == last.address + last.count
            and last.count + point.count <= MAX_REGISTERS_PER_READ
        ):
            blocks[-1] = _Block(last.table, last.address, last.count + point.count, (*last.points, point))
        else:
            blocks.append(_Block(point.table, point.address, point.count, (point,)))
    return blocks


def decode_block(device_id: str, block: _Block, words: list[int]) -> list[PointValue]:
    """The point values of one read block from its register words (or bits), as a poll returns them.

    ``raw`` is the register value of a one-register point, the list of words of a wider one.

    Raises:
        BadDataError: words that do not decode as the profile says.
    """
    out: list[PointValue] = []
    for point in block.points:
        start = point.address - block.address
        chunk = words[start : start + point.count]
        if block.table in ("coil", "discrete"):
            number: int | float = chunk[0]
            value = scale(number, point.scale, point.offset)
        else:
            try:
                number, value = decode_point(point, chunk)
            except DecodeError as exc:
                raise BadDataError(device_id, f"{point.quantity} at 0x{point.address:04X}: {exc}") from exc
        raw: list[int] | int | float = number if point.count == 1 else list(chunk)
        out.append(PointValue(point.quantity, point.unit, raw, number, value, point.valid_range, point.error_codes,
                              point.qc))
    return out


class ModbusDriver:
    """Polls one Modbus device on a shared :class:`ModbusLink`.

    Args:
        device_id: the site's device id (for errors and logs).
        profile: a ``protocol: modbus`` profile (:class:`stormwatch.gateway.plan.ProfilePlan` or the pydantic
            ``DeviceProfile``).
        unit_id: Modbus device id (slave address) on the link.
        link: the shared connection.
        clock: for command ``delay_s`` (clock time).

    A ``mode: delta`` counter is read-and-clear: the read that returns it zeroes it. Such a read is
    never repeated within a poll (no client retries), and when a poll fails after it went out the
    count it cleared is lost, so the next count is marked :attr:`PointValue.gap_before` (a data gap).
    """

    def __init__(self, device_id: str, profile: ProfilePlan, unit_id: int, link: ModbusLink, clock: Clock) -> None:
        if profile.modbus is None:
            raise ValueError(f"profile {profile.model!r} has no modbus section")
        self.device_id = device_id
        self.link_key = link.key
        self.unit_id = unit_id
        self._spec = profile.modbus
        self._link = link
        self._clock = clock
        self._polls = 0
        self._initialised_generation = -1
        counter = profile.counter
        #: the quantity a read clears (a ``mode: delta`` counter), or ``None``.
        self.clears = counter.quantity if counter is not None and counter.mode == "delta" else None
        # Each read of a poll, worked out once: its block, its name in logs, the reply it must get and
        # whether it clears a count.
        self._reads = [
            (block, f"unit {unit_id} read {block.table} 0x{block.address:04X} x{block.count}",
             ExpectedReply.read(unit_id, block.table, block.count),
             any(p.quantity == self.clears for p in block.points))
            for block in plan_reads(self._spec.wire_points)
        ]
        self._lost = False  # a clearing read went out and its count never reached a reading

    def poll(self) -> list[PointValue]:
        """Commands due, then all points. Raises TransportError/DeviceReplyError/BadDataError."""
        with self._link.lock:
            try:
                client = self._link.client(self.device_id)
                if self._initialised_generation != self._link.generation:
                    if self._spec.warmup_s > 0:
                        log.debug("%s: warm-up %.1f s", self.device_id, self._spec.warmup_s)
                        self._clock.sleep(self._spec.warmup_s)
                    for cmd in self._spec.wire_commands:
                        if cmd.every_n_polls == 0:
                            self._command(client, cmd)
                    self._initialised_generation = self._link.generation
                for cmd in self._spec.wire_commands:
                    if cmd.every_n_polls > 0 and self._polls % cmd.every_n_polls == 0:
                        self._command(client, cmd)
                values: list[PointValue] = []
                lost = self._lost
                for block, what, expected, clears in self._reads:
                    if clears:
                        self._lost = True  # until this poll's values are returned
                    words = self._read(client, block.table, block.address, block.count, what, expected)
                    values.extend(decode_block(self.device_id, block, words))
            except ModbusException as exc:
                why = self._link.failed(self.device_id)
                raise TransportError(
                    self.device_id, f"{self.link_key} unit {self.unit_id}: {exc}" + (f"; {why}" if why else "")
                ) from exc
            except OSError as exc:
                self._link.failed(self.device_id)
                raise TransportError(self.device_id, f"{self.link_key} unit {self.unit_id}: I/O error {exc}") from exc
            self._polls += 1
            self._lost = False
            if lost:
                values = [replace(v, gap_before=True) if v.quantity == self.clears else v for v in values]
            return values

    def close(self) -> None:
        self._link.close()

    def _check(self, response: object, what: str) -> None:
        is_error = getattr(response, "isError", None)
        if is_error is not None and is_error():
            code = getattr(response, "exception_code", "?")
            raise DeviceReplyError(self.device_id, f"{what}: exception code {code}")

    def _command(self, client: ModbusBaseSyncClient, cmd: CommandPlan) -> None:
        what = f"unit {self.unit_id} command {cmd.name} ({cmd.function} 0x{cmd.address:04X})"
        expected = ExpectedReply.command(self.unit_id, cmd.function, cmd.count)
        self._link.before_request(what, expected)
        try:
            if cmd.function == "write_registers":
                resp = client.write_registers(cmd.address, list(cmd.values), device_id=self.unit_id)
            elif cmd.function == "write_register":
                resp = client.write_register(cmd.address, cmd.values[0], device_id=self.unit_id)
            elif cmd.function == "write_coil":
                resp = client.write_coil(cmd.address, bool(cmd.values[0]), device_id=self.unit_id)
            elif cmd.function == "read_input_registers":
                resp = client.read_input_registers(cmd.address, count=cmd.count, device_id=self.unit_id)
            else:
                resp = client.read_holding_registers(cmd.address, count=cmd.count, device_id=self.unit_id)
        finally:
            self._link.after_request()
        self._link.verify_reply(self.device_id, expected, what)
        self._check(resp, what)
        log.debug("%s: %s done", self.device_id, what)
        if cmd.delay_s > 0:
            self._clock.sleep(cmd.delay_s)

    def _read(self, client: ModbusBaseSyncClient, table: str, address: int, count: int, what: str,
              expected: ExpectedReply) -> list[int]:
        self._link.before_request(what, expected)
        try:
            if table == "holding":
                resp = client.read_holding_registers(address, count=count, device_id=self.unit_id)
            elif table == "input":
                resp = client.read_input_registers(address, count=count, device_id=self.unit_id)
            elif table == "coil":
                resp = client.read_coils(address, count=count, device_id=self.unit_id)
            else:
                resp = client.read_discrete_inputs(address, count=count, device_id=self.unit_id)
        finally:
            self._link.after_request()
        self._link.verify_reply(self.device_id, expected, what)
        self._check(resp, what)
        if table in ("coil", "discrete"):
            bits = list(resp.bits)[:count]
            if len(bits) != count:
                raise BadDataError(self.device_id, f"{what}: got {len(bits)} bits")
            return [int(b) for b in bits]
        words = list(resp.registers)
        if len(words) != count:
            raise BadDataError(self.device_id, f"{what}: got {len(words)} registers")
        return words
