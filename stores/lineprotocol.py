"""InfluxDB line protocol: escaping, typed fields, nanosecond timestamps, and the stormwatch schema.

The design: docs/stores.md ("The modules", `stores/lineprotocol.py`).
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from typing import Protocol

from stormwatch.contract import Event, Reading
from stormwatch.rain import tip_size_of
from stormwatch.stores.base import DeadLetter, SiteInfo
from stormwatch.wire import format_time

#: Measurement names of the schema.
READINGS = "readings"
EVENTS = "events"
DEADLETTER = "deadletter"
SITES = "sites"

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Float(float):
    """Marks a field that must be written as a float even when given an ``int`` (``13`` -> ``13.0``)."""


FieldValue = float | int | bool | str


@dataclass(frozen=True)
class Point:
    """One line-protocol point.

    Attributes:
        measurement: measurement name.
        tags: tag key -> value (empty values are omitted on encoding).
        fields: field key -> value. ``float`` (and :class:`Float`) -> float; ``int`` -> ``i``
            integer; ``bool`` -> boolean; ``str`` -> quoted string.
        time_ns: timestamp, integer nanoseconds since the Unix epoch (UTC).
    """

    measurement: str
    tags: Mapping[str, str]
    fields: Mapping[str, FieldValue]
    time_ns: int


def time_ns(value: datetime) -> int:
    """Exact integer nanoseconds since the Unix epoch of an aware datetime.

    Raises:
        ValueError: ``value`` is naive.
    """
    if value.tzinfo is not UTC:  # a reading's time is held in UTC already: no conversion then
        if value.tzinfo is None:
            raise ValueError("naive datetime: event times must carry a time zone")
        value = value.astimezone(UTC)
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def from_ns(ns: int) -> datetime:
    """The UTC datetime of integer nanoseconds since the epoch (truncated to microseconds)."""
    return _EPOCH + timedelta(microseconds=ns // 1_000)


#: Characters that need escaping somewhere in line protocol (fast path: most texts have none).
_NEEDS_ESCAPE = re.compile(r'[,= \n"\\]')


def _escape(text: str, specials: str) -> str:
    if _NEEDS_ESCAPE.search(text) is None:
        return text
    out = text.replace("\n", "\\n")
    for ch in specials:
        out = out.replace(ch, "\\" + ch)
    return out


def escape_measurement(name: str) -> str:
    """Escape a measurement name (``,`` and space)."""
    return _escape(name, ", ")


def escape_key(text: str) -> str:
    """Escape a tag key, tag value or field key (``,``, ``=`` and space); never quoted."""
    return _escape(text, ",= ")


def escape_string_field(text: str) -> str:
    """A quoted string field value: ``"`` and ``\\`` escaped."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def format_field(value: FieldValue) -> str | None:
    """Encode one field value, or ``None`` when it cannot be written (NaN/Inf float).

    Raises:
        TypeError: an unsupported value type.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Float | float):
        f = float(value)
        if not math.isfinite(f):
            return None
        return repr(f)  # repr always carries a '.' or an exponent: 13.0, 1e-05, 1.5e+20
    if isinstance(value, int):
        return f"{value}i"
    if isinstance(value, str):
        return escape_string_field(value)
    raise TypeError(f"unsupported field type {type(value).__name__}")


def encode_point(point: Point) -> str | None:
    """One line of line protocol, or ``None`` when every field was dropped (NaN/Inf).

    Tags are written sorted by key (InfluxDB's recommended order).
    """
    fields = []
    for key, value in point.fields.items():
        text = format_field(value)
        if text is not None:
            fields.append(f"{escape_key(key)}={text}")
    if not fields:
        return None
    head = escape_measurement(point.measurement)
    for key in sorted(point.tags):
        value = point.tags[key]
        if value != "":
            head += f",{escape_key(key)}={escape_key(value)}"
    return f"{head} {','.join(fields)} {point.time_ns}"


def encode_points(points: Iterable[Point]) -> list[str]:
    """Encode points, skipping those with no writable field."""
    lines = []
    for p in points:
        line = encode_point(p)
        if line is not None:
            lines.append(line)
    return lines


# --- the stormwatch schema -------------------------------------------------------------------


#: Timestamp slots per microsecond: readings are exact to the microsecond (:func:`from_ns`), so the
#: nanoseconds below it are free to tell apart readings of one series that share a microsecond.
SLOTS_PER_US = 1_000


def reading_point(reading: Reading, *, late: bool = False, slot: int = 0, page: int = 0) -> Point:
    """The ``readings`` point of a reading (schema: docs/influxdb-schema.md).

    Tags ``site``, ``device``, ``quantity``, ``unit``, ``tip_size`` (a rain reading's depth per tip,
    when it names one); fields ``value`` (always float), ``tips`` (int, ``rain_tips`` only),
    ``depth_in`` (float: ``tips`` × the tip size in inches, for dashboards -- the exact depth is
    ``tips`` and ``tip_size``), ``gateway``, ``boot`` (strings: unbounded cardinality, never tags),
    ``seq`` (int), ``raw`` (JSON string), ``flags`` (comma-joined; ``""`` when clean -- always
    present, so InfluxQL can select clean readings with ``"flags" = ''``: a condition on a field a
    point lacks is false), ``late`` (only when true); time = event time in ns + ``slot``
    (0 <= slot < :data:`SLOTS_PER_US`; the stores give two readings of one series and microsecond
    different slots, so neither overwrites the other: :mod:`stormwatch.stores.influxwrite`); tag
    ``page`` only when ``page`` > 0 (more than 1,000 readings of the series in one microsecond).
    """
    fields: dict[str, FieldValue] = {"value": Float(reading.value)}
    depth = _depth_in(reading)
    if reading.quantity == "rain_tips" and isinstance(reading.value, int):
        fields["tips"] = int(reading.value)
        if depth is not None:
            fields["depth_in"] = depth
    fields["gateway"] = reading.gateway
    fields["boot"] = reading.boot
    fields["seq"] = int(reading.seq)
    fields["raw"] = json.dumps(reading.raw, separators=(",", ":"))
    fields["flags"] = ",".join(reading.flags)
    if late:
        fields["late"] = True
    tags = {"site": reading.site, "device": reading.device, "quantity": reading.quantity, "unit": reading.unit}
    if reading.tip_size is not None:
        tags["tip_size"] = reading.tip_size
    if page:
        tags["page"] = str(page)
    return Point(READINGS, tags, fields, time_ns(reading.time) + _slot(slot))


def _depth_in(reading: Reading) -> Float | None:
    """``depth_in`` of a rain reading that names its tip size (tips × inches per tip), else ``None``."""
    size = reading.tip_resolution if reading.quantity == "rain_tips" else None
    if size is None or not isinstance(reading.value, int):
        return None
    return Float(size.depth_in(reading.value))


def _slot(slot: int) -> int:
    if not 0 <= slot < SLOTS_PER_US:
        raise ValueError(f"timestamp slot {slot} is outside 0..{SLOTS_PER_US - 1}")
    return slot


#: Bounded caches of the hot path (:func:`reading_line`): a series' tag text (a site has a few
#: dozen) and a string field's quoted text (gateways and boots repeat on every reading).
_CACHE_MAX = 4096
_HEADS: dict[tuple[str, str, str, str, str, int], str] = {}
_QUOTED: dict[str, str] = {}


def _head(site: str, device: str, quantity: str, unit: str, tip_size: str, page: int) -> str:
    key = (site, device, quantity, unit, tip_size, page)
    head = _HEADS.get(key)
    if head is None:
        head = READINGS
        for tag, text in (("device", device), ("page", str(page) if page else ""), ("quantity", quantity),
                          ("site", site), ("tip_size", tip_size), ("unit", unit)):
            if text != "":
                head += f",{tag}={escape_key(text)}"
        if len(_HEADS) >= _CACHE_MAX:
            _HEADS.clear()
        _HEADS[key] = head
    return head


def _quoted(text: str) -> str:
    quoted = _QUOTED.get(text)
    if quoted is None:
        quoted = escape_string_field(text)
        if len(_QUOTED) >= _CACHE_MAX:
            _QUOTED.clear()
        _QUOTED[text] = quoted
    return quoted


_INT_ONLY = frozenset((int,))
_EMPTY = '""'
_SOURCES: dict[tuple[str, str], str] = {}


def _source(gateway: str, boot: str) -> str:
    """The ``gateway`` and ``boot`` fields of a reading, quoted once per boot of a gateway."""
    text = _SOURCES.get((gateway, boot))
    if text is None:
        text = f"gateway={_quoted(gateway)},boot={_quoted(boot)}"
        if len(_SOURCES) >= _CACHE_MAX:
            _SOURCES.clear()
        _SOURCES[(gateway, boot)] = text
    return text


def _raw_field(raw: object) -> str:
    """The ``raw`` field: its compact JSON, quoted (register words and counters need no escaping)."""
    if raw is None:
        return '"null"'
    if type(raw) is int:
        return f'"{raw}"'
    if type(raw) is list and set(map(type, raw)) <= _INT_ONLY:
        return '"[' + ",".join(map(str, raw)) + ']"'
    return escape_string_field(json.dumps(raw, separators=(",", ":")))


def reading_line(reading: Reading, *, late: bool = False, slot: int = 0, page: int = 0,
                 at_ns: int | None = None) -> str:
    """``encode_point(reading_point(reading, late=late, slot=slot, page=page))`` built directly (the
    ingest hot path; ``at_ns``: the reading's :func:`time_ns` when the caller has it already).

    Same line, byte for byte (``tests/stores/test_lineprotocol.py`` checks the two agree), without the
    intermediate :class:`Point` and with a series' tags and repeated texts made once.
    """
    ns = time_ns(reading.time) if at_ns is None else at_ns
    return reading_lines([(reading, page, slot, ns)], late=late)[0]


class Fields(Protocol):
    """What a line is made of: the fields of a :class:`~stormwatch.contract.Reading` but its time (given
    apart, in ns) -- a ``Reading`` or a decoded wire reading (:class:`stormwatch.fastwire.Wire`)."""

    @property
    def site(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def quantity(self) -> str: ...
    @property
    def value(self) -> int | float: ...
    @property
    def unit(self) -> str: ...
    @property
    def gateway(self) -> str: ...
    @property
    def boot(self) -> str: ...
    @property
    def seq(self) -> int: ...
    @property
    def raw(self) -> object: ...
    @property
    def flags(self) -> Sequence[str]: ...
    @property
    def tip_size(self) -> str | None: ...


_INCHES: dict[str, Fraction] = {}


def _depth(tip_size: str | None, tips: int) -> str:
    """The ``depth_in`` field of ``tips`` tips of ``tip_size`` as :func:`_depth_in` gives it (``""``
    without a size)."""
    if tip_size is None:
        return ""
    inches = _INCHES.get(tip_size)
    if inches is None:
        if len(_INCHES) >= _CACHE_MAX:
            _INCHES.clear()
        inches = _INCHES[tip_size] = tip_size_of(tip_size).inches
    return f"depth_in={float(tips * inches)!r},"


def reading_lines(placed: Iterable[tuple[Fields, int, int, int]], *, late: bool = False) -> list[str]:
    """:func:`reading_line` of each ``(reading, page, slot, time_ns)``, in one loop (a write's lines);
    a reading may be a :class:`~stormwatch.contract.Reading` or any :class:`Fields`."""
    heads, sources, isfinite = _HEADS, _SOURCES, math.isfinite
    tail = ",late=true " if late else " "
    out = []
    last_gateway = last_boot = source = ""
    for reading, page, slot, ns in placed:
        value = reading.value
        quantity = reading.quantity
        if type(value) is float:
            fields = f"value={value!r}," if isfinite(value) else ""
        else:
            fields = "" if isinstance(value, float) and not math.isfinite(value) else f"value={float(value)!r},"
        tip_size = reading.tip_size
        if quantity == "rain_tips" and isinstance(value, int):
            fields += f"tips={value}i," + _depth(tip_size, value)
        key = (reading.site, reading.device, quantity, reading.unit, tip_size or "", page)
        head = heads.get(key) or _head(*key)
        gateway, boot = reading.gateway, reading.boot
        if boot != last_boot or gateway != last_gateway or not source:  # a write's readings come by boot
            source, last_gateway, last_boot = sources.get((gateway, boot)) or _source(gateway, boot), gateway, boot
        raw = reading.raw
        if type(raw) is list and set(map(type, raw)) <= _INT_ONLY:
            raw_text = '"[' + ",".join(map(str, raw)) + ']"'
        else:
            raw_text = _raw_field(raw)
        flags = reading.flags
        if not 0 <= slot < SLOTS_PER_US:
            _slot(slot)  # raises
        out.append(f"{head} {fields}{source},seq={int(reading.seq)}i,raw={raw_text},"
                   f"flags={_quoted(','.join(flags)) if flags else _EMPTY}{tail}{ns + slot}")
    return out


def _detail_fields(event: Event) -> dict[str, FieldValue]:
    """The event's details as ``events`` fields, from their types (no list of kinds here: each kind's
    details model is its rule module's): times as RFC 3339 strings, then integers, then floats;
    other values (lists, text) stay in ``wire`` only."""
    details = event.details
    values = {**{name: getattr(details, name) for name in type(details).model_fields},
              **(details.__pydantic_extra__ or {})}
    times = {k: format_time(v) for k, v in values.items() if isinstance(v, datetime)}
    ints = {k: int(v) for k, v in values.items() if isinstance(v, int) and not isinstance(v, bool)}
    floats = {k: Float(v) for k, v in values.items() if isinstance(v, float)}
    return {**times, **ints, **floats}


def event_title(event: Event) -> str:
    """Short annotation title, e.g. ``storm_qualified (R1)``."""
    return f"{event.kind} ({event.rule})"


def event_point(event: Event) -> Point:
    """The ``events`` point of an ordinance event (usable as a Grafana annotation).

    Tags ``site``, ``kind``, ``rule``; fields ``citation``, ``occurrence``, ``work_order``,
    ``due_at`` (RFC 3339), ``message``, ``title``, ``text``, ``wire`` (the JSON event), the kind's
    details (times, integers such as ``tips``, floats such as ``depth_in``), ``unverified`` (the rule's
    parameters the permit text does not confirm, ``name=value`` joined by ``, ``) and ``late_detection_s``;
    time = ``event_time``. The same event written twice is the same point.
    """
    fields: dict[str, FieldValue] = {
        "citation": event.citation,
        "occurrence": event.occurrence,
        "message": event.message,
        "title": event_title(event),
        "text": f"{event.message} [{event.citation}]" if event.message else event.citation,
        "wire": json.dumps(event.to_wire(), separators=(",", ":")),
    }
    if event.work_order is not None:
        fields["work_order"] = event.work_order
    if event.due_at is not None:
        fields["due_at"] = format_time(event.due_at)
    fields.update(_detail_fields(event))
    if event.unverified:
        fields["unverified"] = ", ".join(event.unverified)
    if event.late_detection_s is not None:
        fields["late_detection_s"] = Float(event.late_detection_s)
    return Point(EVENTS, {"site": event.site, "kind": event.kind, "rule": event.rule}, fields,
                 time_ns(event.event_time))


def site_point(site: SiteInfo, at: datetime) -> Point:
    """The ``sites`` point of a configured site: tags ``site`` and ``timezone`` (IANA), field
    ``jurisdiction``; time ``at``. Dashboards read a site's zone from it
    (``SHOW TAG VALUES FROM "sites" WITH KEY = "timezone" WHERE "site" = '$site'``)."""
    return Point(SITES, {"site": site.site, "timezone": site.timezone}, {"jurisdiction": site.jurisdiction},
                 time_ns(at))


def payload_text(payload: bytes) -> tuple[str, str]:
    """``(text, encoding)``: the payload as UTF-8 text, or base64 when it is not UTF-8."""
    try:
        return payload.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(payload).decode("ascii"), "base64"


def deadletter_points(letters: Iterable[DeadLetter], taken: set[tuple[str, int]] | None = None) -> list[Point]:
    """``deadletter`` points: tag ``reason``; fields ``detail``, ``topic``, ``payload``,
    ``payload_encoding``; time = ``received_at``.

    A dead letter whose ``(reason, time in ns)`` is in ``taken`` (points already stored) or was
    given to another dead letter of this call is moved on by 1 ns, so that none overwrites another
    (InfluxDB identity is measurement + tags + time). ``taken`` is extended with the times given.
    """
    taken = set() if taken is None else taken
    after: dict[tuple[str, int], int] = {}  # (reason, receive time) -> first ns not yet tried
    points = []
    for letter in letters:
        text, encoding = payload_text(letter.payload)
        wanted = (letter.reason, time_ns(letter.received_at))
        ns = after.get(wanted, wanted[1])
        while (letter.reason, ns) in taken:
            ns += 1
        taken.add((letter.reason, ns))
        after[wanted] = ns + 1
        fields: dict[str, FieldValue] = {
            "detail": letter.detail,
            "topic": letter.topic,
            "payload": text,
            "payload_encoding": encoding,
        }
        points.append(Point(DEADLETTER, {"reason": letter.reason}, fields, ns))
    return points
