"""The reading wire format, stdlib only: RFC 3339 times, the reading dict, the MQTT payload.

This is the ONE encoder of the payload described in :mod:`stormwatch.contract` (keys in the order
``site, device, quantity, value, unit, [tip_size,] time, gateway, boot, seq, raw, flags`` --
``tip_size`` on rain readings only; ``time`` as RFC 3339
UTC with ``Z``; a single object for one reading, ``{"readings": [...]}`` for several; compact
separators). It imports no pydantic, so the lean gateway process (``python -m stormwatch.gateway --plan``)
can build payloads without loading the validation models; :func:`stormwatch.contract.parse_readings`
is the validating reader of the same bytes (tests/gateway/test_plan.py proves the round trip).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

#: A reading's ``raw`` value: register words, a counter/integer register, a number or a text line.
Raw = list[int] | int | float | str | None


@functools.lru_cache(maxsize=4096)
def format_time(value: datetime) -> str:
    """RFC 3339 UTC with a ``Z`` suffix and microseconds only when present.

    Cached: the readings of one poll cycle share their slot time (a gateway, or a fleet of thousands).

    Raises:
        ValueError: if ``value`` is naive (event times are always aware).
    """
    if value.tzinfo is None:
        raise ValueError("naive datetime: event times must carry a time zone")
    value = value.astimezone(UTC)
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    if value.microsecond:
        text += f".{value.microsecond:06d}"
    return text + "Z"


def reading_wire(
    site: str,
    device: str,
    quantity: str,
    value: int | float,
    unit: str,
    time: datetime,
    gateway: str,
    boot: str,
    seq: int,
    raw: Raw = None,
    flags: tuple[str, ...] | list[str] = (),
    tip_size: str | None = None,
) -> dict[str, Any]:
    """The JSON-ready dict of one reading (the contract's field meanings and units).

    No validation here: callers hand over values that already satisfy the contract (the gateway
    validates its identifiers when it compiles its plan, :func:`stormwatch.gateway.plan.compile_plan`, and
    never publishes a non-finite value, :mod:`stormwatch.gateway.qc`).

    Raises:
        ValueError: ``time`` is naive.
    """
    out: dict[str, Any] = {
        "site": site,
        "device": device,
        "quantity": quantity,
        "value": value,
        "unit": unit,
    }
    if tip_size is not None:
        out["tip_size"] = tip_size
    out.update(time=format_time(time), gateway=gateway, boot=boot, seq=seq, raw=raw, flags=list(flags))
    return out


#: ``json.dumps(..., separators=(",", ":"))`` without building an encoder per call.
_COMPACT = json.JSONEncoder(separators=(",", ":"))


def dump_payload(wires: list[dict[str, Any]]) -> bytes:
    """One MQTT payload: the single reading dict itself, or ``{"readings": [...]}`` for several."""
    body: dict[str, Any] = wires[0] if len(wires) == 1 else {"readings": wires}
    return _COMPACT.encode(body).encode()


@dataclass(frozen=True, slots=True)
class WireReading:
    """An unvalidated reading record with the attributes of :class:`stormwatch.contract.Reading`.

    Made by the gateway from already-validated parts (its compiled plan); :meth:`to_wire` gives
    the same dict as ``Reading.to_wire()``. ``time`` is timezone-aware event time (UTC).
    """

    site: str
    device: str
    quantity: str
    value: int | float
    unit: str
    time: datetime
    gateway: str
    boot: str
    seq: int
    raw: Raw = None
    flags: tuple[str, ...] = ()
    tip_size: str | None = None

    def to_wire(self) -> dict[str, Any]:
        """JSON-ready dict (see :func:`reading_wire`)."""
        return reading_wire(
            self.site, self.device, self.quantity, self.value, self.unit, self.time,
            self.gateway, self.boot, self.seq, self.raw, self.flags, self.tip_size,
        )
