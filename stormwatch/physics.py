"""What physics allows a reading to say (stdlib only: the lean gateway imports it).

* **The rain depth–duration envelope** (``docs/reference/rain-records.md``): no point on Earth has
  recorded more rain in ``D`` hours than Jennings's (1950) world-record line
  ``P = 422 · D^0.475`` mm -- except the 2007 Cratère Commerson falls (72 h and 96 h, WMO-verified),
  which lie up to 34 % above it. A bound of *impossibility* must lie above every record with room
  for gauge error, so stormwatch uses :data:`ENVELOPE_MARGIN` × Jennings: every WMO record lies at
  least 10 % below it (tests/test_physics.py checks each one). Rain beyond it is not rain: a
  counter reset, a glitch or a bad file row (failure-kinds.md #24, #26).
* **Quantities that cannot be negative** (:data:`NON_NEGATIVE`): a tip count, a turbidity, a
  distance, a depth of water or sediment (failure-kinds.md #25; issue 11 item 5).
"""

from __future__ import annotations

import math

#: Jennings (1950), "World's greatest observed point rainfalls", Monthly Weather Review 78(1):
#: P = 16.6 in · D^0.475 (D in hours) = 421.6 mm · D^0.475 (rain-records.md).
JENNINGS_MM = 422.0
JENNINGS_EXPONENT = 0.475
#: The envelope used = this × Jennings's line (rain-records.md: above every WMO record by ≥ 10 %).
ENVELOPE_MARGIN = 1.5

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


def negative_value(quantity: str, value: float) -> str | None:
    """Why ``value`` of ``quantity`` is impossible (a negative count, turbidity, distance or depth),
    or ``None``. The message names the quantity and the value."""
    if quantity in NON_NEGATIVE and value < 0:
        return f"{quantity} {value!r} is negative: physics forbids it"
    return None
