"""The rain envelope lies above every WMO world record (docs/reference/rain-records.md).

Expected values come from the records as the WMO archive and the cited papers state them (typed
here from rain-records.md), and from Jennings's line in its original units (16.6 in × D^0.475).
"""

from __future__ import annotations

import pytest

from stormwatch.physics import JENNINGS_MM, envelope_mm, max_tips, negative_value

#: (duration in hours, depth in mm, where/when) -- rain-records.md, "World records".
WMO_RECORDS = [
    (1 / 60, 38, "Barot, Guadeloupe, 1970-11-26"),
    (42 / 60, 305, "Holt, Missouri, 1947-06-22"),
    (12, 1144, "Foc-Foc, La Réunion, 1966-01-08"),
    (24, 1825, "Foc-Foc, La Réunion, 1966-01-07/08"),
    (48, 2493, "Cherrapunji, India, 1995-06-15/16"),
    (72, 3929, "Cratère Commerson, La Réunion, 2007-02-24/26"),
    (96, 4936, "Cratère Commerson, La Réunion, 2007-02-24/27"),
    (365 * 24, 26470, "Cherrapunji, India, 1860-08 to 1861-07"),
]


def test_jennings_coefficient_is_his_16_6_inches() -> None:
    assert JENNINGS_MM == pytest.approx(16.6 * 25.4, rel=1e-3)


@pytest.mark.parametrize(("hours", "mm", "where"), WMO_RECORDS)
def test_every_wmo_record_lies_at_least_10_percent_below_the_envelope(hours: float, mm: float, where: str) -> None:
    assert mm <= 0.9 * envelope_mm(hours * 3600), where


def test_records_since_1950_exceed_jennings_line_itself() -> None:
    # Why the margin: the 2007 Commerson falls lie above 422 x D^0.475 (72 h: 3,218 mm; 96 h: 3,689 mm).
    assert 3929 > 422 * 72 ** 0.475
    assert 4936 > 422 * 96 ** 0.475


def test_max_tips() -> None:
    # One hour: 1.5 x 422 = 633 mm = 2,492 tips of 0.254 mm, 3,165 of 0.2 mm.
    assert max_tips(0.254, 3600) == 2492
    assert max_tips(0.2, 3600) == 3165
    assert max_tips(0.254, 0) == 0
    assert max_tips(0.254, -5) == 0
    # A 500 mm/h gauge over one hour: 500 mm = 1,968 tips (tighter than the envelope's 633 mm);
    # a 700 mm/h one is looser than the envelope there, which stays the bound.
    assert max_tips(0.254, 3600, 500.0) == 1968
    assert max_tips(0.254, 3600, 700.0) == 2492
    with pytest.raises(ValueError):
        max_tips(0.0, 60)


def test_negative_values_physics_forbids() -> None:
    assert negative_value("rain_tips", -5) is not None
    assert negative_value("turbidity", -0.1) is not None
    assert negative_value("sediment_depth", -0.01) is not None
    assert negative_value("temperature", -3.5) is None
    assert negative_value("turbidity", 0.0) is None
