"""When a reading may say it was measured: the ONE plausibility bound on event times, shared by ingest
(:class:`stormwatch.ingest.validate.Validator`) and the alert engine (:class:`stormwatch.alerts.engine.Engine`).

A reading's event time is its gateway's clock, and that clock can lie (never set, or set ahead):
readings stamped too far in the future or before the floor are refused with a reason.

The design: docs/contract.md ("The modules", `stormwatch/timebounds.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property

#: How far ahead of the clock an event time may be, s (gateway clock skew): 5 minutes.
DEFAULT_MAX_FUTURE_S = 300.0
#: Oldest event time accepted live, in seconds behind the clock (90 days): 3 × the gateway outbox's
#: default age limit (30 days), so a long outage's replay is accepted and a 1970 stamp is not.
DEFAULT_MAX_AGE_S = 90 * 86400.0


@dataclass(frozen=True)
class TimeBounds:
    """The plausible event times around a clock reading ``now``.

    Attributes:
        max_future_s: seconds an event time may lie ahead of ``now`` (``future_time`` beyond).
        max_age_s: seconds it may lie behind (``implausible_time`` beyond); ``None``: no bound.

    Raises:
        ValueError: a negative bound.
    """

    max_future_s: float = DEFAULT_MAX_FUTURE_S
    max_age_s: float | None = DEFAULT_MAX_AGE_S

    def __post_init__(self) -> None:
        if self.max_future_s < 0 or (self.max_age_s is not None and self.max_age_s < 0):
            raise ValueError(f"time bounds must be >= 0 s (max_future_s={self.max_future_s}, "
                             f"max_age_s={self.max_age_s})")

    @cached_property
    def _ahead(self) -> timedelta:
        return timedelta(seconds=self.max_future_s)

    @cached_property
    def _behind(self) -> timedelta | None:
        return None if self.max_age_s is None else timedelta(seconds=self.max_age_s)

    def latest(self, now: datetime) -> datetime:
        """The latest plausible event time at clock time ``now``."""
        return now + self._ahead

    def earliest(self, now: datetime) -> datetime | None:
        """The earliest plausible event time at clock time ``now`` (``None``: no bound)."""
        behind = self._behind
        return None if behind is None else now - behind

    def check(self, t: datetime, now: datetime) -> tuple[str, str] | None:
        """``(reason, detail)`` when event time ``t`` is implausible at clock time ``now``, else ``None``.

        ``reason`` is ``future_time`` or ``implausible_time`` (:data:`stormwatch.reasons.REASONS`); the
        detail gives the time, how far off it is, the clock and the limit.
        """
        if t > self.latest(now):
            ahead_s = (t - now).total_seconds()
            return ("future_time", f"event time {t.isoformat()} is {ahead_s:.0f}s ahead of the clock "
                                   f"({now.isoformat()}; limit {self.max_future_s:.0f}s)")
        behind, age_s = self._behind, self.max_age_s
        if behind is not None and age_s is not None and t < now - behind:
            behind_d = (now - t).total_seconds() / 86400
            return ("implausible_time", f"event time {t.isoformat()} is {behind_d:.1f} days behind the clock "
                                        f"({now.isoformat()}; limit {age_s / 86400:g} days): the gateway's "
                                        "clock is probably wrong (no real-time clock, before NTP)")
        return None
