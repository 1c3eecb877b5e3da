"""The message contract shared by every part of stormwatch.

A :class:`Reading` is one measured value of one quantity by one device at one event time
(``docs/reference/design-notes.md``, "One reading, one identity"). Its identity is
``(gateway, boot, seq)``: two tips at the same timestamp are two readings.

Wire format (MQTT payload, UTF-8 JSON) on ``stormwatch/v1/<site>/<gateway>/readings``::

    {"site": "riverside", "device": "rain-1", "quantity": "rain_tips", "value": 3,
     "unit": "{tip}", "tip_size": "0.01 in", "time": "2026-06-01T12:00:00Z", "gateway": "gw-1",
     "boot": "9f1c...", "seq": 42, "raw": 1420, "flags": []}

The design: docs/contract.md ("The modules", `stormwatch/contract.py`).
"""

from __future__ import annotations

import json
import math
import re
import threading
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any
from zoneinfo import ZoneInfo

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializeAsAny,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from stormwatch.rain import TipResolution, tip_size_of
from stormwatch.wire import dump_payload, format_time, reading_wire

#: Punctuation an identifier may contain besides letters and digits (see :func:`check_identifier`).
IDENTIFIER_PUNCTUATION = " _-.,=:@"
#: Longest identifier, in characters.
IDENTIFIER_MAX = 64
#: The identifier grammar in one sentence (error messages and docs/asyncapi.yaml say the same).
IDENTIFIER_RULE = (f"1 to {IDENTIFIER_MAX} characters, each a letter or digit (any script), a space or one of "
                   f"_-.,=:@ -- beginning with a letter or digit, not ending with a space")


def check_identifier(value: str) -> str:
    """``value`` itself when it is a valid site, device or gateway id (docs/influxdb-schema.md, "Encoding rules").

    The ONE grammar of identifiers, applied when a site file is loaded (:mod:`stormwatch.config`)
    and to every reading on the wire: :data:`IDENTIFIER_RULE`. Everything it allows round-trips
    identically through MQTT topic levels (no ``/``, ``+``, ``#``, NUL), InfluxDB line protocol
    tags (``,``, ``=`` and space are escaped; a backslash -- which cannot end a tag value -- and
    line breaks, which a tag cannot hold, are excluded), InfluxQL string literals (no quote or
    backslash to escape), SQLite text and Grafana's ``'$site'`` templates (no quotes, no ``$``).
    ``Pond 3, Inlet=N`` (failure-kinds.md #12) and ``Überlauf-Süd`` are ids; ``rain\\`` (a
    trailing backslash), an id with a line break, ``'north'`` or ``-1`` are not. Case matters
    (``Rain-1`` and ``rain-1`` are two devices).

    Raises:
        ValueError: naming the first character that is not allowed (or the length).
    """
    if not value:
        raise ValueError(f"an id must not be empty ({IDENTIFIER_RULE})")
    if len(value) > IDENTIFIER_MAX:
        raise ValueError(f"{value[:20]!r}... has {len(value)} characters, at most {IDENTIFIER_MAX} are allowed")
    for i, ch in enumerate(value):
        if not (ch.isalnum() or (i > 0 and ch in IDENTIFIER_PUNCTUATION)):
            where = "first character" if i == 0 else f"character {i + 1}"
            raise ValueError(f"{value!r}: {where} {ch!r} is not allowed in an id ({IDENTIFIER_RULE})")
    if value[-1] == " ":
        raise ValueError(f"{value!r} ends with a space ({IDENTIFIER_RULE})")
    return value


#: Longest person name (work-order history, a manual reading's inspector, an account's name), in characters.
PERSON_NAME_MAX = 64
#: The person-name grammar in one sentence (error messages say the same).
PERSON_NAME_RULE = (f"1 to {PERSON_NAME_MAX} characters of text on one line: letters, digits, spaces and "
                    "punctuation, no line breaks or control characters")
