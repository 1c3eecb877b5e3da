"""A simulated MaxBotix HRXL-MaxSonar-WR on a pty.

The real sensor free-runs at 6–7.5 Hz writing ``R`` + 4 digits (mm) + CR; 9999 means no target
(sensors.md; device_profiles/maxbotix_hrxl.yaml). The simulator writes lines at a fixed REAL-time
rate (default 10 lines/s) carrying the distance at ``clock.now()`` when the line is written. Bytes
no client has read are discarded before each line beyond a small backlog, as a UART with nobody
listening keeps nothing, so a gateway that opens the port late never reads stale distances.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
from collections.abc import Callable
from datetime import datetime

from stormwatch.clock import Clock
from stormwatch.simulators.pty import PtyPair

log = logging.getLogger(__name__)

#: HRXL "no target" reading (max range), mm (sensors.md).
NO_TARGET_MM = 9999
#: Lines kept for a slow reader before older ones are dropped, and the real seconds of lines kept
#: at a fast line rate: a reader the machine holds up between its ``select`` and its ``read`` for
#: less than that never finds the bytes it was promised gone (an I/O error, a lost poll).
BACKLOG_LINES = 2
BACKLOG_S = 0.1


def hrxl_line(distance_mm: float | None) -> bytes:
    """One HRXL output line: ``R`` + 4-digit mm + CR; ``None`` or ≥ 9999 mm → ``R9999``; < 0 → ``R0000``."""
    if distance_mm is None or distance_mm >= NO_TARGET_MM:
        mm = NO_TARGET_MM
    else:
        mm = max(0, round(distance_mm))
    return f"R{mm:04d}\r".encode("ascii")


class HrxlSim:
    """An HRXL writing lines on a pty (start/stop inside an event loop).

    Args:
        device_id: for logs.
        distance_mm: event time → distance in mm (the scenario), or None for no target.
        clock: the simulated clock.
        link: optional symlink path (the site config's port).
        lines_per_s: REAL-time output rate.
    """

    def __init__(
        self,
        device_id: str,
        distance_mm: Callable[[datetime], float | None],
        clock: Clock,
        link: str | None = None,
        lines_per_s: float = 10.0,
    ) -> None:
        if lines_per_s <= 0:
            raise ValueError("lines_per_s must be > 0")
        self.device_id = device_id
        self.distance_mm = distance_mm
        self.clock = clock
        self.link = link
        self.lines_per_s = lines_per_s
        self.lines_written = 0
        self.pty: PtyPair | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def path(self) -> str:
        if self.pty is None:
            raise RuntimeError("HRXL simulator not started")
        return self.pty.path

    async def start(self) -> None:
        self.pty = PtyPair(self.link)
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"hrxl {self.device_id}")
        log.info("serial %s (maxbotix_hrxl) on %s at %.1f lines/s", self.device_id, self.path, self.lines_per_s)

    async def _run(self) -> None:
        assert self.pty is not None
        period = 1.0 / self.lines_per_s
        backlog = max(BACKLOG_LINES, math.ceil(BACKLOG_S * self.lines_per_s)) * len(hrxl_line(0))
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        while True:
            try:
                if self.pty.pending_for_client() > backlog:
                    self.pty.discard_unread()
                os.write(self.pty.master_fd, hrxl_line(self.distance_mm(self.clock.now())))
                self.lines_written += 1
            except BlockingIOError:
                self.pty.discard_unread()
            except OSError as exc:
                log.warning("serial %s: write failed: %s", self.device_id, exc)
            next_at = max(next_at + period, loop.time() - period)
            await asyncio.sleep(max(0.0, next_at - loop.time()))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self.pty is not None:
            self.pty.close()
            self.pty = None
