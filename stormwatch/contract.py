"""The message contract shared by every part of stormwatch.

A :class:`Reading` is one measured value of one quantity by one device at one event time
(``docs/reference/design-notes.md``, "One reading, one identity"). Its identity is
``(gateway, boot, seq)``: two tips at the same timestamp are two readings.

Wire format (MQTT payload, UTF-8 JSON) on ``stormwatch/v1/<site>/<gateway>/readings``::

    {"site": "riverside", "device": "rain-1", "quantity": "rain_tips", "value": 3,
     "unit": "{tip}", "time": "2026-06-01T12:00:00Z", "gateway": "gw-1",
     "boot": "9f1c...", "seq": 42, "raw": 1420, "flags": []}

or a batch of readings of one device: ``{"readings": [<reading>, ...]}``.

Quantities and their units (UCUM-style):

============== ========== ============================================================
quantity        unit       meaning
============== ========== ============================================================
rain_tips       ``{tip}``  tips counted since the previous poll (an integer count)
turbidity       NTU / FNU  turbidity as the probe reports it (keep NTU and FNU apart)
temperature     Cel        water temperature
stage           m          water depth above the basin floor
pressure        bar        raw pressure of a submersible level sensor
distance        mm         distance down from a sensor to a surface
sediment_depth  m          sediment surface height above the basin floor
============== ========== ============================================================
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)

from stormwatch.wire import dump_payload, format_time, reading_wire

#: Identifiers that appear as MQTT topic levels must not contain ``/``, ``+`` or ``#``.
_TOPIC_LEVEL = re.compile(r"^[^/+#\x00]+$")

#: The unit of a tip count (UCUM annotation style: a dimensionless count of tips).
TIP_UNIT = "{tip}"


def _topic_level(value: str) -> str:
    if not _TOPIC_LEVEL.match(value):
        raise ValueError(f"{value!r} cannot be an MQTT topic level (no '/', '+', '#', NUL; not empty)")
    return value


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


TopicLevel = Annotated[str, AfterValidator(_topic_level)]
UtcDatetime = Annotated[AwareDatetime, AfterValidator(_utc)]


class Reading(BaseModel):
    """One measured value of one quantity by one device at one event time.

    Attributes:
        site: site id (an MQTT topic level).
        device: device id within the site.
        quantity: what was measured (see the module table).
        value: the value in engineering units ``unit``; must be finite. ``rain_tips`` is an int.
            Quantities that cannot be negative (:data:`stormwatch.physics.NON_NEGATIVE`) are
            refused by ingest as ``impossible_value`` (:mod:`stormwatch.ingest.validate`).
        unit: UCUM-style unit, e.g. ``NTU``, ``m``, ``{tip}``.
        time: event time (when it was measured), timezone-aware, normalised to UTC.
        gateway, boot, seq: identity; ``seq`` strictly increases within one ``boot``.
        raw: the undecoded value (register words, counter value or text), for audit; a number
            must be finite.
        flags: quality-control flags; empty when clean (``out_of_range``, ``flatline``,
            ``spike``, ``device_error``, ...).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    site: TopicLevel
    device: TopicLevel
    quantity: str = Field(min_length=1, max_length=64)
    value: int | float
    unit: str = Field(min_length=1, max_length=32)
    time: UtcDatetime
    gateway: TopicLevel
    boot: str = Field(min_length=1, max_length=64)
    seq: int = Field(ge=0)
    raw: list[int] | int | float | str | None = None
    flags: tuple[str, ...] = ()

    @field_validator("value")
    @classmethod
    def _finite(cls, v: int | float) -> int | float:
        if isinstance(v, bool):
            raise ValueError("value must be a number, not a boolean")
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"value must be finite, got {v}")
        return v

    @field_validator("raw")
    @classmethod
    def _finite_raw(cls, v: list[int] | int | float | str | None) -> list[int] | int | float | str | None:
        # A NaN/Inf raw would be stored as the invalid JSON text ``NaN`` (issue 11 item 5).
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"raw must be finite, got {v}")
        return v

    @property
    def identity(self) -> tuple[str, str, int]:
        """``(gateway, boot, seq)``: the key consumers deduplicate on."""
        return (self.gateway, self.boot, self.seq)

    def to_wire(self) -> dict[str, Any]:
        """JSON-ready dict (time as RFC 3339 UTC; :func:`stormwatch.wire.reading_wire`)."""
        return reading_wire(
            self.site, self.device, self.quantity, self.value, self.unit, self.time,
            self.gateway, self.boot, self.seq, self.raw, self.flags,
        )


