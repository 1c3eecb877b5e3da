"""Typed device errors. Drivers raise these; they are never flattened into ``None``.

* :class:`TransportError` -- the link failed (connect refused, I/O error, timeout, port gone, no
  data at all): the driver closes the connection and it is reopened with backoff.
* :class:`DeviceReplyError` -- the device answered, but with a Modbus exception (e.g. illegal
  address, unknown unit id): the link itself is fine.
* :class:`BadDataError` -- bytes arrived but do not make a value (wrong register count,
  undecodable words, a serial line that never matches the profile pattern).
"""

from __future__ import annotations


class DeviceError(Exception):
    """A poll of one device failed; ``device`` is the device id."""

    def __init__(self, device: str, message: str) -> None:
        super().__init__(f"{device}: {message}")
        self.device = device
        self.message = message


class TransportError(DeviceError):
    """The connection to the device failed; it is closed and reopened with backoff."""


class NoDataError(TransportError):
    """A serial device sent no complete line within the timeout (unplugged adapter, dead sensor)."""


class DeviceReplyError(DeviceError):
    """The device replied with a Modbus exception response."""


class BadDataError(DeviceError):
    """The device replied with data that cannot be decoded as the profile says."""
