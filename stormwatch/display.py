"""How values are shown to a person (an SMO, an inspector): one place for the demo timeline, the
work-order commands, ``replay``/``evaluate`` and the event messages.

* times: site-local, with weekday, date **and year** and the zone's abbreviation
  (``Mon 01 Jun 2026 00:00 EDT``); an unknown time is ``-``;
* turbidity: at 0.1 of the data's own unit (``7.9 NTU``, ``12.0 FNU``), never a float repr. 0.1 is
  the display resolution of field turbidity meters, finer than the accuracy of the bundled probes
  (Yosemitech Y511: ±5 % or 0.3 NTU; Campbell ClariVUE10: ±2 % or 0.5 FNU; docs/reference/sensors.md),
  so the digit shown is one the instrument can vouch for;
* rain: inches to 2 decimals (the 0.01-in gauges' resolution) next to the exact tip count;
* units: as people write them -- the wire's UCUM annotation ``{tip}`` is ``tips`` (``1 tip``),
  never the raw placeholder (:func:`unit_text`, :func:`amount`);
* numbers in messages: plain decimals (``1000000``, ``0.25``), not ``1e+06`` (:func:`number`); a count
  agrees with its noun (``1 tip``, ``2 tips``: :func:`plural`); long input quoted short (:func:`quoted`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from stormwatch.contract import Event

#: UTC as a zone, for messages of a rule built without a site (tests, tools).
UTC_ZONE = ZoneInfo("UTC")

#: Decimals of turbidity values shown to a person (see the module docstring).
TURBIDITY_DECIMALS = 1


class LocalTimeError(ValueError):
    """A local time the zone's clocks skip or show twice (the message says which, and what to give)."""


def local_instant(value: datetime, tz: str, text: str | None = None) -> datetime:
    """The instant a person means by ``value``: itself when it has an offset, else the local time of
    zone ``tz`` -- the ONE reading of a typed local time (``--from``/``--until``/``--sampled-at`` of
    the commands, the desk's field-reading form; file rows have their own, importers/table.py).

    A local time the clocks skip (02:30 on the night New York springs forward) is refused: taking it
    as 03:30 EDT or 02:30 EST would move it by an hour without saying so. One they show twice (01:30
    on the night they fall back) is refused unless it has an offset, naming both (``-04:00`` EDT
    first, ``-05:00`` EST an hour later). Zone rules: the IANA database (:mod:`zoneinfo`).

    Args:
        value: the parsed time (naive: local).
        tz: IANA zone of the site.
        text: how it was written, for the message (default: ``value`` in ISO 8601).

    Raises:
        LocalTimeError: a skipped or repeated local time.
        OverflowError: beyond what a datetime holds in UTC (year 9999 late, year 1 early).
    """
    if value.tzinfo is not None:
        value.astimezone(UTC)
        return value
    shown = repr(text) if text is not None else value.isoformat()
    zone = ZoneInfo(tz)
    first, second = value.replace(tzinfo=zone, fold=0), value.replace(tzinfo=zone, fold=1)
    if first.astimezone(UTC).astimezone(zone).replace(tzinfo=None) != value:
        raise LocalTimeError(f"{shown} does not exist in {tz}: the clocks jump ahead over it that night "
                             f"({first:%Z} to {second:%Z}); give a local time outside the skipped hour, or an "
                             "offset")
    if first.utcoffset() != second.utcoffset():
        raise LocalTimeError(f"{shown} happens twice in {tz} (the clocks fall back that night): give the offset, "
                             f"{value.isoformat()}{_offset(first)} ({first:%Z}, the first) or "
                             f"{value.isoformat()}{_offset(second)} ({second:%Z}, an hour later)")
    return first


def _offset(t: datetime) -> str:
    """``-04:00``: the UTC offset of ``t`` as ISO 8601 writes it."""
    text = t.strftime("%z")
    return f"{text[:3]}:{text[3:]}"


def local_time(t: datetime | None, tz: ZoneInfo | str | None = None) -> str:
    """``t`` in zone ``tz`` (default UTC) as ``Mon 01 Jun 2026 00:00 EDT``; ``-`` for ``None``."""
    if t is None:
        return "-"
    zone = tz if isinstance(tz, ZoneInfo) else ZoneInfo(tz) if tz else UTC
    return t.astimezone(zone).strftime("%a %d %b %Y %H:%M %Z")


def names(items: Iterable[object], empty: str = "none") -> str:
    """``a, b, c`` (sorted, as text) for a person -- never a Python list repr ``['a', 'b']``;
    ``empty`` when there is nothing."""
    return ", ".join(sorted(str(i) for i in items)) or empty


def local_day(day: date) -> str:
    """A calendar day for a person: ``Mon 01 Jun 2026`` (weekday, date and year)."""
    return day.strftime("%a %d %b %Y")


def counts(by_reason: Mapping[str, int]) -> str:
    """``bad_time 2, not_a_number 1`` (sorted by name) for a person; ``none`` when empty."""
    return ", ".join(f"{k} {v}" for k, v in sorted(by_reason.items())) or "none"