class ReadingBatch(BaseModel):
    """A message carrying several readings (of one device)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    readings: list[Reading] = Field(min_length=1)


class PayloadError(ValueError):
    """A message that is not a valid reading or batch; ``reason`` is a short machine code.

    Reasons: ``bad_json``, ``not_utf8``, ``schema`` (wrong or missing fields, wrong types,
    a non-finite ``value`` or ``raw``).
    """

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def _reject_constant(name: str) -> float:
    # json.loads accepts NaN/Infinity literals by default; keep them so the schema can name the
    # field that carries them (a clearer dead-letter reason than a JSON syntax error).
    return float(name.replace("Infinity", "inf"))


#: One decoder for every message (json.loads with a keyword builds a new one per call).
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def parse_readings(payload: bytes | bytearray | str) -> list[Reading]:
    """Parse one MQTT payload into readings.

    Args:
        payload: UTF-8 JSON, a single reading object or ``{"readings": [...]}``.

    Returns:
        The readings, in message order.

    Raises:
        PayloadError: with ``reason`` ``not_utf8``, ``bad_json`` or ``schema``.
    """
    if isinstance(payload, bytes | bytearray):
        try:
            payload = payload.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PayloadError("not_utf8", str(exc)) from exc
    try:
        data = _DECODER.decode(payload)
    except json.JSONDecodeError as exc:
        raise PayloadError("bad_json", str(exc)) from exc
    try:
        if isinstance(data, dict) and "readings" in data:
            return list(ReadingBatch.model_validate(data).readings)
        return [Reading.model_validate(data)]
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "<root>"
        raise PayloadError("schema", f"{where}: {first['msg']}") from exc


def dump_readings(readings: list[Reading]) -> bytes:
    """Serialise readings to one payload (a single object when there is one reading)."""
    return dump_payload([r.to_wire() for r in readings])


EventKind = Literal[
    "storm_started",
    "storm_qualified",
    "storm_inspection_due",
    "routine_inspection_due",
    "inspection_overdue",
    "report_due",
    "turbidity_contrast",
    "turbidity_cleared",
    "turbidity_undetermined",
    "turbidity_needs_verification",
    "basin_capacity_warning",
    "basin_cleanout_due",
    "basin_cleanout_done",
    "data_gap",
]


class Event(BaseModel):
    """An ordinance event: something a village code requires action on, or evidence for it.

    Every event carries the ordinance section it enforces (``citation``). Optional fields are
    present only for the kinds they belong to; ``to_wire`` omits absent ones.

    Attributes:
        kind: event kind (see :data:`EventKind`).
        site: site id.
        event_time: the event time at which the condition became true (UTC).
        rule: rule id (``R1`` storm, ``R1w`` weekly, ``R2`` turbidity, ``R3`` basin, ``GAP``).
        citation: e.g. ``"Ch. 133 §133-7A(2)"``.
        occurrence: stable key of the occurrence (dedupes events and work orders).
        work_order: id of the work order this event opened or refers to.
        due_at: deadline (UTC) where the law sets one.
        message: one human sentence for the timeline.
        storm_start, storm_end, tips, depth_in: storm events (storm_end = last tip).
        upstream_ntu, downstream_ntu: turbidity events (window medians).
        lost_capacity: basin events, fraction 0..1 of design storage volume.
        sediment_depth_ft: basin events.
        gap_start, gap_end: data-gap events.
        late_detection_s: set when the event was found late (seconds after event_time + lateness).
        needs_verification: storm events: the quality flags of the rain readings that opened, grew,
            qualified or closed the storm, or of a data gap inside it (``counter_reset``,
            ``counter_catch_up``, ``device_error``, ``rain_beyond_envelope``...): the event stands
            (an inspection stays due) but its rain must be verified (rules.md R1).
        evidence: the readings (or window medians) that triggered it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: EventKind
    site: str
    event_time: UtcDatetime
    rule: str
    citation: str
    occurrence: str
    work_order: str | None = None
    due_at: UtcDatetime | None = None
    message: str = ""
    storm_start: UtcDatetime | None = None
    storm_end: UtcDatetime | None = None
    tips: int | None = None
    depth_in: float | None = None
    upstream_ntu: float | None = None
    downstream_ntu: float | None = None
    lost_capacity: float | None = None
    sediment_depth_ft: float | None = None
    gap_start: UtcDatetime | None = None
    gap_end: UtcDatetime | None = None
    late_detection_s: float | None = None
    needs_verification: list[str] | None = None
    evidence: list[dict[str, Any]] = Field(default_factory=list)

    def to_wire(self) -> dict[str, Any]:
        """JSON-ready dict, absent optionals omitted, times as RFC 3339 UTC."""
        data = self.model_dump(mode="json", exclude_none=True)
        for key in list(data):
            attr = getattr(self, key)
            if isinstance(attr, datetime):
                data[key] = format_time(attr)
        if not data.get("evidence"):
            data.pop("evidence", None)
        return data


def utcnow_from(ts: float) -> datetime:
    """A UTC datetime from POSIX seconds (for clocks; logic never reads the wall clock)."""
    return datetime.fromtimestamp(ts, UTC)
