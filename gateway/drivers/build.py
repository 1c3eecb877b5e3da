"""Build one driver per configured device (and the shared Modbus links).

Raises :class:`UnsupportedDevice` for a profile/transport pair the gateway cannot poll (e.g. a
``modbus`` profile on a ``serial`` transport, or an ``sdi12`` profile: no SDI-12 driver yet).
"""

from __future__ import annotations

from gateway.drivers import Driver
from gateway.drivers.modbus import ModbusDriver, ModbusLink, client_factory, link_key
from gateway.drivers.serial_line import SerialLineDriver
from stormwatch.clock import Clock
from stormwatch.config import Device, ModbusRtu, ModbusTcp, Serial
from stormwatch.profiles import DeviceProfile


class UnsupportedDevice(ValueError):
    """A device the gateway cannot poll; the message names the device, profile and transport."""


def build_driver(device: Device, profile: DeviceProfile, clock: Clock, links: dict[str, ModbusLink]) -> Driver:
    """The driver for ``device``; Modbus devices on one endpoint/line share ``links[key]``.

    Raises:
        UnsupportedDevice: protocol and transport do not fit, or no driver for the protocol.
    """
    transport = device.transport
    if profile.protocol == "modbus":
        if not isinstance(transport, ModbusTcp | ModbusRtu):
            raise UnsupportedDevice(
                f"device {device.id}: profile {profile.model} speaks Modbus but transport is {transport.kind!r}"
            )
        key = link_key(transport)
        if key not in links:
            links[key] = ModbusLink(key, client_factory(transport))
        return ModbusDriver(device.id, profile, transport.unit_id, links[key], clock)
    if profile.protocol == "serial_line":
        if not isinstance(transport, Serial):
            raise UnsupportedDevice(
                f"device {device.id}: profile {profile.model} is a serial line device but transport is"
                f" {transport.kind!r} (use kind: serial)"
            )
        return SerialLineDriver(device.id, profile, transport)
    raise UnsupportedDevice(f"device {device.id}: no gateway driver for protocol {profile.protocol!r} yet")
