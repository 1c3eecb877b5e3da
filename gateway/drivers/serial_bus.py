"""Serial ports: opened exclusively (:func:`open_port`), and one port shared by the devices on it.

Every serial transport of the gateway -- text-line devices, SDI-12 adapters and Modbus RTU lines
-- opens its port through :func:`open_port`, with ``exclusive=True``: pyserial then takes an
``flock(LOCK_EX | LOCK_NB)`` on the device, so a second program (another gateway, a field
technician's terminal) that also opens exclusively is refused instead of silently sharing the
port, each reader getting part of the byte stream. A refused open raises :class:`PortOpenError`
whose message is the real reason (``Could not exclusively lock port /dev/ttyUSB0: ... (the port is
in use by another program or connection)``; ``No such file or directory``...), which the drivers put in their
:class:`~stormwatch.gateway.errors.TransportError`. (The lock is advisory: a program that opens
the port without asking for it is not stopped -- every stormwatch transport asks.)

The design: docs/gateway.md ("The modules", `gateway/drivers/serial_bus.py`).
"""

from __future__ import annotations

import errno
import logging
import termios
import threading
from dataclasses import dataclass
from typing import Any

import serial

from stormwatch.gateway.errors import TransportError

log = logging.getLogger(__name__)


class PortOpenError(OSError):
    """A serial port could not be opened. ``str(error)`` is the real reason, e.g.
    ``Could not exclusively lock port /dev/ttyUSB0: ... (the port is in use by another program or connection)``."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(code, reason)
        self.reason = reason

    def __str__(self) -> str:
        return self.reason


def open_port(url: str, **settings: Any) -> serial.Serial:
    """Open ``url`` (a device path or a pyserial URL) exclusively with pyserial ``settings``.

    ``settings``: pyserial's keyword arguments (``baudrate``, ``bytesize``, ``parity``,
    ``stopbits``, ``timeout``, ``write_timeout``...); ``exclusive=True`` is always added.

    Raises:
        PortOpenError: the port cannot be opened; the message names the port and why (a port held
            by another program says so). pyserial also raises termios errors and ValueError for
            bad settings: they become PortOpenError too.
    """
    try:
        return serial.serial_for_url(url, exclusive=True, **settings)
    except serial.SerialException as exc:
        reason = str(exc)
        if "exclusively lock" in reason:
            reason += " (the port is in use by another program or connection)"
        raise PortOpenError(exc.errno or errno.EIO, reason) from exc
    except OSError as exc:
        raise PortOpenError(exc.errno or errno.EIO, f"{url}: {exc}") from exc
    except (ValueError, termios.error) as exc:  # bad settings; tcsetattr refused by an odd device
        raise PortOpenError(errno.EINVAL, f"{url}: {exc}") from exc


@dataclass(frozen=True)
class PortSettings:
    """pyserial settings of one port. ``read_timeout_s`` bounds each ``read`` call (real time)."""

    port: str
    baud: int
    bytesize: int = 8
    parity: str = "N"
    stopbits: int = 1
    read_timeout_s: float = 0.05


class SerialBus:
    """A shared serial port with one lock.

    Args:
        key: the link key (``serial://<port>``), shared by devices on this port.
        settings: how to open it (the first device's profile decides).
    """

    def __init__(self, key: str, settings: PortSettings) -> None:
        self.key = key
        self.settings = settings
        self.lock = threading.RLock()
        self._port: serial.Serial | None = None

    def open(self, device: str) -> serial.Serial:
        """The open port (opened now if needed). Call with :attr:`lock` held.

        Raises:
            TransportError: the port cannot be opened (adapter unplugged, wrong path, held by
                another program); the message gives pyserial's reason.
        """
        if self._port is None:
            s = self.settings
            try:
                self._port = open_port(
                    s.port, baudrate=s.baud, bytesize=s.bytesize, parity=s.parity, stopbits=s.stopbits,
                    timeout=s.read_timeout_s, write_timeout=1.0,
                )
            except PortOpenError as exc:
                raise TransportError(device, f"cannot open {s.port}: {exc}") from exc
            log.debug("opened %s", s.port)
        return self._port

    def close(self) -> None:
        """Close the port (idempotent); the next :meth:`open` reopens it."""
        with self.lock:
            if self._port is not None:
                try:
                    self._port.close()
                except (serial.SerialException, OSError) as exc:
                    log.debug("closing %s: %s", self.settings.port, exc)
                self._port = None
