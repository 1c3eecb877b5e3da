"""Ordinance rules: one module each, each a small object fed one site's readings in event-time order.

Every rule has the same shape (:class:`Rule`): ``feed(reading)`` with readings in event-time
order, ``advance_to(t)`` when the site's event-time watermark reaches ``t`` (closes windows and
storms whose end is now known), both returning the :class:`stormwatch.contract.Event` s that
became true. Rules never read a clock, so live data, late data and a backfill from the store give
the same events (design-notes.md, "Rules").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from typing import NamedTuple, Protocol

from stormwatch.contract import Event, Reading
from stormwatch.stores.base import StoredRow
from stormwatch.stores.rows import row_reading, time_of_us
from stormwatch.wire import format_time


class Occurrence(NamedTuple):
    """The parts of a timed occurrence key (:func:`occurrence`): ``kind``, the discharge point,
    basin or gauge it is of (``key``; ``None``: the site's one), and its time (UTC)."""

    kind: str
    key: str | None
    time: datetime


def occurrence(kind: str, at: datetime, key: str | None = None) -> str:
    """The occurrence key of a timed event: ``<kind>:<time>`` or ``<kind>:<key>:<time>``, the time
    as :func:`stormwatch.wire.format_time` gives it (``storm:2026-06-01T05:00:00Z``,
    ``turbidity:outfall-2:2026-06-01T14:35:00Z``, ``basin:trap-2:2026-06-01T00:00:00Z``).

    The key of an event's work order (``(site, rule, occurrence)``), so one string for a condition
    forever: every rule that keys an event by a time builds it here, and
    :func:`parse_occurrence` reads it back. ``kind`` has no ``:``; ``key`` is an id, which may
    (:data:`stormwatch.contract.IDENTIFIER_RULE`): the time -- always ``HH:MM:SS`` and ``Z`` -- is
    read from the right, so a key with colons is read right too.
    """
    if ":" in kind:
        raise ValueError(f"occurrence kind {kind!r} must not contain ':'")
    return f"{kind}:{format_time(at)}" if key is None else f"{kind}:{key}:{format_time(at)}"


def parse_occurrence(text: str) -> Occurrence:
    """The parts of an occurrence key :func:`occurrence` built.

    Raises:
        ValueError: ``text`` is not ``<kind>[:<key>]:<RFC 3339 UTC time>`` (an occurrence keyed by a
            day or a work-order id, say ``R6:outfall-1:week:2026-06-01``).
    """
    head, sep, rest = text.partition(":")
    parts = rest.rsplit(":", 3)  # [key,] YYYY-MM-DDTHH, MM, SS[.ffffff]Z
    if not sep or len(parts) < 3:
        raise ValueError(f"occurrence {text!r} has no time")
    when = ":".join(parts[-3:])
    key = parts[0] if len(parts) == 4 else None
    try:
        t = datetime.fromisoformat(when).astimezone(UTC)
    except ValueError:
        raise ValueError(f"occurrence {text!r} has no time") from None
    if format_time(t) != when:
        raise ValueError(f"occurrence {text!r} has no time")
    return Occurrence(head, key, t)


class Rule(Protocol):
    """A rule fed one site's readings in event-time order."""

    rule_id: str
    #: earliest event time at which ``advance_to`` can emit something (None: time alone emits nothing);
    #: the engine skips ``advance_to`` before it (the hot path).
    next_due: datetime | None

    def wants(self, reading: Reading) -> bool:
        """Whether ``reading`` is input to this rule."""
        ...

    def feed(self, reading: Reading) -> list[Event]:
        """Take one reading (time ≥ every earlier one); events that became true at its time."""
        ...

    def advance_to(self, t: datetime) -> list[Event]:
        """Event time has reached ``t`` (no reading at or before ``t`` will come): due events."""
        ...


@dataclass(frozen=True)
class Chunk:
    """One stretch of stored event time as a backfill (:func:`~stormwatch.alerts.backfill.evaluate`) gives it the rules.

    A rule may take a whole chunk at once with an optional ``replay(chunk) -> list[Event]`` method:
    it must give exactly the events -- and leave exactly the state -- of :meth:`Rule.feed` for each
    of its readings in event-time order, each preceded by ``advance_to(time - 1 µs)`` when
    ``next_due`` is at or before it (what the engine does); the backfill then calls
    ``advance_to(watermark)`` as the engine does at the end of a chunk. A rule without ``replay`` is
    fed :class:`Reading` objects one by one.

    Attributes:
        site: the site.
        rows: the accepted rows of every series ``(device, quantity)`` of the site, each in the
            engine's order (time, gateway, boot, seq); late-flagged and physically impossible
            readings are not in them (the engine never gives those to a rule). A series may be a
            :class:`~stormwatch.stores.seriesrows.SeriesRows` (its columns: a rule's fast path reads
            ``times`` and ``values`` without making the row tuples).
        watermark: the newest event time of an accepted row (``None``: the chunk has none).
        first: the chunk's first accepted reading (any series), or ``None``.
        times: event times by microsecond, shared by the rules (the series of one site are polled
            together: one datetime per instant, not one per reading); :meth:`time` fills it.
    """

    site: str
    rows: Mapping[tuple[str, str], Sequence[StoredRow]]
    watermark: datetime | None
    first: Reading | None
    times: dict[int, datetime] = field(default_factory=dict)

    def time(self, us: int) -> datetime:
        """The UTC instant of ``us`` microseconds since the epoch (from :attr:`times`)."""
        t = self.times.get(us)
        if t is None:
            t = self.times[us] = time_of_us(us)
        return t

    def reading(self, device: str, quantity: str, row: StoredRow) -> Reading:
        """The :class:`Reading` of one row of the series ``(device, quantity)``."""
        return row_reading(self.site, device, quantity, row)


class RuleTrace(Protocol):
    """What the rules computed on the way to their events, for a report (``stormwatch report``).

    A backfill (:func:`stormwatch.alerts.backfill.evaluate` with ``trace=``) hands one object to
    every rule; the rules call it with the quantities they decided on, so a report shows the
    rules' own numbers (never a second implementation). Live engines have none (``trace`` is
    ``None``): the hooks cost one attribute test per reading.
    """

    def rain_counted(self, t: datetime, tips: int, depth_in: Fraction) -> None:
        """R1 counted ``tips`` (> 0) whole tips at event time ``t`` (after every quality check), of
        ``depth_in`` inches (their own tip size's)."""
        ...

    def storm_ended(self, start: datetime, last_tip: datetime, tips: int, qualified: bool, confirmed: bool,
                    depth_in: Fraction, lower_bound: bool = False) -> None:
        """R1 closed a storm (qualifying or not) of ``tips`` tips, ``depth_in`` inches (the gauge's, each
        reading at its own tip size); ``confirmed``: the gauge reported the dry gap; ``lower_bound``:
        the gauge had a data gap of unknown rain inside the storm, so it was at least that deep
        (:attr:`~stormwatch.alerts.rules.storm.StormDetails.depth_lower_bound`)."""
        ...

    def turbidity_window(self, start: datetime, end: datetime, status: str, reason: str, upstream: float | None,
                         downstream: float | None, allowed: float | None, point: str | None = None) -> None:
        """R2 judged the window ``[start, end)`` of discharge point ``point`` (``None``: the site file's
        one ``turbidity_pair``): ``status`` ``compliant``, ``violating``, ``undetermined`` or
        ``needs_verification``; window medians and the allowed value (NTU/FNU)."""
        ...

    def basin_settled(self, t: datetime, depth_ft: float, lost_fraction: float, basin: str | None = None) -> None:
        """R3's settled sediment depth of basin ``basin`` (its id) changed at ``t``: ``depth_ft``
        above the floor and the fraction 0..1 of the design storage volume it takes."""
        ...
