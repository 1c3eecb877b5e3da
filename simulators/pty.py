"""Pseudo-terminal pairs standing in for serial ports (RS-232/RS-485 adapters).

The simulated device owns the master side; a client (the gateway) opens the slave path like any
serial port. When a site config names a port path (``/tmp/stormwatch-sim/turb-down``) a symlink
is created there pointing at the slave (like socat's ``link=``): the directory is created and a
stale link replaced; an existing regular file is never overwritten.

The simulator also keeps the slave open itself (in raw mode), so the master never sees EIO/HUP
while no client is connected and no byte is translated (no echo, no CR→NL).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import logging
import os
import struct
import termios
import tty
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TypeVar

log = logging.getLogger(__name__)


class PtyError(OSError):
    """A pty or its link path cannot be set up."""


class PtyPair:
    """An open pty pair: ``master_fd`` for the simulator, ``slave_path`` for clients.

    Args:
        link: optional path of a symlink to create pointing at the slave.

    Raises:
        PtyError: the link path exists and is not a symlink, or cannot be created.
    """

    def __init__(self, link: str | Path | None = None) -> None:
        self.master_fd, self._slave_fd = os.openpty()
        tty.setraw(self._slave_fd)
        os.set_blocking(self.master_fd, False)
        self.slave_path = os.ttyname(self._slave_fd)
        self.link: Path | None = None
        if link is not None:
            try:
                self.link = make_link(Path(link), self.slave_path)
            except PtyError:
                self.close()
                raise

    @property
    def path(self) -> str:
        """The path a client should open: the link when there is one, else the slave device."""
        return str(self.link) if self.link is not None else self.slave_path

    def pending_for_client(self) -> int:
        """Bytes written by the simulator that no client has read yet."""
        buf = fcntl.ioctl(self._slave_fd, termios.FIONREAD, b"\0\0\0\0")
        return int(struct.unpack("i", buf)[0])

    def discard_unread(self) -> None:
        """Drop bytes no client has read (a real UART with nobody listening keeps nothing)."""
        termios.tcflush(self._slave_fd, termios.TCIFLUSH)

    def close(self) -> None:
        """Close both sides and remove the link (only if it still points at this slave)."""
        if self.link is not None:
            with contextlib.suppress(OSError):
                if os.readlink(self.link) == self.slave_path:
                    self.link.unlink()
            self.link = None
        for fd in (self.master_fd, self._slave_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.master_fd = self._slave_fd = -1


def make_link(link: Path, target: str) -> Path:
    """Create (or replace a stale) symlink ``link`` → ``target``, creating its directory.

    Raises:
        PtyError: ``link`` exists and is not a symlink, or the directory cannot be created.
    """
    try:
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink():
            link.unlink()
        elif link.exists():
            raise PtyError(errno.EEXIST, f"{link} exists and is not a symlink; refusing to replace it")
        tmp = link.with_name(f".{link.name}.{os.getpid()}.tmp")
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        os.symlink(target, tmp)
        os.replace(tmp, link)
    except PtyError:
        raise
    except OSError as exc:
        raise PtyError(exc.errno or errno.EIO, f"cannot create link {link} -> {target}: {exc}") from exc
    log.info("serial link %s -> %s", link, target)
    return link


class PtyTransport(asyncio.Transport):
    """An asyncio transport over a pty master fd (the device side of a simulated serial port).

    Reads go to ``protocol.data_received``; writes are buffered and flushed when the fd is
    writable. The fd is not closed by the transport (the :class:`PtyPair` owns it).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, protocol: StreamReceiver, fd: int) -> None:
        super().__init__()
        self._loop = loop
        self._protocol = protocol
        self._fd = fd
        self._buffer = bytearray()
        self._closing = False
        loop.add_reader(fd, self._read_ready)
        loop.call_soon(protocol.connection_made, self)

    def _read_ready(self) -> None:
        try:
            data = os.read(self._fd, 4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            log.debug("pty read: %s", exc)
            return
        if data:
            self._protocol.data_received(data)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing:
            return
        self._buffer.extend(data)
        self._write_ready()

    def _write_ready(self) -> None:
        try:
            n = os.write(self._fd, self._buffer)
        except (BlockingIOError, InterruptedError):
            n = 0
        except OSError as exc:
            log.warning("pty write failed: %s; dropping %d bytes", exc, len(self._buffer))
            n = len(self._buffer)
        del self._buffer[:n]
        if self._buffer:
            self._loop.add_writer(self._fd, self._write_ready)
        else:
            self._loop.remove_writer(self._fd)

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        self._loop.remove_reader(self._fd)
        self._loop.remove_writer(self._fd)

    def is_closing(self) -> bool:
        return self._closing

    def abort(self) -> None:
        self.close()

    def get_write_buffer_size(self) -> int:
        return len(self._buffer)

    def is_reading(self) -> bool:
        return not self._closing

    def get_protocol(self) -> asyncio.BaseProtocol:
        assert isinstance(self._protocol, asyncio.BaseProtocol)
        return self._protocol

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        assert isinstance(protocol, asyncio.Protocol)
        self._protocol = protocol


class StreamReceiver(Protocol):
    """What a :class:`PtyTransport` feeds: an asyncio stream protocol, or pymodbus's
    ``ModbusProtocol`` (a ``BaseProtocol`` with ``data_received``)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None: ...
    def connection_lost(self, exc: Exception | None) -> None: ...
    def data_received(self, data: bytes) -> None: ...


_P = TypeVar("_P", bound=StreamReceiver)


async def open_pty_transport(
    loop: asyncio.AbstractEventLoop, protocol_factory: Callable[[], _P], fd: int
) -> tuple[PtyTransport, _P]:
    """Connect a protocol to a pty master fd (the shape of ``loop.create_connection``)."""
    protocol = protocol_factory()
    return PtyTransport(loop, protocol, fd), protocol