#: Format characters a name in some scripts needs (zero-width non-joiner and joiner, e.g. Persian);
#: every other invisible format character (bidirectional overrides ...) is refused.
_NAME_FORMAT_OK = frozenset("\u200c\u200d")


def check_person_name(value: str, what: str = "name") -> str:
    """The person name ``value`` as history records it: its spaces trimmed and runs of them made one.

    The ONE grammar of person names (:data:`PERSON_NAME_RULE`): who acknowledges, completes or
    verifies a work order (``--by``), who took a manual reading, an account's ``--name``. A name is
    one line a report, an e-mail and a CSV cell show as typed: a line break or a control character
    (``ina\\nx``, an escape sequence) would forge a second history line or restyle a terminal, so
    it is refused, never silently folded.

    Raises:
        ValueError: ``<what> '<value>': <what is wrong>`` (empty, too long, or the first character
            that is not allowed).
    """
    for i, ch in enumerate(value):
        category = unicodedata.category(ch)  # C*: control, format, unassigned; Zl/Zp: line, paragraph breaks
        if (category[0] == "C" and ch not in _NAME_FORMAT_OK) or category in ("Zl", "Zp"):
            raise ValueError(f"{what} {value!r}: character {i + 1} {ch!r} is not allowed ({PERSON_NAME_RULE})")
    name = " ".join(value.split())
    if not name:
        raise ValueError(f"{what} must not be empty ({PERSON_NAME_RULE})")
    if len(name) > PERSON_NAME_MAX:
        raise ValueError(f"{what} {name[:20]!r}... has {len(name)} characters, at most {PERSON_NAME_MAX}")
    return name


#: The unit of a tip count (UCUM annotation style: a dimensionless count of tips).
TIP_UNIT = "{tip}"
#: The quantity of a rain gauge's tip counts (an integer value).
RAIN_TIPS = "rain_tips"
#: The integers a store holds (SQLite INTEGER, InfluxDB ``i`` fields: signed 64-bit): ``seq`` and ``raw``
#: counts are refused beyond them (a ``rain_tips`` value far sooner: ``impossible_value``, ingest).
INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1


def check_int64(value: int) -> int:
    """``value`` if a store can hold it as an integer (:data:`INT64_MIN`..:data:`INT64_MAX`), else ``ValueError``."""
    if not INT64_MIN <= value <= INT64_MAX:
        shown = str(value) if len(str(value)) <= 24 else f"{str(value)[:20]}..."
        raise ValueError(f"{shown} is beyond a 64-bit integer ({INT64_MIN}..{INT64_MAX}), more than a store holds")
    return value


#: A JSON integer a store can hold.
WireInt = Annotated[StrictInt, AfterValidator(check_int64)]


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


#: RFC 3339 date-time text (``T`` or a space between date and time; ``Z`` or a numeric offset).
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$")


