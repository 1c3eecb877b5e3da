"""What physics allows a reading to say (stdlib only: the lean gateway imports it).

The design: docs/contract.md ("The modules", `stormwatch/physics.py`).
"""

from __future__ import annotations

import math

#: Jennings (1950), "World's greatest observed point rainfalls", Monthly Weather Review 78(1):
#: P = 16.6 in · D^0.475 (D in hours) = 421.6 mm · D^0.475 (rain-records.md).
JENNINGS_MM = 422.0
JENNINGS_EXPONENT = 0.475
#: The envelope used = this × Jennings's line (rain-records.md: above every WMO record by ≥ 10 %).
ENVELOPE_MARGIN = 1.5

#: The review line's depth at one hour, mm: the India Meteorological Department's cloudburst, "100 mm
#: or more of rain in one hour" (rain-records.md). The line keeps Jennings's exponent, so it lies at
#: 100 / 422 = 23.7 % of his world-record line (15.8 % of the envelope) at every duration.
REVIEW_MM_AT_1H = 100.0

#: Flag of a rain reading whose tips exceed the world-record envelope over the time they cover:
#: physically impossible, not rain (0 tips counted, the interval is a rain-gauge data gap).
FLAG_BEYOND_ENVELOPE = "rain_beyond_envelope"
#: Flag of a rain reading at or above the review line: extreme but possible rain, kept and counted;
#: a storm it shapes says ``needs_verification`` (failure-kinds.md #24).
FLAG_EXTREME_RATE = "rain_extreme_rate"

#: quantity -> the units the rules, stores and displays read it in (UCUM style, as profiles write
#: them): a device profile giving one of these quantities another unit is refused when it is loaded
#: (:mod:`stormwatch.profiles`), since no rule would convert it. Quantities not named here are not
#: read by any rule and may carry any unit.
QUANTITY_UNITS: dict[str, tuple[str, ...]] = {
    "turbidity": ("NTU", "FNU"),
    "rain_tips": ("{tip}",),
    "precipitation": ("mm", "[in_i]"),
    "distance": ("mm", "cm", "m"),
    "sediment_depth": ("m",),
    "pressure": ("bar", "mbar", "Pa", "kPa"),
    "ph": ("[pH]",),
    "transparency": ("cm",),
    "device_error": ("1",),
}


def unit_problem(quantity: str, unit: str) -> str | None:
    """Why ``unit`` is not a unit of ``quantity`` (:data:`QUANTITY_UNITS`), or ``None``."""
    units = QUANTITY_UNITS.get(quantity)
    if units is None or unit in units:
        return None
    return f"unit {unit!r} is not a unit of {quantity} the rules read ({', '.join(units)})"


#: Contract quantities whose value is never negative (stormwatch/contract.py quantity table).
NON_NEGATIVE: frozenset[str] = frozenset({"rain_tips", "turbidity", "distance", "stage", "sediment_depth"})


def envelope_mm(seconds: float) -> float:
    """The most rain (mm) physically possible at one point in ``seconds`` (0 for ``seconds <= 0``).

    ``ENVELOPE_MARGIN × 422 × (seconds / 3600) ** 0.475`` (rain-records.md).
    """
    if seconds <= 0:
        return 0.0
    return ENVELOPE_MARGIN * JENNINGS_MM * float((seconds / 3600.0) ** JENNINGS_EXPONENT)


def max_tips(tip_mm: float, seconds: float, max_intensity_mm_h: float | None = None) -> int:
    """The most whole tips of ``tip_mm`` a gauge can count in ``seconds``.

    Args:
        tip_mm: depth per tip in mm (> 0).
        seconds: elapsed event time (≤ 0: no tip is possible).
        max_intensity_mm_h: an optional tighter limit of the gauge itself (its profile's
            ``counter.max_intensity_mm_h``): ``min(envelope, intensity × hours)``. It never loosens
            the envelope.

    Returns:
        ``floor(limit_mm / tip_mm)``, an int ≥ 0.

    Raises:
        ValueError: ``tip_mm`` or ``max_intensity_mm_h`` not > 0.
    """
    if not tip_mm > 0:
        raise ValueError(f"tip size must be > 0 mm, got {tip_mm!r}")
    limit = envelope_mm(seconds)
    if max_intensity_mm_h is not None:
        if not max_intensity_mm_h > 0:
            raise ValueError(f"max_intensity_mm_h must be > 0, got {max_intensity_mm_h!r}")
        limit = min(limit, max_intensity_mm_h * max(0.0, seconds) / 3600.0)
    return math.floor(limit / tip_mm)


