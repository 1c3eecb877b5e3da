"""Device drivers: one module per transport.

A driver polls one device and returns its decoded values as :class:`PointValue` objects, or
raises a :class:`stormwatch.gateway.errors.DeviceError` subclass. Devices that share a connection (one
RS-485 line, one Modbus TCP endpoint) share a link and its lock (``link_key``); the service runs
one polling thread per link so a dead line never delays the others.

Drivers take the compiled plan's dataclasses (:mod:`stormwatch.gateway.plan`: ``DevicePlan``, ``ProfilePlan``,
transports); the pydantic site/profile models have the same attribute names and work too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from stormwatch.gateway.plan import QcParams


@dataclass(frozen=True)
class PointValue:
    """One decoded value of one poll.

    Attributes:
        quantity, unit: contract quantity and unit (from the profile).
        raw: the undecoded value kept for audit (register words, an integer register, a line).
        number: the raw number before scale/offset (compared with error codes, counters, no-target).
        value: the engineering value (may be NaN: a gap, decided by :mod:`stormwatch.gateway.qc`).
        valid_range, error_codes, qc: from the profile point (for :mod:`stormwatch.gateway.qc`).
        gap_before: a ``mode: delta`` count only: the device reset a count that was never read
            (a lost answer to a command with that side effect), so this count covers only part of
            the time since the previous reading -- that interval is a data gap (``counter_reset``).
    """

    quantity: str
    unit: str
    raw: list[int] | int | float | str
    number: int | float
    value: float
    valid_range: tuple[float, float] | None = None
    error_codes: tuple[float, ...] = ()
    qc: QcParams | None = None
    gap_before: bool = False


class Driver(Protocol):
    """What the service needs from a driver."""

    device_id: str
    link_key: str

    def poll(self) -> list[PointValue]:
        """Run the profile's commands due for this poll, then read every point.

        Raises:
            stormwatch.gateway.errors.DeviceError: TransportError, DeviceReplyError or BadDataError.
        """
        ...

    def close(self) -> None:
        """Release the connection (idempotent)."""
        ...
