"""Exact rain arithmetic. Tips are integers; a gauge's resolution is an exact rational.

Source: sensors.md — 0.01 in = 0.254 mm exactly (1 in = 25.4 mm by definition); float sums of
0.254 drift (50 × 0.254 summed in binary floating point is 12.699999999999985 mm), so counts
stay integers and depth is computed once, for output (design-notes.md, "Counting rain").
"""

from __future__ import annotations

import functools
import re
from decimal import Decimal
from fractions import Fraction
from typing import Literal

from stormwatch.numbers import NumberError, parse_decimal

MM_PER_IN = Fraction(254, 10)
LengthUnit = Literal["in", "mm"]

#: Tip sizes a tipping bucket can have, in mm. Real gauges tip at 0.1 mm (TE525MM, RainVUE10-MM),
#: 0.2 mm (HOBO RG3-M, Davis metric) or 0.01 in = 0.254 mm (docs/reference/sensors.md); the bounds
#: leave a decade of room either side and refuse what no bucket does (1e-7 mm, 1e400 mm).
TIP_SIZE_MM_MIN = Decimal("0.01")
TIP_SIZE_MM_MAX = Decimal("10")


def parse_tip_size(text: str, unit: LengthUnit) -> Decimal:
    """A tip size as written (an exact decimal in ``unit``), checked against what a bucket can be.

    Returns:
        The size, without exponent notation (``Decimal("0.2")`` for ``"2e-1"``).

    Raises:
        ValueError: not a decimal number, or outside :data:`TIP_SIZE_MM_MIN` .. :data:`TIP_SIZE_MM_MAX`
            (the message gives the range in ``unit``).
    """
    try:
        size = parse_decimal(text.strip())
    except NumberError as exc:
        raise ValueError(str(exc)) from None
    per_mm = Decimal(1) if unit == "mm" else Decimal("25.4")
    lo, hi = TIP_SIZE_MM_MIN / per_mm, TIP_SIZE_MM_MAX / per_mm
    if not size.is_finite() or not lo <= size <= hi:
        raise ValueError(f"{text!r}: a tipping bucket tips at {float(lo):.3g} to {float(hi):.3g} {unit} "
                         "(0.1 mm, 0.2 mm and 0.01 in are usual)")
    return Decimal(format(size.normalize(), "f"))

_RESOLUTION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(in|mm)\s*$")


class TipResolution:
    """Rain depth per tip, held exactly as a fraction of an inch.

    Build with :meth:`parse` (``"0.01 in"``, ``"0.2 mm"``) or :meth:`of`.
    """

    __slots__ = ("_mm_float", "_text", "inches")

    def __init__(self, inches: Fraction) -> None:
        if inches <= 0:
            raise ValueError(f"tip resolution must be > 0, got {inches} in")
        self.inches = inches
        self._text: str | None = None  # str(self), made once (named on every rain reading)
        self._mm_float: float | None = None

    @classmethod
    def of(cls, amount: str | Fraction, unit: LengthUnit) -> TipResolution:
        """Resolution from a decimal string (parsed exactly) and a unit."""
        value = Fraction(amount)
        return cls(value if unit == "in" else value / MM_PER_IN)

    @classmethod
    def parse(cls, text: str) -> TipResolution:
        """Parse ``"<decimal> in|mm"``.

        Raises:
            ValueError: on any other form.
        """
        m = _RESOLUTION.match(text)
        if not m:
            raise ValueError(f"tip resolution {text!r}: expected '<decimal> in' or '<decimal> mm'")
        return cls.of(m.group(1), m.group(2))  # type: ignore[arg-type]

    @property
    def mm(self) -> Fraction:
        return self.inches * MM_PER_IN

    @property
    def mm_float(self) -> float:
        """:attr:`mm` as a float (for the physical bounds, which are floats; made once)."""
        if self._mm_float is None:
            self._mm_float = float(self.mm)
        return self._mm_float

    def depth_in(self, tips: int) -> Fraction:
        """Exact depth in inches of ``tips`` tips."""
        return tips * self.inches

    def depth_mm(self, tips: int) -> Fraction:
        """Exact depth in millimetres of ``tips`` tips."""
        return tips * self.mm

    def tips_to_reach_in(self, threshold_in: Fraction) -> int:
        """The fewest whole tips whose depth is ≥ ``threshold_in`` (exact ceiling)."""
        q, r = divmod(threshold_in, self.inches)
        return int(q) + (1 if r else 0)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TipResolution) and other.inches == self.inches

    def __hash__(self) -> int:
        return hash(self.inches)

    def __repr__(self) -> str:
        return f"TipResolution({self.inches} in)"

    def __str__(self) -> str:
        """The tip size as a person reads it: ``0.01 in``, or ``0.2 mm`` when inches would not be a
        short exact decimal (0.2 mm is 1/127 in). The canonical text of a reading's ``tip_size``."""
        if self._text is None:
            self._text = _resolution_text(self.inches)
        return self._text


def _resolution_text(inches: Fraction) -> str:
    for value, unit in ((inches, "in"), (inches * MM_PER_IN, "mm")):
        text = _short_decimal(value)
        if text is not None:
            return f"{text} {unit}"
    return f"{float(inches * MM_PER_IN):.4g} mm"


def _short_decimal(value: Fraction, places: int = 6) -> str | None:
    """``value`` as an exact decimal of at most ``places`` decimals, or ``None``."""
    scaled = value * 10**places
    if scaled.denominator != 1:
        return None
    return format(Decimal(scaled.numerator).scaleb(-places).normalize(), "f")


@functools.lru_cache(maxsize=256)
def tip_size_of(text: str) -> TipResolution:
    """The tip size a reading or a site file names (``"0.01 in"``, ``"0.2 mm"``), checked against what a
    bucket can be (:data:`TIP_SIZE_MM_MIN` .. :data:`TIP_SIZE_MM_MAX`). Its canonical text is
    ``str(result)`` (``"0.254 mm"`` is ``0.01 in``). Cached: a few sizes exist, read once per reading.

    Raises:
        ValueError: not ``<decimal> in|mm``, or a size no tipping bucket has.
    """
    res = TipResolution.parse(text)
    lo, hi = Fraction(TIP_SIZE_MM_MIN), Fraction(TIP_SIZE_MM_MAX)
    if not lo <= res.mm <= hi:
        raise ValueError(f"tip size {text!r}: a tipping bucket tips at {TIP_SIZE_MM_MIN} to {TIP_SIZE_MM_MAX} mm "
                         "(0.1 mm, 0.2 mm and 0.01 in are usual)")
    return res


#: The quantity of a station record's values (``stormwatch station import``): rain depth over the
#: interval that ends at the reading's time (the site file's ``fallback_gauge.interval_minutes``).
PRECIPITATION = "precipitation"
#: Units a precipitation value may carry (UCUM: ``mm``, ``[in_i]``) and inches per unit, exact.
PRECIPITATION_UNITS: dict[str, Fraction] = {"mm": 1 / MM_PER_IN, "[in_i]": Fraction(1)}
#: The ``gateway`` of every stored station value: it did not come through the site's gateway.
STATION_GATEWAY = "station"


def precipitation_in(value: float, unit: str) -> Fraction | None:
    """A precipitation value in exact inches (``0.3`` mm is ``3/254`` in: the value's shortest
    decimal text, never its binary float), or ``None`` when ``unit`` is not one of
    :data:`PRECIPITATION_UNITS` or the value is negative or not finite."""
    per = PRECIPITATION_UNITS.get(unit)
    if per is None or not value >= 0 or value == float("inf"):
        return None
    return Fraction(repr(float(value))) * per
