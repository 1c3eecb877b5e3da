"""One serial port (an RS-232/RS-485 adapter, an SDI-12 adapter) shared by the devices on it.

Every device on a bus polls under :attr:`SerialBus.lock`, so commands and answers of two
devices never interleave. The port is opened lazily and closed after a transport error; the next
poll reopens it (pyserial discards the input buffer on open, so stale bytes of a timed-out answer
are never read as the next one).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

import serial

from stormwatch.gateway.errors import TransportError

log = logging.getLogger(__name__)


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
            TransportError: the port cannot be opened (adapter unplugged, wrong path).
        """
        if self._port is None:
            s = self.settings
            try:
                self._port = serial.serial_for_url(
                    s.port, baudrate=s.baud, bytesize=s.bytesize, parity=s.parity, stopbits=s.stopbits,
                    timeout=s.read_timeout_s, write_timeout=1.0,
                )
            except (serial.SerialException, OSError, ValueError) as exc:
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
