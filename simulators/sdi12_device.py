"""A simulated SDI-12 sensor behind a serial SDI-12 adapter, on a pty.

The gateway opens the pty slave like the adapter's serial port and writes ASCII commands; this
simulator answers as the sensor would (sensors.md "SDI-12"):

* ``a!`` → ``a<CR><LF>``; ``aI!`` → an identification line;
* ``aM!`` → ``atttn<CR><LF>`` (``ttt`` = announced seconds, ``n`` = number of values); the values
  are taken at ``clock.now()`` when the command arrives; after ``ready_s`` REAL seconds the
  service request ``a<CR><LF>`` follows;
* ``aD0!`` ... ``aD9!`` → ``a+1.23-4.56...<CR><LF>``, at most 35 characters of values per answer;
* other addresses and unknown commands get silence; chosen answers are dropped or garbled.

The design: docs/simulators.md ("The modules", `simulators/sdi12_device.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
from collections.abc import Callable, Coroutine, Iterable
from datetime import datetime
from typing import Any

from stormwatch.clock import Clock
from stormwatch.simulators.pty import PtyPair

log = logging.getLogger(__name__)

#: Characters of values one D answer may carry after an M command (SDI-12 v1.4 §4.4.7).
MAX_D_CHARS = 35


def format_value(value: float, decimals: int) -> str:
    """One SDI-12 value: explicit sign, ``decimals`` decimals (``+12.500``, ``-0.100``)."""
    text = f"{value:+.{decimals}f}"
    return text if decimals else text.rstrip(".")


def garbled(text: str) -> str:
    """``text`` as a bit error on the line leaves it: its last character becomes ``#`` (``1+0+7`` →
    ``1+0+#``), still starting with the address -- a well-formed start, a malformed whole."""
    return text[:-1] + "#" if len(text) > 1 else "#"


class RainSinceMeasurement:
    """A RainVUE10's ``aM!`` values: raw bucket tips since the last measurement, which it resets.

    Args:
        tip_times: event times of the bucket's tips (any order).

    Calling it with the event time of an ``aM!`` returns ``[depth_in, tips, total_in, 0, 0]``
    (RainVUE-series manual, "SDI-12 measurement commands": accumulation since the last
    measurement, raw tips since the last measurement, total accumulation, intensities) and
    resets the tips since the last measurement.

    Attributes:
        measured: the event times of every measurement, in order (for tests).
    """

    def __init__(self, tip_times: Iterable[datetime]) -> None:
        self.tip_times = sorted(tip_times)
        self.measured: list[datetime] = []
        self._last: datetime | None = None

    def tips_between(self, start: datetime | None, end: datetime) -> int:
        """Tips after ``start`` (``None``: all before) up to and including ``end``."""
        return sum(1 for t in self.tip_times if (start is None or t > start) and t <= end)

    def __call__(self, now: datetime) -> list[float]:
        tips = self.tips_between(self._last, now)
        self._last = now
        self.measured.append(now)
        total = self.tips_between(None, now)
        return [tips * 0.01, float(tips), total * 0.01, 0.0, 0.0]


def d_buffers(values: Iterable[float], decimals: int) -> list[str]:
    """Split formatted values into D answers of at most :data:`MAX_D_CHARS` characters."""
    buffers: list[str] = [""]
    for v in values:
        text = format_value(v, decimals)
        if len(buffers[-1]) + len(text) > MAX_D_CHARS:
            buffers.append("")
        buffers[-1] += text
    return buffers


