"""Stage–storage of the sediment basin and its inverse.

Source: docs/reference/hydrology.md, "Stage–storage of a rectangular basin with sloped sides":
``V(h) = L·W·h + (L + W)·z·h² + (4/3)·z²·h³`` (exact prismoid), or a stage–storage table from the
design plans interpolated linearly. Capacity lost = V(sediment depth) / V(H) (rules.md R3).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable

from stormwatch.config import Basin


def prismoid_volume_ft3(length_ft: float, width_ft: float, z: float, h_ft: float) -> float:
    """V(h) in ft³ of a rectangular basin L × W with side slopes z:1, filled to h ft (hydrology.md)."""
    return length_ft * width_ft * h_ft + (length_ft + width_ft) * z * h_ft**2 + (4.0 / 3.0) * z**2 * h_ft**3


def table_volume_ft3(rows: tuple[tuple[float, float], ...], h_ft: float) -> float:
    """V(h) by linear interpolation in stage–storage rows ``[stage_ft, volume_ft3]`` (clamped at the ends)."""
    if h_ft <= rows[0][0]:
        return rows[0][1]
    if h_ft >= rows[-1][0]:
        return rows[-1][1]
    stages = [s for s, _ in rows]
    i = bisect_right(stages, h_ft)
    (s0, v0), (s1, v1) = rows[i - 1], rows[i]
    return v0 + (v1 - v0) * (h_ft - s0) / (s1 - s0)


def volume_function(basin: Basin) -> Callable[[float], float]:
    """h (ft above the floor) → stored volume (ft³) for a site's basin."""
    if basin.geometry is not None:
        g = basin.geometry
        return lambda h: prismoid_volume_ft3(g.bottom_length_ft, g.bottom_width_ft, g.side_slope_z, h)
    rows = basin.stage_storage
    assert rows is not None  # Basin validates: exactly one of geometry / stage_storage
    return lambda h: table_volume_ft3(rows, h)


def solve_depth_ft(volume: Callable[[float], float], target_ft3: float, high_ft: float, tol_ft: float = 1e-9) -> float:
    """The depth h in [0, high_ft] with ``volume(h) = target_ft3`` (bisection; volume non-decreasing).

    Raises:
        ValueError: the target is negative or above ``volume(high_ft)``.
    """
    if target_ft3 < 0 or target_ft3 > volume(high_ft) * (1 + 1e-12):
        raise ValueError(f"volume {target_ft3} ft³ is outside 0..{volume(high_ft)} ft³")
    lo, hi = 0.0, high_ft
    while hi - lo > tol_ft:
        mid = (lo + hi) / 2
        if volume(mid) < target_ft3:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2
