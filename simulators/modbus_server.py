"""Simulated Modbus devices on real pymodbus 3.16 servers (TCP, and RTU over a pty).

One server serves several device (unit) ids, like a TCP gateway or an RS-485 multi-drop line.
Registers come from each device's profile points and are computed **when a request is served**:
the pymodbus :class:`~pymodbus.simulator.SimDevice` ``action`` hook (called by the server before
it answers, with the device's live register list) writes
:func:`stormwatch.codec.encode_point` of the scenario value at ``clock.now()``, so a poll reads
the exact scenario state at the simulated time of the request.

Also served: the profile's command registers (Yosemitech Y511: read 0x2500 "start measurement",
write 0x3100 "brush"; sensors.md), so a gateway's commands succeed. Point registers are read-only
(a write gets ILLEGAL_ADDRESS). A request for an unknown unit id gets an exception reply
(GATEWAY_NO_RESPONSE, 0x0B) from a catch-all device 0, never silence.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from functools import partial

from pymodbus.constants import ExcCodes
from pymodbus.framer import FramerType
from pymodbus.server import ModbusSerialServer, ModbusTcpServer
from pymodbus.simulator import DataType, SimData, SimDevice

from stormwatch.clock import Clock
from stormwatch.codec import DecodeError, encode_point
from stormwatch.profiles import DeviceProfile, Point, RegisterKind
from stormwatch.simulators.pty import PtyPair, open_pty_transport
from stormwatch.simulators.scenario import SiteScenario

log = logging.getLogger(__name__)

#: Modbus function code → register table (Modbus Application Protocol v1.1b3 §6).
TABLE_OF_FUNCTION: dict[int, RegisterKind] = {
    1: "coil", 5: "coil", 15: "coil", 2: "discrete", 4: "input",
    3: "holding", 6: "holding", 16: "holding", 22: "holding", 23: "holding",
}
_TABLES: tuple[RegisterKind, ...] = ("coil", "discrete", "holding", "input")


def _runs(addresses: set[int]) -> list[tuple[int, int]]:
    """Contiguous ``(start, length)`` runs of a set of addresses."""
    runs: list[tuple[int, int]] = []
    for a in sorted(addresses):
        if runs and runs[-1][0] + runs[-1][1] == a:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((a, 1))
    return runs


@dataclass
class SimulatedModbusDevice:
    """One simulated Modbus device.

    Attributes:
        device_id: the site's device id (for logs and the scenario lookup).
        unit_id: Modbus unit (slave) id it answers to.
        profile: its device profile (points and commands).
        scenario: the values source.
        clock: the simulated clock; values are computed at ``clock.now()`` per request.
    """

    device_id: str
    unit_id: int
    profile: DeviceProfile
    scenario: SiteScenario
    clock: Clock
    requests: int = 0
    _last_delta_count: dict[str, int] = field(default_factory=dict)
    _modelled: dict[str, bool] = field(default_factory=dict)
    _served: dict[RegisterKind, bool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.profile.modbus is None:
            raise ValueError(f"device {self.device_id!r}: profile {self.profile.model} is not a Modbus profile")
        t0 = self.scenario.scenario.start
        for p in self.profile.modbus.wire_points:
            try:
                self.scenario.value(self.device_id, p.quantity, t0)
                self._modelled[p.quantity] = True
            except KeyError:
                log.warning("%s: quantity %r is not simulated; its registers read 0", self.device_id, p.quantity)
                self._modelled[p.quantity] = False
            if p.table in ("coil", "discrete"):
                log.warning("%s: %s point %r is served as a constant 0 bit", self.device_id, p.table, p.quantity)

    # ------------------------------------------------------------------ registers
    def _points(self, table: RegisterKind) -> list[Point]:
        assert self.profile.modbus is not None
        return [p for p in self.profile.modbus.wire_points if p.table == table]

    def _command_addresses(self) -> dict[RegisterKind, set[int]]:
        assert self.profile.modbus is not None
        out: dict[RegisterKind, set[int]] = {t: set() for t in _TABLES}
        for c in self.profile.modbus.wire_commands:
            if c.function == "write_coil":
                out["coil"].add(c.address)
            elif c.function == "write_registers":
                out["holding"].update(range(c.address, c.address + max(1, len(c.values))))
            else:
                out["holding"].update(range(c.address, c.address + c.count))
        return out

    def sim_device(self) -> SimDevice:
        """The pymodbus device: separate coil/discrete/holding/input tables, values by :meth:`action`."""
        commands = self._command_addresses()
        blocks: list[list[SimData]] = []
        self._served.clear()
        for table in _TABLES:
            point_addrs = {a for p in self._points(table) for a in range(p.address, p.address + p.count)}
            if table in ("coil", "discrete"):
                addrs = point_addrs | commands[table]
                self._served[table] = bool(addrs)
                data = [SimData(a, values=[False], datatype=DataType.BITS) for a in sorted(addrs)]
                blocks.append(data or [SimData(0, values=[False], datatype=DataType.BITS)])
                continue
            cmd_only = commands[table] - point_addrs
            self._served[table] = bool(point_addrs or cmd_only)
            data = [
                SimData(a, values=[0] * n, datatype=DataType.REGISTERS, readonly=True) for a, n in _runs(point_addrs)
            ]
            data += [SimData(a, values=[0] * n, datatype=DataType.REGISTERS) for a, n in _runs(cmd_only)]
            blocks.append(data or [SimData(0, values=[0], datatype=DataType.REGISTERS)])
        return SimDevice(
            self.unit_id, simdata=(blocks[0], blocks[1], blocks[2], blocks[3]), action=self.action
        )

    def _value(self, point: Point) -> float:
        if not self._modelled[point.quantity]:
            return point.offset
        value = self.scenario.value(self.device_id, point.quantity, self.clock.now())
        counter = self.profile.counter
        if counter is not None and counter.mode == "delta" and point.quantity == counter.quantity:
            cumulative = int(value)
            last = self._last_delta_count.get(point.quantity, cumulative)
            self._last_delta_count[point.quantity] = cumulative
            value = float((cumulative - last) % (1 << counter.width_bits))
        return value

    async def action(
        self,
        function_code: int,
        start_address: int,
        address: int,
        count: int,
        registers: list[int],
        set_values: list[int] | list[bool] | None,
    ) -> ExcCodes | None:
        """pymodbus SimDevice hook: refresh the requested registers from the scenario at clock.now()."""
        table = TABLE_OF_FUNCTION.get(function_code)
        if table is None:
            return ExcCodes.ILLEGAL_FUNCTION
        if not self._served.get(table, False):
            return ExcCodes.ILLEGAL_ADDRESS
        self.requests += 1
        if set_values is not None or table in ("coil", "discrete"):
            return None
        end = address + count
        for point in self._points(table):
            if point.address + point.count <= address or point.address >= end:
                continue
            try:
                words = encode_point(point, self._value(point))
            except DecodeError as exc:
                log.warning("%s: %s cannot be encoded: %s", self.device_id, point.quantity, exc)
                return ExcCodes.DEVICE_FAILURE
            base = point.address - start_address
            registers[base : base + point.count] = words
        return None


async def _no_such_device(
    _fc: int, _start: int, _address: int, _count: int, _regs: list[int], _values: list[int] | list[bool] | None
) -> ExcCodes | None:
    return ExcCodes.GATEWAY_NO_RESPONSE


def _catch_all() -> SimDevice:
    """Device 0: answers every unknown unit id with an exception (pymodbus maps unknown ids to 0)."""
    return SimDevice(
        0,
        simdata=[SimData(0, count=65536, values=0, datatype=DataType.REGISTERS)],
        action=_no_such_device,
    )


def _sim_devices(devices: list[SimulatedModbusDevice]) -> list[SimDevice]:
    ids = [d.unit_id for d in devices]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ValueError(f"unit ids {dupes} used by more than one device on one server")
    out = [d.sim_device() for d in devices]
    if 0 not in ids:
        out.append(_catch_all())
    return out


class ModbusTcpSim:
    """A Modbus TCP server (a gateway) for several simulated devices. Start/stop inside an event loop.

    Args:
        devices: the devices behind this address.
        host, port: where to listen (port 0 picks a free port; see :attr:`port` after start).
    """

    def __init__(self, devices: list[SimulatedModbusDevice], host: str, port: int) -> None:
        self.devices = devices
        self.host = host
        self.port = port
        self._server: ModbusTcpServer | None = None

    async def start(self) -> None:
        """Listen. Raises RuntimeError when the address cannot be bound."""
        self._server = ModbusTcpServer(_sim_devices(self.devices), address=(self.host, self.port))
        await self._server.serve_forever(background=True)
        transport = self._server.transport
        sockets = getattr(transport, "sockets", None)
        if sockets:
            self.port = sockets[0].getsockname()[1]
        log.info(
            "modbus-tcp %s:%d serving %s",
            self.host, self.port, ", ".join(f"{d.device_id}@{d.unit_id}" for d in self.devices),
        )

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.shutdown()
            self._server = None


class ModbusRtuSim:
    """A Modbus RTU line (RS-485 multi-drop) on a pty: the server owns the master side.

    Args:
        devices: the devices on this line.
        link: optional path for a symlink to the slave (the site config's port path).
        baud, parity, stopbits: line settings (a pty ignores them; kept for the record).

    Attributes:
        pty: the pair (after :meth:`start`); clients open ``pty.path``.
    """

    def __init__(
        self,
        devices: list[SimulatedModbusDevice],
        link: str | None = None,
        baud: int = 9600,
        parity: str = "N",
        stopbits: int = 1,
    ) -> None:
        self.devices = devices
        self.link = link
        self.baud = baud
        self.parity = parity
        self.stopbits = stopbits
        self.pty: PtyPair | None = None
        self._server: ModbusSerialServer | None = None

    @property
    def path(self) -> str:
        if self.pty is None:
            raise RuntimeError("RTU simulator not started")
        return self.pty.path

    async def start(self) -> None:
        """Create the pty (and link) and serve RTU frames on its master side."""
        self.pty = PtyPair(self.link)
        loop = asyncio.get_running_loop()
        server = ModbusSerialServer(
            _sim_devices(self.devices),
            framer=FramerType.RTU,
            port=self.pty.slave_path,
            baudrate=self.baud,
            parity=self.parity,
            stopbits=self.stopbits,
        )
        # pymodbus opens serial ports by path; a pty master has none, so hand the server a
        # transport over the master fd instead (same (transport, protocol) contract).
        server.call_create = partial(open_pty_transport, loop, server.handle_new_connection, self.pty.master_fd)
        self._server = server
        await server.serve_forever(background=True)
        log.info(
            "modbus-rtu %s serving %s", self.path, ", ".join(f"{d.device_id}@{d.unit_id}" for d in self.devices)
        )

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.shutdown()
            self._server = None
        if self.pty is not None:
            self.pty.close()
            self.pty = None
