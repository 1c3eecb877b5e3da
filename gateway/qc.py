"""Quality flags for one decoded value (profile-driven; contract flag names).

* ``out_of_range`` -- the engineering value is outside the profile's ``valid_range`` (inclusive).
* ``device_error`` -- the raw value is one of the profile's ``error_codes``, or the device's own
  error register (a profile point with quantity ``device_error``, e.g. Y511 register 0x2604;
  sensors.md "Turbidity probes") is non-zero for that poll.
* non-finite (NaN/Inf) → :class:`QcVerdict.publish` is False: a gap, never a number (house rule
  "a missing reading is a gap, not a zero"); the caller logs it.

Flagged readings are still published, with their flags and raw value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: The quantity name of a profile point that carries the device's error/status register.
DEVICE_ERROR_QUANTITY = "device_error"


@dataclass(frozen=True)
class QcVerdict:
    """``publish``: False for a non-finite value (a gap); ``flags``: quality flags; ``reason``
    says why a value is withheld."""

    publish: bool
    flags: tuple[str, ...]
    reason: str = ""


def check_value(
    value: float,
    raw: int | float,
    valid_range: tuple[float, float] | None,
    error_codes: tuple[float, ...],
    device_error: bool = False,
) -> QcVerdict:
    """Quality verdict for one engineering value.

    Args:
        value: engineering value (after scale/offset).
        raw: the raw number decoded from the device (compared with ``error_codes``).
        valid_range: ``(min, max)`` inclusive, or ``None``.
        error_codes: raw values that mean "device error".
        device_error: the device reported an error for this poll (its error register ≠ 0).

    Returns:
        :class:`QcVerdict`.
    """
    if not math.isfinite(value):
        return QcVerdict(False, (), f"non-finite value {value!r} (raw {raw!r})")
    flags: list[str] = []
    if valid_range is not None and not valid_range[0] <= value <= valid_range[1]:
        flags.append("out_of_range")
    if device_error or raw in error_codes:
        flags.append("device_error")
    return QcVerdict(True, tuple(flags))
