"""Stage–storage of a sediment basin and the capacity lost to sediment (rules.md R3).

Source: ``docs/reference/hydrology.md``, "Stage–storage of a rectangular basin with sloped
sides": bottom L × W (ft), side slopes z horizontal : 1 vertical, depth h (ft) above the floor::

    V(h) = L·W·h + (L + W)·z·h² + (4/3)·z²·h³     (ft³, exact; = the prismoidal formula)

Check: L = 40, W = 20, z = 3, h = 2 → 2,416 ft³. Plans may instead give a stage–storage table
(stage ft → volume ft³), interpolated linearly between rows.

Capacity lost with the sediment surface at s: V(s) / V(H), H the design storage height. Because
the basin widens upward, half the volume lies in the upper part: for z > 0 the depth d with
V(d) = ½·V(H) is *above* H/2 (40 × 20 ft, 3:1, H = 4 ft: d ≈ 2.56 ft; at 2 ft only 35 % is lost).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass
from typing import Protocol

from stormwatch.config import Basin


class StageStorage(Protocol):
    """Volume (ft³) below a stage (ft above the floor), increasing in stage."""

    @property
    def design_height_ft(self) -> float:
        """Design storage height above the floor (ft)."""
        ...

    def volume_ft3(self, stage_ft: float) -> float: ...


@dataclass(frozen=True)
class SlopedRectangle:
    """Rectangular basin, bottom ``length_ft`` × ``width_ft``, side slope ``z`` (H:V)."""

    length_ft: float
    width_ft: float
    z: float
    design_height_ft: float

    def volume_ft3(self, stage_ft: float) -> float:
        """V(h) in ft³ (hydrology.md); 0 for h ≤ 0; extrapolated with the same formula above H."""
        h = max(0.0, stage_ft)
        lw, z = self.length_ft * self.width_ft, self.z
        return lw * h + (self.length_ft + self.width_ft) * z * h * h + (4.0 / 3.0) * z * z * h ** 3


@dataclass(frozen=True)
class StageStorageTable:
    """A stage–storage table from design plans: rows ``(stage_ft, volume_ft3)`` from ``(0, 0)``.

    Linear interpolation between rows; beyond the last row, the last segment's slope is extended.
    """

    rows: tuple[tuple[float, float], ...]
    design_height_ft: float

    def __post_init__(self) -> None:
        if len(self.rows) < 2 or self.rows[0] != (0.0, 0.0):
            raise ValueError("a stage-storage table needs >= 2 rows starting at (0, 0)")
        for (s0, v0), (s1, v1) in zip(self.rows, self.rows[1:], strict=False):
            if not (s1 > s0 and v1 >= v0):
                raise ValueError("stage-storage rows must increase in stage and not decrease in volume")

    def volume_ft3(self, stage_ft: float) -> float:
        if stage_ft <= 0:
            return 0.0
        stages = [r[0] for r in self.rows]
        i = bisect_right(stages, stage_ft) - 1
        i = min(i, len(self.rows) - 2)
        (s0, v0), (s1, v1) = self.rows[i], self.rows[i + 1]
        return v0 + (v1 - v0) * (stage_ft - s0) / (s1 - s0)


def stage_storage_of(basin: Basin) -> StageStorage:
    """The stage–storage relation of a site's basin (geometry or table)."""
    if basin.geometry is not None:
        g = basin.geometry
        return SlopedRectangle(g.bottom_length_ft, g.bottom_width_ft, g.side_slope_z, g.design_height_ft)
    assert basin.stage_storage is not None
    return StageStorageTable(tuple(basin.stage_storage), basin.design_height)


def lost_capacity(ss: StageStorage, sediment_depth_ft: float) -> float:
    """V(s) / V(H): the fraction of design storage filled by sediment at depth ``s`` (ft).

    0 for s ≤ 0; may exceed 1 when sediment is above the design height.

    Raises:
        ValueError: the design storage V(H) is not a positive finite volume (a flat stage-storage
            table; site files are refused that, :class:`stormwatch.config.Basin`) -- never a
            ``ZeroDivisionError`` nor a fraction of an infinite basin.
    """
    design = ss.volume_ft3(ss.design_height_ft)
    if not 0 < design < math.inf:
        raise ValueError(f"design storage V(H) at {ss.design_height_ft:g} ft is {design:g} ft³: "
                         "a basin without a positive finite design storage has no capacity to lose")
    return ss.volume_ft3(sediment_depth_ft) / design


def depth_for_fraction(ss: StageStorage, fraction: float, tol_ft: float = 1e-9) -> float:
    """The stage d (ft) with V(d) = fraction · V(H), by bisection on [0, H].

    Raises:
        ValueError: fraction outside [0, 1].
    """
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be within [0, 1], got {fraction}")
    target = fraction * ss.volume_ft3(ss.design_height_ft)
    lo, hi = 0.0, ss.design_height_ft
    while hi - lo > tol_ft:
        mid = (lo + hi) / 2
        if ss.volume_ft3(mid) < target:
            lo = mid
        else:
            hi = mid
    return hi

