"""Stage-storage geometry (hydrology.md): V(h) = L W h + (L+W) z h^2 + 4/3 z^2 h^3, checked against
the hand value 2,416 ft^3 and against the prismoidal formula computed independently here."""

from __future__ import annotations

import pytest

from stormwatch.alerts.geometry import SlopedRectangle, StageStorageTable, depth_for_fraction, lost_capacity

BASIN = SlopedRectangle(40.0, 20.0, 3.0, 4.0)


def prismoidal(h: float, length: float = 40.0, width: float = 20.0, z: float = 3.0) -> float:
    """h/6 (A0 + 4 Amid + Ah), A(y) = (L + 2zy)(W + 2zy): an independent form of the same volume."""
    def area(y: float) -> float:
        return (length + 2 * z * y) * (width + 2 * z * y)
    return h / 6 * (area(0) + 4 * area(h / 2) + area(h))


def test_hand_value_2416() -> None:
    # 40*20*2 + 60*3*4 + 4/3*9*8 = 1600 + 720 + 96
    assert BASIN.volume_ft3(2.0) == pytest.approx(2416.0, abs=1e-9)
    assert BASIN.volume_ft3(4.0) == pytest.approx(6848.0, abs=1e-9)


@pytest.mark.parametrize("h", [0.0, 0.3, 1.0, 2.5, 3.99, 4.0])
def test_formula_equals_prismoidal(h: float) -> None:
    assert BASIN.volume_ft3(h) == pytest.approx(prismoidal(h), rel=1e-12, abs=1e-9)


def test_lost_capacity_clamped_below_and_open_above() -> None:
    assert lost_capacity(BASIN, -1.0) == 0.0
    assert lost_capacity(BASIN, 4.0) == pytest.approx(1.0)
    assert lost_capacity(BASIN, 4.5) > 1.0
    assert lost_capacity(BASIN, 2.0) == pytest.approx(2416 / 6848)  # 35.3 %: half the height is not half the volume


def test_half_volume_depth_by_bisection_matches_newton_on_prismoid() -> None:
    target = 0.5 * prismoidal(4.0)
    d = 2.0
    for _ in range(50):  # Newton: dV/dh = A(h), the surface area at h
        d -= (prismoidal(d) - target) / ((40 + 6 * d) * (20 + 6 * d))
    assert 2.5 < d < 2.6  # the basin widens upward: half the volume lies above H/2
    assert depth_for_fraction(BASIN, 0.5) == pytest.approx(d, abs=1e-8)


def test_table_interpolates_linearly_and_inverts() -> None:
    table = StageStorageTable(((0.0, 0.0), (1.0, 1000.0), (2.0, 3000.0)), design_height_ft=2.0)
    assert table.volume_ft3(0.5) == 500.0
    assert table.volume_ft3(1.5) == 2000.0
    assert lost_capacity(table, 1.5) == pytest.approx(2000 / 3000)
    assert depth_for_fraction(table, 0.5) == pytest.approx(1.25, abs=1e-8)  # 1500 ft^3 between rows 1 and 2


def test_table_rejects_bad_rows() -> None:
    with pytest.raises(ValueError):
        StageStorageTable(((0.0, 0.0), (1.0, 10.0), (0.5, 20.0)), design_height_ft=1.0)


def test_lost_capacity_of_a_flat_table_is_a_clear_error_not_a_zero_division() -> None:
    flat = StageStorageTable(((0.0, 0.0), (1.0, 0.0), (4.0, 0.0)), design_height_ft=4.0)  # storage never rises
    with pytest.raises(ValueError, match=r"design storage V\(H\) at 4 ft is 0 ft³: a basin without a positive"):
        lost_capacity(flat, 1.0)
    infinite = SlopedRectangle(float("inf"), 20.0, 3.0, 4.0)
    with pytest.raises(ValueError, match="is inf ft³"):
        lost_capacity(infinite, 1.0)