def duration(d: timedelta | None) -> str:
    """``3 d 4 h 05 min``, ``4 h 05 min``, ``12 min`` (whole minutes, cut); ``-`` for none. The one
    way a lateness or a gap is written, on the desk and in the log book alike."""
    if d is None:
        return "-"
    minutes = int(d.total_seconds() // 60)
    days, rest = divmod(minutes, 1440)
    hrs, mins = divmod(rest, 60)
    if days:
        return f"{days} d {hrs} h {mins:02d} min"
    if hrs:
        return f"{hrs} h {mins:02d} min"
    return f"{mins} min"


def inches(depth_in: float) -> str:
    """A rain depth in inches for a person: 2 decimals when that is exact (``1.20 in``), else 3
    decimals cut, never rounded up (a 0.2 mm gauge's 63 tips are ``0.496 in``, not ``0.50 in``:
    the Ch. 133 threshold must not appear met when it is not)."""
    if abs(depth_in * 100 - round(depth_in * 100)) < 1e-9:
        return f"{depth_in:.2f} in"
    return f"{math.floor(depth_in * 1000 + 1e-9) / 1000:.3f} in"


def turbidity(value: float | None, unit: str = "NTU") -> str:
    """A turbidity value at display resolution with its unit (``7.9 NTU``); ``unknown`` for ``None``."""
    if value is None:
        return "unknown"
    return f"{value:.{TURBIDITY_DECIMALS}f} {unit}"


def unit_text(unit: str, value: float | None = None) -> str:
    """A unit as people write it: a UCUM annotation unit ``{tip}`` (the wire's tip count) is
    ``tips``, or ``tip`` when ``value`` is exactly 1; any other ``{...}`` annotation loses its braces;
    other units (``NTU``, ``cm``, ``[pH]``, ``ft``) as they are."""
    if unit.startswith("{") and unit.endswith("}") and len(unit) > 2:
        word = unit[1:-1]
        return word if value is not None and value == 1 else f"{word}s"
    return unit


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``1 warning``, ``2 warnings``, ``0 cells``: a count and its noun in the number it needs
    (``many``, when the plural is not ``noun + "s"``: ``plural(n, "entry", "entries")``)."""
    return f"{count} {noun if count == 1 else many or noun + 's'}"


def quoted(text: str, limit: int = 40) -> str:
    """``text`` quoted for a message (its repr); past ``limit`` characters, its beginning and length."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"


def number(value: float) -> str:
    """A number for a person: a value a field instrument or a person could write in plain digits
    (below 10^15, from 10^-6) without an exponent -- an integer without a point (``1000000``, never
    ``1e+06``), else the shortest decimal that reads back as the value (``0.25``, ``41.5``); an
    absurd magnitude (``1e+308``, a typo's or a corrupt file's) keeps its exponent, shorter to read."""
    if not math.isfinite(value) or abs(value) >= 1e15 or (value != 0 and abs(value) < 1e-6):
        return f"{value:g}"
    if value == int(value):
        return str(int(value))
    text = repr(float(value))
    if "e" in text:
        text = f"{value:.12f}".rstrip("0").rstrip(".")
    return text


def amount(value: float, unit: str) -> str:
    """``value`` and its unit for a person: ``3 tips``, ``1 tip``, ``41.5 NTU``, ``1000000 NTU``."""
    shown = unit_text(unit, value)
    return f"{number(value)} {shown}" if shown else number(value)


def unconfirmed(e: Event) -> str:
    """What an event's ``unverified`` means and what to do about it: its rule pack's parameters the
    permit text in hand does not confirm, confirmed or overridden in the site file."""
    values = e.unverified or []
    first = values[0].split("=", 1) if values else ["PARAMETER", "VALUE"]
    many = len(values) > 1
    return (f"rule pack parameter{'s' if many else ''} {', '.join(values)}: {'values' if many else 'a value'} "
            f"the permit text in hand does not confirm; check the permit and set "
            f"{'them' if many else 'it'} in the site file to confirm or override "
            f"(rules: {{{e.rule}: {{{first[0]}: {first[-1]}}}}})")


def describe_event(e: Event, tz: ZoneInfo) -> str:
    """One timeline line for a person: local time, kind, the facts, the deadline, the citation and
    the work order (``stormwatch demo``, ``replay``, ``evaluate``)."""
    # each kind says its own facts (its rule module's details); else the evidence's reason, if any
    facts = e.details.headline(e, tz) or (str(e.evidence[-1].get("reason", "")) if e.evidence else "")
    due = f"  due {local_time(e.due_at, tz)}" if e.due_at else ""
    wo = f"  {e.work_order}" if e.work_order else ""
    unverified = f"  ({unconfirmed(e)})" if e.unverified else ""
    return f"{local_time(e.event_time, tz):>26}  {e.kind:<26} {facts}{due}  [{e.citation}]{wo}{unverified}"
