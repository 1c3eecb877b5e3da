"""How values are shown to a person (an SMO, an inspector): one place for the demo timeline, the
work-order commands, ``replay``/``evaluate`` and the event messages.

* times: site-local, with weekday, date **and year** and the zone's abbreviation
  (``Mon 01 Jun 2026 00:00 EDT``); an unknown time is ``-``;
* turbidity: at 0.1 of the data's own unit (``7.9 NTU``, ``12.0 FNU``), never a float repr. 0.1 is
  the display resolution of field turbidity meters, finer than the accuracy of the bundled probes
  (Yosemitech Y511: ±5 % or 0.3 NTU; Campbell ClariVUE10: ±2 % or 0.5 FNU; docs/reference/sensors.md),
  so the digit shown is one the instrument can vouch for;
* rain: inches to 2 decimals (the 0.01-in gauges' resolution) next to the exact tip count.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

#: Decimals of turbidity values shown to a person (see the module docstring).
TURBIDITY_DECIMALS = 1


def local_time(t: datetime | None, tz: ZoneInfo | str | None = None) -> str:
    """``t`` in zone ``tz`` (default UTC) as ``Mon 01 Jun 2026 00:00 EDT``; ``-`` for ``None``."""
    if t is None:
        return "-"
    zone = tz if isinstance(tz, ZoneInfo) else ZoneInfo(tz) if tz else UTC
    return t.astimezone(zone).strftime("%a %d %b %Y %H:%M %Z")


def turbidity(value: float | None, unit: str = "NTU") -> str:
    """A turbidity value at display resolution with its unit (``7.9 NTU``); ``unknown`` for ``None``."""
    if value is None:
        return "unknown"
    return f"{value:.{TURBIDITY_DECIMALS}f} {unit}"
