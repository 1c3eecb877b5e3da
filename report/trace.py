"""What the rules decided while a report's period was evaluated: the trace the tables and charts
are drawn from (:class:`Collector`, a :class:`~stormwatch.alerts.rules.RuleTrace`).

:mod:`stormwatch.report.build` fills it and :mod:`stormwatch.report.charts` draws from it; docs/reports.md
describes the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from typing import NamedTuple


class Window(NamedTuple):
    """A 5-minute window R2 judged at one discharge point."""

    start: datetime
    end: datetime
    status: str
    reason: str
    upstream: float | None
    downstream: float | None
    allowed: float | None
    point: str | None  # the discharge point's id (None: the site file's one turbidity_pair)


@dataclass
class Collector:
    """The :class:`~stormwatch.alerts.rules.RuleTrace` of a report's evaluation: what the rules decided,
    as they decided it."""

    rain: list[tuple[datetime, int, Fraction]] = field(default_factory=list)  # (time, tips, inches)
    #: (start, last tip, tips, qualified, confirmed, inches, lower bound)
    storms: list[tuple[datetime, datetime, int, bool, bool, Fraction, bool]] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)
    basin: list[tuple[datetime, float, float, str | None]] = field(default_factory=list)  # ..., basin id

    def rain_counted(self, t: datetime, tips: int, depth_in: Fraction) -> None:
        self.rain.append((t, tips, depth_in))

    def storm_ended(self, start: datetime, last_tip: datetime, tips: int, qualified: bool, confirmed: bool,
                    depth_in: Fraction, lower_bound: bool = False) -> None:
        self.storms.append((start, last_tip, tips, qualified, confirmed, depth_in, lower_bound))

    def turbidity_window(self, start: datetime, end: datetime, status: str, reason: str, upstream: float | None,
                         downstream: float | None, allowed: float | None, point: str | None = None) -> None:
        # a long compliant stretch is kept as its windows (charts need them); memory: a year of
        # 5-minute windows is 105,120 small records (per discharge point)
        self.windows.append(Window(start, end, status, reason, upstream, downstream, allowed, point))

    def basin_settled(self, t: datetime, depth_ft: float, lost_fraction: float, basin: str | None = None) -> None:
        self.basin.append((t, depth_ft, lost_fraction, basin))

    def windows_of(self, point: str | None) -> list[Window]:
        """The windows R2 judged at one discharge point (``None``: the site file's one pair)."""
        return [w for w in self.windows if w.point == point]
