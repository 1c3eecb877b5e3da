"""NRCS (SCS) 24-hour design storms turned into individual tip times.

Source: docs/reference/hydrology.md, "NRCS (SCS) 24-hour design-storm distributions"
(HEC-HMS 4.13 1-minute arrays sampled hourly, plus every 0.1 h from 11.5 h to 12.5 h around the
peak; Type II agrees with WSDOT Hydraulics Manual Table 4C-4). Between tabulated points the
cumulative fraction is interpolated linearly. All arithmetic is exact (:class:`fractions.Fraction`):
the k-th tip happens when the cumulative depth reaches ``k × resolution``, so a storm of depth D
at resolution r gives exactly ``floor(D / r)`` tips.
"""

from __future__ import annotations

import functools
from bisect import bisect_left
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Literal

Distribution = Literal["type_ii", "type_iii"]

#: Storm duration in hours.
STORM_HOURS = 24

_HOURLY: dict[str, tuple[str, ...]] = {
    # hour 0 .. 24 (hydrology.md table)
    "type_ii": (
        "0.000", "0.011", "0.022", "0.035", "0.048", "0.063", "0.080", "0.099", "0.120", "0.147",
        "0.181", "0.235", "0.663", "0.772", "0.820", "0.854", "0.880", "0.902", "0.921", "0.938",
        "0.952", "0.965", "0.977", "0.989", "1.000",
    ),
    "type_iii": (
        "0.000", "0.010", "0.020", "0.031", "0.043", "0.057", "0.072", "0.090", "0.114", "0.146",
        "0.189", "0.250", "0.500", "0.750", "0.811", "0.854", "0.886", "0.909", "0.928", "0.943",
        "0.957", "0.969", "0.981", "0.991", "1.000",
    ),
}
_PEAK: dict[str, tuple[str, ...]] = {
    # 11.5 h, 11.6 h, ..., 12.5 h (hydrology.md, "Around the peak")
    "type_ii": ("0.283", "0.307", "0.354", "0.431", "0.568", "0.663", "0.682", "0.699", "0.713", "0.725", "0.735"),
    "type_iii": ("0.298", "0.314", "0.339", "0.373", "0.416", "0.500", "0.584", "0.627", "0.661", "0.686", "0.702"),
}


@functools.cache
def cumulative_table(distribution: Distribution) -> tuple[tuple[Fraction, Fraction], ...]:
    """The tabulated points ``(hour, cumulative fraction)`` of a distribution, exact and sorted.

    Hourly values 0..24 h merged with the 0.1-h values from 11.5 h to 12.5 h (hydrology.md).

    Raises:
        KeyError: unknown distribution.
    """
    points: dict[Fraction, Fraction] = {Fraction(h): Fraction(v) for h, v in enumerate(_HOURLY[distribution])}
    for i, v in enumerate(_PEAK[distribution]):
        hour = Fraction(115 + i, 10)
        if hour in points and points[hour] != Fraction(v):
            raise AssertionError(f"{distribution}: table disagrees at {hour} h")  # tables are constants
        points[hour] = Fraction(v)
    return tuple(sorted(points.items()))


def cumulative_fraction(distribution: Distribution, hours: Fraction) -> Fraction:
    """Cumulative fraction of the storm depth fallen after ``hours`` (0 before, 1 after 24 h)."""
    table = cumulative_table(distribution)
    if hours <= 0:
        return Fraction(0)
    if hours >= STORM_HOURS:
        return Fraction(1)
    times = [t for t, _ in table]
    i = bisect_left(times, hours)
    if times[i] == hours:
        return table[i][1]
    (t0, f0), (t1, f1) = table[i - 1], table[i]
    return f0 + (f1 - f0) * (hours - t0) / (t1 - t0)


def hours_to_reach(distribution: Distribution, fraction: Fraction) -> Fraction:
    """The earliest storm hour at which the cumulative fraction reaches ``fraction`` (0 < f ≤ 1).

    Raises:
        ValueError: ``fraction`` outside (0, 1].
    """
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    table = cumulative_table(distribution)
    fractions = [f for _, f in table]
    i = bisect_left(fractions, fraction)
    (t0, f0), (t1, f1) = table[i - 1], table[i]
    return t0 + (t1 - t0) * (fraction - f0) / (f1 - f0)


def design_storm_tip_offsets(distribution: Distribution, depth_in: Fraction, resolution_in: Fraction) -> list[Fraction]:
    """Exact hour offsets (from storm start) of every tip of a design storm.

    Args:
        distribution: ``type_ii`` or ``type_iii``.
        depth_in: total storm depth in inches (exact).
        resolution_in: depth per tip in inches (exact, e.g. ``Fraction(1, 100)``).

    Returns:
        ``floor(depth_in / resolution_in)`` non-decreasing offsets in hours; tip k (1-based) falls
        when the cumulative depth reaches ``k × resolution_in``.

    Raises:
        ValueError: non-positive depth or resolution.
    """
    if depth_in <= 0 or resolution_in <= 0:
        raise ValueError(f"depth ({depth_in} in) and resolution ({resolution_in} in) must be > 0")
    return list(_tip_offsets(distribution, depth_in, resolution_in))


@functools.lru_cache(maxsize=64)
def _tip_offsets(distribution: Distribution, depth_in: Fraction, resolution_in: Fraction) -> tuple[Fraction, ...]:
    """:func:`design_storm_tip_offsets`, kept for the storms a fleet of sites shares."""
    n = int(depth_in // resolution_in)
    return tuple(hours_to_reach(distribution, k * resolution_in / depth_in) for k in range(1, n + 1))


def hours_to_timedelta(hours: Fraction) -> timedelta:
    """An exact hour offset as a timedelta, rounded up to whole microseconds (a tip is never early)."""
    micro = hours * 3_600_000_000
    return timedelta(microseconds=-int(-micro // 1))


def design_storm_tip_times(
    distribution: Distribution, depth_in: Fraction, resolution_in: Fraction, start: datetime
) -> list[datetime]:
    """Tip times (UTC) of a design storm starting at ``start`` (see :func:`design_storm_tip_offsets`)."""
    return [start + hours_to_timedelta(h) for h in design_storm_tip_offsets(distribution, depth_in, resolution_in)]
