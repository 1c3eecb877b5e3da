"""The gateway's clock floor: no reading is stamped while the clock reads earlier.

An edge box without a battery-backed real-time clock boots at 1970-01-01 (or the date its image
was made) and keeps that time until NTP reaches a server -- over a cellular link that may take
minutes or never. Readings stamped then carry a plausible-looking but false event time. A clock
reading before the floor cannot be right, so the gateway waits: it logs one ERROR naming the
clock, the floor and where the floor comes from, polls nothing and stamps nothing, checks again
every :data:`CHECK_S` seconds, and logs one INFO when the clock has been set (then polling starts
on the grid of the real time; readings already in the outbox are published meanwhile).

The design: docs/gateway.md ("The modules", `gateway/clockfloor.py`).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import UTC, date, datetime

from stormwatch.clock import Clock, WallClock

log = logging.getLogger(__name__)

#: The date this version was cut (bump it with ``__version__``): a wall clock before it is wrong.
BUILD_DATE = date(2026, 12, 1)
#: Real seconds between checks of a clock that is still before the floor.
CHECK_S = 1.0


@dataclass(frozen=True)
class ClockFloor:
    """The earliest plausible clock time and where it comes from (for the log line).

    Attributes:
        at: the floor (UTC).
        source: ``"build date"`` or ``"--clock-floor"``.
    """

    at: datetime
    source: str

    @classmethod
    def for_clock(cls, clock: Clock, configured: date | datetime | None) -> ClockFloor | None:
        """The floor of ``clock``: ``configured`` if given, else :data:`BUILD_DATE` for a wall clock,
        else none (a simulated clock's time is chosen on purpose)."""
        if configured is not None:
            return cls(as_utc(configured), "--clock-floor")
        if isinstance(clock, WallClock):
            return cls(as_utc(BUILD_DATE), "build date")
        return None

    def wait(self, clock: Clock, stop: threading.Event, check_s: float = CHECK_S) -> bool:
        """Return once ``clock.now()`` is at or after the floor (True), or when ``stop`` is set (False).

        Logs one ERROR if the clock is before the floor and one INFO when it has been set. Waits in
        real time (``stop.wait``): a clock before the floor cannot pace anything.
        """
        now = clock.now()
        if now >= self.at:
            return True
        log.error("clock reads %s, before the clock floor %s (%s): not polling or stamping readings until "
                  "the clock is set (no real-time clock? NTP not reached yet?); checking every %g s",
                  now.isoformat(), self.at.isoformat(), self.source, check_s)
        while not stop.wait(self._pause(clock, now, check_s)):
            now = clock.now()
            if now >= self.at:
                log.info("clock set: %s is past the clock floor %s; polling starts", now.isoformat(),
                         self.at.isoformat())
                return True
        return False


    def _pause(self, clock: Clock, now: datetime, check_s: float) -> float:
        """Real seconds until the next check: ``check_s``, or less when the floor is nearer (a
        scenario clock converts its seconds with ``real_seconds``)."""
        remaining = max(0.0, (self.at - now).total_seconds())
        real = getattr(clock, "real_seconds", None)
        return min(check_s, real(remaining) if callable(real) else remaining)


def as_utc(value: date | datetime) -> datetime:
    """Midnight UTC of a date; a datetime converted to UTC (a naive one is taken as UTC)."""
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return datetime(value.year, value.month, value.day, tzinfo=UTC)


def parse_floor(text: str) -> datetime:
    """``--clock-floor`` text: an ISO date (``2026-06-01``) or time with offset, as UTC.

    Raises:
        ValueError: not an ISO 8601 date or time (the message quotes it).
    """
    try:
        return as_utc(datetime.fromisoformat(text))
    except ValueError:
        raise ValueError(f"--clock-floor {text!r} is not an ISO 8601 date (e.g. 2026-06-01)") from None