def review_mm(seconds: float) -> float:
    """The review line (mm) over ``seconds``: ``100 × (seconds / 3600) ** 0.475`` (0 for ``seconds <= 0``;
    :data:`REVIEW_MM_AT_1H`, rain-records.md). 3 minutes: 24.1 mm; 1 hour: 100 mm; 24 hours: 452 mm."""
    if seconds <= 0:
        return 0.0
    return REVIEW_MM_AT_1H * float((seconds / 3600.0) ** JENNINGS_EXPONENT)


def rain_verdict(tips: int, tip_mm: float, seconds: float, max_intensity_mm_h: float | None = None) -> str | None:
    """What physics says of ``tips`` tips of ``tip_mm`` counted over ``seconds``.

    Returns:
        :data:`FLAG_BEYOND_ENVELOPE` when they exceed :func:`max_tips` (the envelope, or the gauge's
        tighter ``max_intensity_mm_h``); :data:`FLAG_EXTREME_RATE` when their depth is at or above
        :func:`review_mm`; ``None`` otherwise (and for 0 tips). 100 tips of 0.254 mm (25.4 mm) in
        3 minutes: extreme (the line is 24.1 mm there); in 2 s: beyond (the envelope allows 18.0 mm,
        70 tips).

    Raises:
        ValueError: ``tip_mm`` or ``max_intensity_mm_h`` not > 0.
    """
    if tips <= 0:
        return None
    if tips > max_tips(tip_mm, seconds, max_intensity_mm_h):
        return FLAG_BEYOND_ENVELOPE
    if tips * tip_mm >= review_mm(seconds):
        return FLAG_EXTREME_RATE
    return None


#: The most tips one reading can count: 2**32 - 1, the range of the widest counter a device profile
#: may declare (``counter.width_bits`` 16, 24 or 32; module docstring).
MAX_TIPS = 2**32 - 1
#: The highest turbidity (NTU or FNU) any field turbidity sensor reports, rounded up: 0-9999 FNU
#: (Electro-Chemical Devices Triton TR8; module docstring, docs/reference/sensors.md).
MAX_TURBIDITY = 10_000.0

#: quantity -> (the largest value any instrument can report, where that bound comes from).
UPPER_BOUNDS: dict[str, tuple[float, str]] = {
    "rain_tips": (float(MAX_TIPS), "the range of the widest (32-bit) tip counter"),
    "turbidity": (MAX_TURBIDITY, "the top of the widest field turbidity sensor range, 0-9999 FNU"),
}


def plausible_range(quantity: str) -> tuple[float, float]:
    """``(low, high)``: every value of ``quantity`` outside it is impossible (:func:`impossible_value`
    says why), every value inside it is not -- a hot path's check of a batch in two comparisons."""
    bound = UPPER_BOUNDS.get(quantity)
    return (0.0 if quantity in NON_NEGATIVE else -math.inf, math.inf if bound is None else bound[0])


def impossible_value(quantity: str, value: float) -> str | None:
    """Why ``value`` of ``quantity`` cannot have been measured -- negative (:data:`NON_NEGATIVE`) or
    above what any instrument reports (:data:`UPPER_BOUNDS`) -- or ``None``. The message names the
    quantity, the value and the bound with its source."""
    negative = negative_value(quantity, value)
    if negative is not None:
        return negative
    bound = UPPER_BOUNDS.get(quantity)
    if bound is not None and not value <= bound[0]:
        return f"{quantity} {value:.6g} is above {bound[0]:.10g}, {bound[1]}: no instrument reports it"
    return None


def negative_value(quantity: str, value: float) -> str | None:
    """Why ``value`` of ``quantity`` is impossible (a negative count, turbidity, distance or depth),
    or ``None``. The message names the quantity and the value."""
    if quantity in NON_NEGATIVE and value < 0:
        return f"{quantity} {value!r} is negative: physics forbids it"
    return None
