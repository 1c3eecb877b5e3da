"""A sorted series of rain-gauge tip times: the one representation of simulated rain.

A tip is an integer event; depth is ``tips × resolution`` (exact, :class:`stormwatch.rain.TipResolution`).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from datetime import datetime, timedelta
from fractions import Fraction

from stormwatch.rain import TipResolution


class TipSeries:
    """Tip times of one gauge, sorted (several tips may share one instant).

    Args:
        times: tip times, timezone-aware UTC (sorted here).
        resolution: depth per tip.

    Raises:
        ValueError: a naive datetime.
    """

    __slots__ = ("_posix", "resolution", "times")

    def __init__(self, times: Sequence[datetime], resolution: TipResolution) -> None:
        for t in times:
            if t.tzinfo is None:
                raise ValueError(f"tip time {t} is naive; tip times must be timezone-aware UTC")
        self.times: tuple[datetime, ...] = tuple(sorted(times))
        self._posix: tuple[float, ...] = tuple(t.timestamp() for t in self.times)
        self.resolution = resolution

    def __len__(self) -> int:
        return len(self.times)

    def tips_until(self, t: datetime) -> int:
        """Tips with tip time ≤ ``t``."""
        return bisect_right(self.times, t)

    def tips_between(self, start: datetime, end: datetime) -> int:
        """Tips with ``start < time ≤ end``."""
        return max(0, bisect_right(self.times, end) - bisect_right(self.times, start))

    def depth_in_until(self, t: datetime) -> Fraction:
        """Exact cumulative depth in inches at ``t``."""
        return self.resolution.depth_in(self.tips_until(t))

    def counter_at(self, t: datetime, offset: int = 0, width_bits: int = 16) -> int:
        """A cumulative hardware counter at ``t``: ``(offset + tips ≤ t) mod 2**width_bits``."""
        return (offset + self.tips_until(t)) % (1 << width_bits)

    def intensity_in_per_h(self, t: datetime, window: timedelta) -> Fraction:
        """Rain intensity in in/h over the trailing window ``(t − window, t]`` (exact)."""
        hours = Fraction(round(window.total_seconds() * 1_000_000), 3_600_000_000)
        if hours <= 0:
            raise ValueError("window must be positive")
        return self.resolution.depth_in(self.tips_between(t - window, t)) / hours

    def decayed_sum(self, t: datetime, hold: timedelta, tau: timedelta, horizon_taus: float = 12.0) -> float:
        """Σ over tips ≤ t of a kernel K(age): 1 while ``age < hold``, then ``exp(−(age − hold)/tau)``.

        The kernel weights each tip by how recently it fell: a trailing window of length ``hold``
        followed by an exponential decay with time constant ``tau``. Tips older than
        ``hold + horizon_taus·tau`` are ignored (weight < e⁻¹²). Returns tips (a float).
        """
        now = t.timestamp()
        hold_s = hold.total_seconds()
        tau_s = tau.total_seconds()
        lo = bisect_left(self._posix, now - hold_s - horizon_taus * tau_s)
        hi = bisect_right(self._posix, now)
        total = 0.0
        for ts in self._posix[lo:hi]:
            age = now - ts
            total += 1.0 if age < hold_s else math.exp(-(age - hold_s) / tau_s)
        return total
