"""Quality flags for one decoded value (profile-driven; contract flag names).

The design: docs/gateway.md ("The modules", `gateway/qc.py`).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Protocol


class QcParams(Protocol):
    """The QC parameters :meth:`ValueHistory.check` reads: the gateway plan's
    :class:`stormwatch.gateway.plan.QcParams` or the profile's :class:`stormwatch.profiles.QcSpec`."""

    @property
    def flatline_samples(self) -> int | None: ...
    @property
    def flatline_tolerance(self) -> float: ...
    @property
    def spike_delta(self) -> float | None: ...
    @property
    def spike_window(self) -> int: ...

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


class ValueHistory:
    """Recent values of one quantity of one device, for the flatline and spike tests."""

    def __init__(self) -> None:
        self._values: deque[float] = deque()

    def check(self, value: float, qc: QcParams | None) -> tuple[str, ...]:
        """Flags for ``value`` given the history so far, then remember it.

        Args:
            value: a finite engineering value.
            qc: the point's QC parameters (:class:`stormwatch.gateway.plan.QcParams` or the profile's
                ``QcSpec``; ``None``: no history tests).

        Returns:
            ``()``, ``("flatline",)``, ``("spike",)`` or both.
        """
        if qc is None or (qc.flatline_samples is None and qc.spike_delta is None):
            return ()
        flags: list[str] = []
        prev = list(self._values)
        if qc.flatline_samples is not None and len(prev) >= qc.flatline_samples - 1:
            recent = [*prev[len(prev) - (qc.flatline_samples - 1):], value]
            if max(recent) - min(recent) <= qc.flatline_tolerance:
                flags.append("flatline")
        if qc.spike_delta is not None and prev:
            neighbours = prev[-qc.spike_window:]
            if abs(value - _median(neighbours)) > qc.spike_delta:
                flags.append("spike")
        self._values.append(value)
        keep = max(qc.flatline_samples or 1, qc.spike_window)
        while len(self._values) > keep:
            self._values.popleft()
        return tuple(flags)


def _median(values: list[float]) -> float:
    """``statistics.median`` of a non-empty list (that module costs the lean process half a megabyte)."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