class Sdi12Sim:
    """An SDI-12 sensor on a pty (start/stop inside an event loop).

    Args:
        address: SDI-12 address (one character).
        values: event time → the values an ``M`` measurement returns, in order.
        clock: the simulated clock (values are taken at ``clock.now()``).
        link: optional symlink path for the pty slave (the site config's port).
        announce_s: the ``ttt`` seconds announced after ``aM!`` (0..999).
        ready_s: REAL seconds until the service request (≤ ``announce_s`` on a real sensor).
        decimals: decimals of each value.
        drop: indices of received commands whose answer is dropped (the command still acts: an
            ``aM!`` measures and resets).
        garble: indices of received commands whose answer arrives garbled (:func:`garbled`).
        turnaround_s: REAL seconds between a command and its answer.
        ident: the ``aI!`` answer after the address.

    Attributes:
        commands: every command received, in order (for tests).
    """

    def __init__(
        self,
        address: str,
        values: Callable[[datetime], list[float]],
        clock: Clock,
        link: str | None = None,
        announce_s: int = 1,
        ready_s: float = 0.2,
        decimals: int = 3,
        drop: Iterable[int] = (),
        garble: Iterable[int] = (),
        turnaround_s: float = 0.01,
        ident: str = "14STORMWTSDI12SIM001",
    ) -> None:
        if len(address) != 1 or not address.isalnum():
            raise ValueError(f"SDI-12 address must be one character 0-9, a-z, A-Z, got {address!r}")
        if not 0 <= announce_s <= 999:
            raise ValueError("announce_s must be 0..999")
        self.address = address
        self.values = values
        self.clock = clock
        self.link = link
        self.announce_s = announce_s
        self.ready_s = ready_s
        self.decimals = decimals
        self.drop = set(drop)
        self.garble = set(garble)
        self.turnaround_s = turnaround_s
        self.ident = ident
        self.commands: list[str] = []
        self.pty: PtyPair | None = None
        self._buffers: list[str] = []
        self._inbox = b""
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def path(self) -> str:
        if self.pty is None:
            raise RuntimeError("SDI-12 simulator not started")
        return self.pty.path

    async def start(self) -> None:
        self.pty = PtyPair(self.link)
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self.pty.master_fd, self._readable)
        log.info("sdi12 sensor %s on %s", self.address, self.path)

    async def stop(self) -> None:
        if self._loop is not None and self.pty is not None:
            self._loop.remove_reader(self.pty.master_fd)
        for task in list(self._tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.pty is not None:
            self.pty.close()
            self.pty = None

    # -- protocol -----------------------------------------------------------------------------

    def _readable(self) -> None:
        assert self.pty is not None
        try:
            data = os.read(self.pty.master_fd, 4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            log.debug("sdi12 %s: read: %s", self.address, exc)
            return
        self._inbox += data
        while b"!" in self._inbox:
            raw, self._inbox = self._inbox.split(b"!", 1)
            command = raw.decode("ascii", errors="replace").strip("\r\n\x00 ") + "!"
            index = len(self.commands)
            self.commands.append(command)
            answer = self._answer(command)
            if answer is None:
                continue
            if index in self.drop:
                log.info("sdi12 %s: dropping the answer to command #%d %s", self.address, index, command)
                continue
            if index in self.garble:
                log.info("sdi12 %s: garbling the answer to command #%d %s", self.address, index, command)
                answer = garbled(answer)
            self._spawn(self._send_later(answer, self.turnaround_s))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        assert self._loop is not None
        task = self._loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send_later(self, text: str, delay_s: float) -> None:
        await asyncio.sleep(delay_s)
        if self.pty is None:
            return
        try:
            os.write(self.pty.master_fd, (text + "\r\n").encode("ascii"))
        except OSError as exc:
            log.debug("sdi12 %s: write: %s", self.address, exc)

    def _answer(self, command: str) -> str | None:
        a = self.address
        if command == "?!":
            return a
        if not command.startswith(a):
            return None  # another sensor's address: silence
        body = command[1:-1]
        if body == "":
            return a
        if body == "I":
            return a + self.ident
        if body == "M" or (len(body) == 2 and body[0] == "M" and body[1].isdigit()):
            values = [float(v) for v in self.values(self.clock.now())]
            if any(not math.isfinite(v) for v in values) or not 1 <= len(values) <= 9:
                raise ValueError("an aM! measurement returns 1..9 finite values")
            self._buffers = d_buffers(values, self.decimals)
            self._spawn(self._send_later(a, self.turnaround_s + self.ready_s))  # service request
            return f"{a}{self.announce_s:03d}{len(values)}"
        if len(body) == 2 and body[0] == "D" and body[1].isdigit():
            k = int(body[1])
            return a + (self._buffers[k] if k < len(self._buffers) else "")
        return None
