"""Exact rain arithmetic. Tips are integers; a gauge's resolution is an exact rational.

Source: sensors.md — 0.01 in = 0.254 mm exactly (1 in = 25.4 mm by definition); float sums of
0.254 drift (50 × 0.254 summed in binary floating point is 12.699999999999985 mm), so counts
stay integers and depth is computed once, for output (design-notes.md, "Counting rain").
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Literal

MM_PER_IN = Fraction(254, 10)
LengthUnit = Literal["in", "mm"]

_RESOLUTION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(in|mm)\s*$")


class TipResolution:
    """Rain depth per tip, held exactly as a fraction of an inch.

    Build with :meth:`parse` (``"0.01 in"``, ``"0.2 mm"``) or :meth:`of`.
    """

    __slots__ = ("inches",)

    def __init__(self, inches: Fraction) -> None:
        if inches <= 0:
            raise ValueError(f"tip resolution must be > 0, got {inches} in")
        self.inches = inches

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
