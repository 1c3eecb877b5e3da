"""Build one driver per configured device (and the shared links: Modbus connections, serial ports).

Raises :class:`UnsupportedDevice` for a profile/transport pair the gateway cannot poll (e.g. a
``modbus`` profile on a ``serial`` transport).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stormwatch.clock import Clock
from stormwatch.errors import InputError
from stormwatch.gateway.drivers import Driver
from stormwatch.gateway.drivers.modbus import ModbusDriver, ModbusLink, client_factory, link_key, rtu_frame_gap_s

if TYPE_CHECKING:
    from stormwatch.gateway.drivers.serial_bus import SerialBus
    from stormwatch.gateway.plan import DevicePlan, ProfilePlan

#: Shared connections by link key: Modbus endpoints/lines and serial (SDI-12 adapter) ports. The
#: serial drivers are imported only for a device that needs one (a Modbus TCP site loads no serial stack).
Links = dict[str, "ModbusLink | SerialBus"]


class UnsupportedDevice(InputError):
    """A device the gateway cannot poll; the message names the device, profile and transport."""


def build_driver(device: DevicePlan, profile: ProfilePlan, clock: Clock, links: Links) -> Driver:
    """The driver for ``device``; devices on one endpoint/line/port share ``links[key]``.

    ``device``/``profile``: the plan's dataclasses (:mod:`stormwatch.gateway.plan`) or the pydantic
    ``Device``/``DeviceProfile`` (same attributes).

    Raises:
        UnsupportedDevice: protocol and transport do not fit, or two protocols on one port.
    """
    transport = device.transport
    if profile.protocol == "modbus":
        if transport.kind not in ("modbus-tcp", "modbus-rtu"):
            raise UnsupportedDevice(
                f"device {device.id}: profile {profile.model} speaks Modbus but transport is {transport.kind!r}"
            )
        key = link_key(transport)
        if key not in links:
            gap = rtu_frame_gap_s(transport.baud) if transport.kind == "modbus-rtu" else 0.0
            links[key] = ModbusLink(key, client_factory(transport), frame_gap_s=gap)
        link = links[key]
        assert isinstance(link, ModbusLink)
        return ModbusDriver(device.id, profile, transport.unit_id, link, clock)
    if transport.kind != "serial":
        raise UnsupportedDevice(
            f"device {device.id}: profile {profile.model} is a {profile.protocol} device but transport is"
            f" {transport.kind!r} (use kind: serial)"
        )
    from stormwatch.gateway.drivers.serial_bus import PortSettings, SerialBus

    if profile.protocol == "serial_line":
        from stormwatch.gateway.drivers.serial_line import SerialLineDriver

        return SerialLineDriver(device.id, profile, transport)
    assert profile.sdi12 is not None
    spec = profile.sdi12
    key = f"serial://{transport.port}"
    if key not in links:
        links[key] = SerialBus(
            key,
            PortSettings(transport.port, transport.baud or spec.baud, spec.bytesize, spec.parity, spec.stopbits),
        )
    bus = links[key]
    if not isinstance(bus, SerialBus):
        raise UnsupportedDevice(f"device {device.id}: port {transport.port} is already a Modbus line")
    address = device.sdi12_address or spec.default_address
    from stormwatch.gateway.drivers.sdi12 import Sdi12Driver

    return Sdi12Driver(device.id, profile, address, bus)