def json_type(value: object) -> str:
    """The JSON type name of a decoded value (``string``, ``number``, ``boolean``...), for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    return "object" if isinstance(value, dict) else type(value).__name__


def _rfc3339(value: object) -> object:
    """Event times on the wire are RFC 3339 text; in Python, aware datetimes. Nothing else (a bare
    number would otherwise be taken as Unix seconds)."""
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str):
        raise ValueError(f"must be RFC 3339 date-time text, not a {json_type(value)}")
    if not _RFC3339.match(value):
        raise ValueError(f"{value[:40]!r} is not RFC 3339 date-time text (e.g. 2026-06-01T12:00:00Z)")
    return value


#: A site, device or gateway id: a string of the grammar of :func:`check_identifier`.
Identifier = Annotated[str, Field(strict=True), AfterValidator(check_identifier)]
UtcDatetime = Annotated[AwareDatetime, AfterValidator(_utc)]
#: An event time as the wire carries it: RFC 3339 text (or an aware datetime in Python), in UTC.
WireTime = Annotated[AwareDatetime, BeforeValidator(_rfc3339), AfterValidator(_utc)]


class Reading(BaseModel):
    """One measured value of one quantity by one device at one event time.

    Types are strict: nothing is coerced. A number sent as a string
    (``"100.00"``), a boolean value, a ``seq`` of ``"5"`` or a time given as a number is refused,
    the field named; the gateway never sends such payloads.

    Attributes:
        site: site id (the grammar of :func:`check_identifier`; also an MQTT topic level).
        device: device id within the site (same grammar).
        quantity: what was measured (see the module table).
        value: the value in engineering units ``unit``; a JSON number, finite. ``rain_tips``: a
            JSON integer (whole tips; ``3.0`` is refused); every other quantity is held as a
            ``float`` (an integer ``13`` becomes ``13.0``, so every store gives back the same type).
            Quantities that cannot be negative (:data:`stormwatch.physics.NON_NEGATIVE`) are
            refused by ingest as ``impossible_value`` (:mod:`stormwatch.ingest.validate`).
        unit: UCUM-style unit, e.g. ``NTU``, ``m``, ``{tip}``.
        time: event time (when it was measured): RFC 3339 text on the wire, timezone-aware,
            normalised to UTC.
        gateway, boot, seq: identity; ``seq`` (a JSON integer, 0..2^63-1) strictly increases within one ``boot``.
        raw: the undecoded value (register words, counter value or text), for audit; a number
            must be finite, an integer within 64 bits (:data:`INT64_MAX`). A reading entered by
            hand (``gateway`` :data:`MANUAL_GATEWAY`) holds the inspector's name here.
        flags: quality-control flags; empty when clean (``out_of_range``, ``flatline``,
            ``spike``, ``device_error``, ...).
        tip_size: ``rain_tips`` only: the depth of one tip of the gauge that counted them, as
            ``"<decimal> in|mm"`` (``"0.01 in"``, ``"0.2 mm"``; held in the canonical form of
            :class:`stormwatch.rain.TipResolution`: ``"0.254 mm"`` becomes ``"0.01 in"``), so stored
            rain describes itself. The gateway sets it from its profile's counter
            resolution, an import from ``--tip-in``/``--tip-mm``. ``None``: a reading of an earlier
            stormwatch that did not say (ingest stamps the site file's size on it, logged;
            docs/ingest.md); any other quantity never has one.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    site: Identifier
    device: Identifier
    quantity: str = Field(min_length=1, max_length=64, strict=True)
    value: int | float
    unit: str = Field(min_length=1, max_length=32, strict=True)
    time: WireTime
    gateway: Identifier
    boot: str = Field(min_length=1, max_length=64, strict=True)
    seq: Annotated[WireInt, Field(ge=0)]
    raw: list[StrictInt] | StrictInt | StrictFloat | StrictStr | None = None
    flags: tuple[StrictStr, ...] = ()
    tip_size: StrictStr | None = None

    @field_validator("value", mode="before")
    @classmethod
    def _number(cls, v: object, info: ValidationInfo) -> int | float:
        if isinstance(v, bool) or not isinstance(v, int | float):
            shown = f" ({v[:40]!r})" if isinstance(v, str) else ""
            raise ValueError(f"must be a JSON number, not a {json_type(v)}{shown}")
        if info.data.get("quantity") == RAIN_TIPS:
            if not isinstance(v, int):
                raise ValueError(f"a rain_tips value is a whole number of tips (a JSON integer), got {v!r}")
            return v  # beyond a counter's range: ``impossible_value`` (stormwatch.physics.MAX_TIPS)
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"must be finite, got {v}")
        try:
            return float(v)
        except OverflowError:
            raise ValueError(f"{str(v)[:20]}... is too large for a measured value") from None

    @field_validator("raw", mode="before")
    @classmethod
    def _raw_ints(cls, v: object) -> object:
        # before the union: a too-large integer would otherwise pass as a float
        for item in v if isinstance(v, list) else (v,):
            if isinstance(item, int) and not isinstance(item, bool):
                check_int64(item)
        return v

    @field_validator("raw")
    @classmethod
    def _finite_raw(cls, v: list[int] | int | float | str | None) -> list[int] | int | float | str | None:
        # A NaN/Inf raw would be stored as the invalid JSON text ``NaN``.
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"raw must be finite, got {v}")
        return v

    @field_validator("tip_size")
    @classmethod
    def _tip_size(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is None:
            return None
        if info.data.get("quantity") != RAIN_TIPS:
            raise ValueError(f"only a {RAIN_TIPS} reading has a tip size (this is {info.data.get('quantity')!r})")
        return str(tip_size_of(v))

    @property
    def tip_resolution(self) -> TipResolution | None:
        """The exact depth per tip of a rain reading that names it (:attr:`tip_size`), else ``None``."""
        return None if self.tip_size is None else tip_size_of(self.tip_size)

    @property
    def identity(self) -> tuple[str, str, int]:
        """``(gateway, boot, seq)``: the key consumers deduplicate on."""
        return (self.gateway, self.boot, self.seq)

    def to_wire(self) -> dict[str, Any]:
        """JSON-ready dict (time as RFC 3339 UTC; :func:`stormwatch.wire.reading_wire`)."""
        return reading_wire(
            self.site, self.device, self.quantity, self.value, self.unit, self.time,
            self.gateway, self.boot, self.seq, self.raw, self.flags, self.tip_size,
        )


_READING_FIELDS = frozenset(Reading.model_fields)
_new_reading = Reading.__new__
_set = object.__setattr__


def trusted_reading(fields: dict[str, Any]) -> Reading:
    """A :class:`Reading` of ``fields`` (every field, by name) that already satisfy the contract -- read
    back from a store that only ever held validated readings, or checked by the fast parser
    (:mod:`stormwatch.fastwire`) -- built as ``Reading.model_construct`` builds one, without its
    per-call bookkeeping (several times faster; equal to the validated model of the same fields).
    ``fields`` becomes the model's own dict: pass a fresh one."""
    r = _new_reading(Reading)
    _set(r, "__dict__", fields)
    _set(r, "__pydantic_fields_set__", set(_READING_FIELDS))
    _set(r, "__pydantic_extra__", None)
    _set(r, "__pydantic_private__", None)
    return r


#: The ``gateway`` of readings a person entered by hand (``stormwatch readings add``, the web desk's
#: form): their ``source`` is ``manual``; ``raw`` holds the name of the inspector who took them.
MANUAL_GATEWAY = "manual"


class ManualQuantity(BaseModel):
    """A quantity a person may measure in the field and enter by hand.

    Attributes:
        unit: the one unit it is entered in.
        low, high: the values the method can give (inclusive); outside them the entry is refused.
        method: how it is measured, for help texts.
    """

    model_config = ConfigDict(frozen=True)
    unit: str
    low: float
    high: float
    method: str


#: Manual field quantities: a transparency tube's reading in cm (a tube is at most 120 cm
#: long -- 60 cm is the common length, Washington CSWGP's benchmark equivalents are 33 and 6 cm),
#: a grab sample's turbidity from a hand turbidimeter in NTU (never negative; at most 4000 NTU, the
#: widest range of the turbidimeters in docs/reference/sensors.md "Hand meters": the Hach 2100N's
#: 0-4000 NTU, above which a sample must be diluted; the ClariVUE10 probe also ends at 4000 FNU), and
#: its pH from a hand meter (the 0-14 scale of the meter).
#: A value outside its range is refused with the reason, never stored (``1e308`` NTU is a typo).
MANUAL_QUANTITIES: dict[str, ManualQuantity] = {
    "transparency": ManualQuantity(unit="cm", low=0.0, high=120.0, method="transparency tube, cm to the first "
                                                                          "view of the disk"),
    "turbidity": ManualQuantity(unit="NTU", low=0.0, high=4000.0, method="grab sample, hand turbidimeter"),
    "ph": ManualQuantity(unit="[pH]", low=0.0, high=14.0, method="grab sample, hand pH meter"),
}


def reading_source(reading: Reading) -> str:
    """Where a reading came from: ``manual`` (entered by hand), ``import`` (a logger file),
    ``station`` (a station record) or ``gateway`` (polled live)."""
    if reading.gateway in (MANUAL_GATEWAY, "import", "station"):
        return reading.gateway
    return "gateway"


def manual_inspector(reading: Reading) -> str | None:
    """The inspector who entered a manual reading (its ``raw``), or ``None`` for any other reading."""
    if reading.gateway == MANUAL_GATEWAY and isinstance(reading.raw, str):
        return reading.raw
    return None


class ReadingBatch(BaseModel):
    """A message carrying several readings of one gateway (a poll cycle; :mod:`stormwatch.gateway.publisher`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    readings: list[Reading] = Field(min_length=1)


class PayloadError(ValueError):
    """A message that is not a valid reading or batch; ``reason`` is a short machine code.

    Reasons (of :data:`stormwatch.reasons.REASONS`): ``not_utf8``, ``bad_json`` (not JSON, too
    deeply nested, an integer literal too long, a lone surrogate escape), ``schema`` (a missing,
    unknown or wrongly typed field, named in ``detail``; a non-finite ``value`` or ``raw``).
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


def _decode(payload: bytes | bytearray | str) -> tuple[str, Any]:
    """The text of a payload and its decoded JSON.

    Raises:
        PayloadError: ``not_utf8`` or ``bad_json``.
    """
    if isinstance(payload, bytes | bytearray):
        try:
            payload = payload.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PayloadError("not_utf8", str(exc)) from exc
    try:
        return payload, _DECODER.decode(payload)
    except json.JSONDecodeError as exc:
        raise PayloadError("bad_json", str(exc)) from exc
    except RecursionError:
        # e.g. "[" x 100,000: the decoder recurses once per nesting level.
        raise PayloadError("bad_json", "nested deeper than the JSON decoder allows") from None
    except ValueError as exc:
        # an integer literal beyond Python's int/str conversion limit (4,300 digits)
        raise PayloadError("bad_json", f"cannot be decoded: {exc}") from None


def _surrogate_error(data: object) -> PayloadError | None:
    surrogate = _lone_surrogate(data)
    if surrogate is None:
        return None
    return PayloadError("bad_json", f"string with a lone UTF-16 surrogate \\u{ord(surrogate):04x}, which is not a "
                                   "Unicode character (RFC 7493 I-JSON)")


def _one_reading(data: object, escapes: bool) -> Reading | PayloadError:
    """One decoded reading object validated, or why not (``bad_json`` for a lone surrogate, ``schema``)."""
    if escapes:
        surrogate = _surrogate_error(data)
        if surrogate is not None:
            return surrogate
    try:
        return Reading.model_validate(data)
    except ValidationError as exc:
        return PayloadError("schema", schema_detail(exc.errors()[0]))
    except RecursionError:
        return PayloadError("schema", "nested deeper than the validator allows")


@dataclass(frozen=True)
class Part:
    """One reading of a message as it came: the reading, or why it is refused, and its own text.

    Attributes:
        index: its place in the message (0 for a single reading; ``readings.<index>`` of a batch).
        reading: the valid reading, or ``None``.
        error: why it is refused (``bad_json`` for a lone surrogate in it, ``schema``), or ``None``.
        body: the reading's own JSON text as it came (the whole payload for a single reading), for
            its dead letter.
        batched: it came in a batch (``{"readings": [...]}``).
    """

    index: int
    reading: Reading | None
    error: PayloadError | None
    body: bytes
    batched: bool


def parse_parts(payload: bytes | bytearray | str) -> list[Part]:
    """Parse one MQTT payload into its readings, each judged on its own.

    A batch (``{"readings": [...]}``, a gateway's poll cycle) is a list of readings that happen to
    travel together: one reading that is not valid (a NaN value, a missing field) is refused alone,
    and the others are kept (before, ``[7.5 NTU, Infinity]`` lost the 7.5 too). Only a message that
    is malformed as a whole is refused as one: not UTF-8, not JSON, not an object, a ``readings``
    member that is not a non-empty list, or other members beside it.

    Returns:
        One :class:`Part` per reading, in message order.

    Raises:
        PayloadError: the message as a whole is malformed (``not_utf8``, ``bad_json``, ``schema``).
    """
    text, data = _decode(payload)
    escapes = "\\u" in text
    if not (isinstance(data, dict) and "readings" in data):
        if escapes:
            surrogate = _surrogate_error(data)
            if surrogate is not None:
                raise surrogate
        one = _one_reading(data, False)
        if isinstance(one, PayloadError):
            raise one
        raw = payload if isinstance(payload, bytes) else text.encode("utf-8")
        return [Part(0, one, None, bytes(raw), False)]
    extra = sorted(k for k in data if k != "readings")
    if extra:
        raise PayloadError("schema", f"{extra[0]}: Extra inputs are not permitted (a batch holds only readings)")
    items = data["readings"]
    if not isinstance(items, list) or not items:
        shown = f"got {json_type(items)}" if not isinstance(items, list) else "got an empty list"
        raise PayloadError("schema", f"readings: a batch is a non-empty list of readings ({shown})")
    parts = []
    for index, item in enumerate(items):
        one = _one_reading(item, escapes)
        try:
            body = json.dumps(item, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")
        except (TypeError, ValueError, RecursionError):
            body = b""
        if isinstance(one, PayloadError):
            parts.append(Part(index, None, one, body, True))
        else:
            parts.append(Part(index, one, None, body, True))
    return parts


def parse_readings(payload: bytes | bytearray | str) -> list[Reading]:
    """Parse one MQTT payload into readings, all or nothing (tools and tests; ingest and the alert
    service judge each reading of a batch on its own, :func:`parse_parts`).

    Args:
        payload: UTF-8 JSON, a single reading object or ``{"readings": [...]}``.

    Returns:
        The readings, in message order.

    Raises:
        PayloadError: with ``reason`` ``not_utf8``, ``bad_json`` or ``schema`` (for a batch, the first
            refused reading's, its detail prefixed ``readings.<index>.``).
    """
    out = []
    for part in parse_parts(payload):
        if part.error is not None:
            raise PayloadError(part.error.reason, f"readings.{part.index}.{part.error.detail}")
        assert part.reading is not None
        out.append(part.reading)
    return out


_UNION_MEMBERS = frozenset({"list[int]", "int", "float", "str", "none"})


def schema_detail(error: ErrorDetails) -> str:
    """``"<field path>: <what is wrong> (got <JSON type> <value>)"`` of one pydantic error."""
    # pydantic names the union member tried (``raw.list[int].0``): the payload's own path is ``raw.0``
    where = ".".join(str(p) for p in error["loc"] if str(p) not in _UNION_MEMBERS) or "<root>"
    msg = error["msg"].removeprefix("Value error, ")
    got = error.get("input")
    if error["type"] not in ("missing", "extra_forbidden", "value_error") and not isinstance(got, dict | list):
        msg += f" (got {json_type(got)} {got!r:.40})"
    return f"{where}: {msg}"


def _lone_surrogate(data: object) -> str | None:
    """The first lone UTF-16 surrogate in any string (key or value) of decoded JSON, or ``None``."""
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            for ch in item:
                if "\ud800" <= ch <= "\udfff":
                    return ch
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def dump_readings(readings: list[Reading]) -> bytes:
    """Serialise readings to one payload (a single object when there is one reading)."""
    return dump_payload([r.to_wire() for r in readings])


#: An event kind: lower-case words joined by ``_`` (``storm_inspection_due``). Which kinds exist is
#: declared by the rule modules (:mod:`stormwatch.alerts.rules`), not here: see :data:`EVENT_KINDS`.
EventKind = str

_KIND = re.compile(r"^[a-z][a-z0-9_]*$")


class EventDetails(BaseModel):
    """What one family of event kinds says beyond the common fields (typed per kind).

    Each rule module declares its details model and the kinds that carry it
    (:class:`stormwatch.alerts.rules.registry.EventKindSpec`); :class:`Event` holds one instance,
    chosen by ``kind`` -- a union discriminated by the kind. On the wire the details are flat
    fields of the event object (``{"kind": "storm_qualified", ..., "tips": 50, "depth_in": 0.5}``).
    Subclasses may say how a human reads them (:meth:`summary`), which period they cover
    (:meth:`span`) and what tells two events of one kind and occurrence apart (:meth:`variant`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    def summary(self, tz: ZoneInfo) -> str:
        """The facts in one short phrase for a timeline (times local to ``tz``); ``""``: none."""
        return ""

    def headline(self, event: Event, tz: ZoneInfo) -> str:
        """What a timeline line says about ``event`` (whose details these are): :meth:`summary`,
        unless the kind's subject and reason are only in its message (a data gap: which device,
        why)."""
        return self.summary(tz)

    def span(self) -> tuple[datetime, datetime] | None:
        """The closed period the event is about (a storm, a data gap), or ``None``."""
        return None

    def variant(self) -> str:
        """What tells this event from another of the same kind and occurrence (a gap open or
        closed); ``""`` when the kind and occurrence say it all."""
        return ""


class NoDetails(EventDetails):
    """Kinds with nothing beyond the common fields."""


class OtherDetails(EventDetails):
    """The details of a kind this process has not loaded the rule module of: kept as they came
    (flat JSON values), so a store or a relay never loses what it does not understand."""

    model_config = ConfigDict(frozen=True, extra="allow")


class EventCatalog:
    """Event kind → its details model. Filled by the rule registry
    (:func:`stormwatch.alerts.rules.registry.rule_kinds`); the contract only holds it.

    Raises (:meth:`register`):
        ValueError: a malformed kind, or a kind registered twice with different details.
    """

    def __init__(self) -> None:
        self._details: dict[str, type[EventDetails]] = {}
        self._lock = threading.Lock()

    def register(self, kind: str, details: type[EventDetails]) -> None:
        if not _KIND.match(kind):
            raise ValueError(f"event kind {kind!r}: lower-case words joined by '_'")
        with self._lock:
            known = self._details.get(kind)
            reloaded = known is not None and (known.__module__, known.__qualname__) == (details.__module__,
                                                                                        details.__qualname__)
            if known is not None and known is not details and not reloaded:
                raise ValueError(f"event kind {kind!r} is already declared with {known.__qualname__}")
            self._details[kind] = details

    def details_for(self, kind: str) -> type[EventDetails] | None:
        """The details model of ``kind``, or ``None`` when no loaded module declares it."""
        return self._details.get(kind)

    def kinds(self) -> tuple[str, ...]:
        """Every declared kind, sorted."""
        return tuple(sorted(self._details))

    def is_detail(self, name: str) -> bool:
        """Whether ``name`` is a field of some declared kind's details."""
        return any(name in model.model_fields for model in list(self._details.values()))


#: The event kinds of this process (filled by :mod:`stormwatch.alerts.rules.registry`).
EVENT_KINDS = EventCatalog()

#: Fields every event has; every other wire field belongs to its kind's details.
_HEAD = ("kind", "site", "event_time", "rule", "citation", "occurrence", "work_order", "due_at", "message")
_TAIL = ("unverified", "late_detection_s", "evidence")
_COMMON = frozenset(_HEAD + _TAIL)


class Event(BaseModel):
    """An ordinance event: something a village code requires action on, or evidence for it.

    Every event carries the ordinance section it enforces (``citation``) and the details of its
    kind (``details``, typed per kind: :class:`EventDetails`). Built from the wire form or from
    keyword arguments, fields that are not common are the details
    (``Event(kind="storm_qualified", ..., tips=50, depth_in=0.5)``); :meth:`to_wire` writes them
    flat again. Reading a detail by name (``event.tips``) works at run time (``None`` when the
    event's kind has no such detail but another kind has); typed code narrows ``event.details``
    (``isinstance(event.details, StormDetails)``).

    Attributes:
        kind: event kind (declared by a rule module, :data:`EVENT_KINDS`).
        site: site id.
        event_time: the event time at which the condition became true (UTC).
        rule: rule id (``R1`` storm, ``R1w`` weekly, ``R2`` turbidity, ``R3`` basin, ...).
        citation: e.g. ``"Ch. 133 §133-7A(2)"``.
        occurrence: stable key of the occurrence (dedupes events and work orders).
        work_order: id of the work order this event opened or refers to.
        due_at: deadline (UTC) where the law sets one.
        message: one human sentence for the timeline.
        details: the kind's own facts (a storm's tips and depth, a window's medians, ...).
        unverified: the rule's parameters (``name=value``) that the permit text in hand does not
            confirm (its pack marks them ``verified: false``; docs/rules.md); absent when all are.
        late_detection_s: set when the event was found late (seconds after event_time + lateness).
        evidence: the readings (or window medians) that triggered it.

    Raises (validation):
        pydantic.ValidationError: a malformed kind, or details its kind's model refuses.
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
    details: SerializeAsAny[EventDetails] = Field(default_factory=NoDetails)
    unverified: list[str] | None = None
    late_detection_s: float | None = None
    evidence: list[dict[str, Any]] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _typed_details(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        kind = data.get("kind")
        if not isinstance(kind, str) or not _KIND.match(kind):
            raise ValueError(f"kind {kind!r}: lower-case words joined by '_'")
        model = EVENT_KINDS.details_for(kind)
        given = data.get("details")
        flat = {k: v for k, v in data.items() if k not in _COMMON and k != "details"}
        out = {k: v for k, v in data.items() if k in _COMMON}
        if isinstance(given, EventDetails):
            if flat:
                raise ValueError(f"details given both as an object and as fields {sorted(flat)}")
            if model is not None and not isinstance(given, model):
                raise ValueError(f"{kind} carries {model.__qualname__}, not {type(given).__qualname__}")
            out["details"] = given
        else:
            raw = {**(given or {}), **flat}
            out["details"] = (model or (OtherDetails if raw else NoDetails)).model_validate(raw)
        return out

    if not TYPE_CHECKING:
        def __getattr__(self, name: str) -> Any:
            """A detail by name (``event.tips``), for readers that know the kind."""
            try:
                return super().__getattr__(name)
            except AttributeError:
                details = self.__dict__.get("details")
                if details is not None and (name in type(details).model_fields
                                            or name in (details.__pydantic_extra__ or {})):
                    return getattr(details, name)
                if EVENT_KINDS.is_detail(name):  # another kind's detail: this event has none
                    return None
                raise

    def to_wire(self) -> dict[str, Any]:
        """JSON-ready dict: common fields, then the details flat, absent optionals omitted, times as
        RFC 3339 UTC."""
        common = self.model_dump(mode="json", exclude_none=True, exclude={"details"})
        details = self.details.model_dump(mode="json", exclude_none=True)
        for source, data in ((self, common), (self.details, details)):
            for key in list(data):
                attr = getattr(source, key, None)
                if isinstance(attr, datetime):
                    data[key] = format_time(attr)
        out = {k: common[k] for k in _HEAD if k in common}
        out.update((k, v) for k, v in details.items() if k not in _COMMON)
        out.update((k, common[k]) for k in _TAIL if k in common)
        if not out.get("evidence"):
            out.pop("evidence", None)
        return out

    def identity(self) -> tuple[str, str, str]:
        """``(kind, occurrence, variant)``: what makes two emissions the same event."""
        return (self.kind, self.occurrence, self.details.variant())


def utcnow_from(ts: float) -> datetime:
    """A UTC datetime from POSIX seconds (for clocks; logic never reads the wall clock)."""
    return datetime.fromtimestamp(ts, UTC)
