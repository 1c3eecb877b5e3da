"""Stored rows back into :class:`~stormwatch.contract.Reading` objects (the read side of every store).

Each store encodes a reading its own way (SQLite columns, InfluxDB fields from
:func:`stormwatch.stores.lineprotocol.reading_point`); once those columns are decoded, :func:`stored_reading`
builds the reading. :func:`influx_readings` decodes the InfluxDB field encoding shared by
:mod:`stormwatch.stores.influx1` and :mod:`stormwatch.stores.influx2` (``docs/influxdb-schema.md``).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Generator, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import ValidationError

from stormwatch.contract import Event, Reading
from stormwatch.stores.base import ROW_BOOT, ROW_GATEWAY, ROW_SEQ, ROW_TIME, ReadingStore, StoredRow
from stormwatch.stores.lineprotocol import from_ns
from stormwatch.wire import format_time

log = logging.getLogger(__name__)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

#: Times one row is read again after it was found unreadable (:class:`UnreadableRows`): a point
#: InfluxDB 1.x answered half-written while it was being written is whole at the next read; one
#: still unreadable after these is left out, with an ERROR.
REREADS = 6
#: Identities remembered at most (their read counts; forgotten all at once beyond it).
_REMEMBERED = 10_000

#: What decoding a stored row may raise: a field missing (``None``) or of another type.
ROW_ERRORS = (TypeError, ValueError, KeyError, ValidationError)


class UnreadableRows:
    """The rows a store answered that cannot be read -- skipped, counted, logged with their identity
    (WARNING the first time, ERROR when still unreadable after :data:`REREADS` reads) -- and, per
    site, the earliest time a reader should read again (:meth:`take`): InfluxDB 1.x may answer a
    point it is writing without some of its fields (``value``: ``None``), and the whole point a
    moment later. Thread-safe; one per store.

    Args:
        store: how the store is named in the logs (``influx1:fleet``).
    """

    def __init__(self, store: str) -> None:
        self.store = store
        #: rows skipped so far
        self.count = 0
        self._reads: dict[tuple[str, ...], int] = {}
        self._again: dict[str, datetime] = {}
        self._lock = threading.Lock()

    def skip(self, what: str, row: Mapping[str, Any], ns: int | None, exc: BaseException) -> None:
        """Count the unreadable ``row`` (a ``what``: ``reading``, ``event``) of time ``ns``."""
        when = from_ns(ns) if isinstance(ns, int) else None
        names = ("site", "device", "quantity", "kind", "gateway", "boot", "seq")
        identity = " ".join(f"{k}={row[k]}" for k in names if row.get(k) is not None)
        key = (what, identity, str(ns))
        why = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
        with self._lock:
            self.count += 1
            if len(self._reads) >= _REMEMBERED:
                self._reads.clear()
            reads = self._reads[key] = self._reads.get(key, 0) + 1
            site = row.get("site")
            if what == "reading" and reads <= REREADS and isinstance(site, str) and when is not None:
                self._again[site] = min(self._again.get(site, when), when)
        at = format_time(when) if when is not None else "an unknown time"
        if reads == 1:
            again = "; it is read again on the next catch-up" if what == "reading" else ""
            log.warning("%s: skipped an unreadable stored %s at %s (%s): %s%s", self.store, what, at,
                        identity or "no identity", why, again)
        elif reads == REREADS + 1:
            log.error("%s: the stored %s at %s (%s) is still unreadable after %d reads (%s): left out -- the "
                      "database holds a point without the fields every %s has", self.store, what, at, identity,
                      REREADS, why, what)
        else:
            log.debug("%s: stored %s at %s (%s) unreadable again (%d reads)", self.store, what, at, identity, reads)

    def take(self) -> dict[str, datetime]:
        """Per site, the earliest time of the rows skipped since the last call (to read again)."""
        with self._lock:
            again, self._again = self._again, {}
        return again


def unreadable_of(store: object) -> UnreadableRows | None:
    """The :class:`UnreadableRows` of ``store`` (``None``: a store whose rows are always whole)."""
    found = getattr(store, "unreadable", None)
    return found if isinstance(found, UnreadableRows) else None


def time_of_us(us: int) -> datetime:
    """The UTC instant ``us`` integer microseconds after the Unix epoch."""
    return _EPOCH + timedelta(microseconds=us)


_US = timedelta(microseconds=1)
_last_us: tuple[datetime | None, int] = (None, 0)  # the last instant asked (a poll cycle's readings share it)


def us_of(t: datetime) -> int:
    """Integer microseconds since the Unix epoch of the aware instant ``t`` (exact)."""
    global _last_us
    last = _last_us
    if t is last[0]:
        return last[1]
    us = (t - _EPOCH) // _US
    _last_us = (t, us)
    return us


def row_reading(site: str, device: str, quantity: str, row: StoredRow) -> Reading:
    """The :class:`Reading` of a :data:`~stormwatch.stores.base.StoredRow` (validated when it was
    stored; built without validating again, ``raw`` not kept: no rule reads it)."""
    t_us, value, unit, flags, gateway, boot, seq, tip_size = row
    return Reading.model_construct(site=site, device=device, quantity=quantity, value=value, unit=unit,
                                   time=time_of_us(t_us), gateway=gateway, boot=boot, seq=seq, raw=None,
                                   flags=tuple(flags.split(",")) if flags else (), tip_size=tip_size or None)


def engine_order(row: StoredRow) -> tuple[int, str, str, int]:
    """The engine's order of a stored row: (time, gateway, boot, seq)."""
    return (row[ROW_TIME], row[ROW_GATEWAY], row[ROW_BOOT], row[ROW_SEQ])


def stored_series(store: ReadingStore, site: str) -> list[tuple[str, str]]:
    """The store's :meth:`~stormwatch.stores.base.SeriesStore.stored_series` of ``site``, or ``[]``
    when it has none (its readings' series are then found as they are read, :func:`series_rows`).

    Raises:
        StoreError: the store cannot be read.
    """
    find = getattr(store, "stored_series", None)
    return list(find(site)) if find is not None else []


def series_rows(store: ReadingStore, site: str, series: Sequence[tuple[str, str]], start: datetime,
                end: datetime) -> dict[tuple[str, str], list[StoredRow]]:
    """:meth:`~stormwatch.stores.base.SeriesStore.query_series` of any store: the store's own when it
    has one (SQLite, InfluxDB 1.x), else its readings of the window split into series (then every
    series found in the window is in the answer, not only those of ``series``).

    Raises:
        StoreError: the store cannot be read.
    """
    query = getattr(store, "query_series", None)
    if query is not None:
        found: dict[tuple[str, str], list[StoredRow]] = query(site, series, start, end)
        return found
    out: dict[tuple[str, str], list[StoredRow]] = {key: [] for key in series}
    for r in store.query_readings(site, start, end):
        out.setdefault((r.device, r.quantity), []).append(
            (us_of(r.time), r.value, r.unit, ",".join(r.flags), r.gateway, r.boot, r.seq, r.tip_size or ""))
    for rows in out.values():
        rows.sort(key=engine_order)
    return out


def series_chunks(store: ReadingStore, site: str, series: Sequence[tuple[str, str]],
                  windows: Sequence[tuple[datetime, datetime]],
                  ) -> Generator[Mapping[tuple[str, str], Sequence[StoredRow]], None, None]:
    """:func:`series_rows` of each window in turn: the store's own ``series_chunks`` when it has one
    (SQLite: read ahead by a second process, :mod:`stormwatch.stores.sqlite_reader`; a series'
    rows may be a :class:`~stormwatch.stores.seriesrows.SeriesRows`, its columns), else window by
    window. Close the iterator when stopping early.

    Raises:
        StoreError: the store cannot be read.
    """
    chunks = getattr(store, "series_chunks", None)
    if chunks is not None:
        yield from chunks(site, series, windows)
        return
    for a, b in windows:
        yield series_rows(store, site, series, a, b)


def stored_reading(row: Mapping[str, Any], ns: int, *, value: int | float, raw: Any,
                   flags: Iterable[str]) -> Reading:
    """The reading of a stored row whose encoded columns are already decoded.

    Args:
        row: ``site``, ``device``, ``quantity``, ``unit``, ``gateway``, ``boot``, ``seq`` (int or
            numeric text), and ``tip_size`` when the reading names one (absent, ``None`` or ``""``: none).
        ns: event time, integer nanoseconds since the Unix epoch (truncated to microseconds).
        value, raw, flags: the decoded value, raw value and quality flags.

    Raises:
        pydantic.ValidationError: the row does not make a valid reading.
    """
    return Reading(
        site=row["site"], device=row["device"], quantity=row["quantity"], value=value, unit=row["unit"],
        time=from_ns(ns), gateway=row["gateway"], boot=row["boot"], seq=int(row["seq"]), raw=raw,
        flags=tuple(flags), tip_size=row.get("tip_size") or None,
    )


def influx_readings(rows: Iterable[tuple[Mapping[str, Any], int]], *, late: bool | None,
                    unreadable: UnreadableRows | None = None) -> list[Reading]:
    """Readings from InfluxDB ``readings`` rows (fields pivoted into columns), in (time, ``seq``) order.

    Args:
        rows: ``(row, ns)`` pairs: the tag and field columns of one point and its time in ns.
            ``value`` comes back as a float, except ``rain_tips`` whose integer ``tips`` field is
            used; ``raw`` is JSON text (absent: ``None``); ``flags`` is comma-joined text.
        late: ``None`` every row, ``False`` rows without the ``late`` field, ``True`` late rows only.
        unreadable: where a row that does not make a reading is counted (it is skipped); ``None``:
            such a row raises.

    Raises:
        TypeError, ValueError, KeyError, pydantic.ValidationError: a row does not make a valid
            reading, and ``unreadable`` is ``None``.
    """
    out: list[tuple[int, int, Reading]] = []
    for row, ns in rows:
        if late is not None and bool(row.get("late")) != late:
            continue
        try:
            reading = _influx_reading(row, ns)
        except ROW_ERRORS as exc:
            if unreadable is None:
                raise
            unreadable.skip("reading", row, ns, exc)
            continue
        out.append((ns, reading.seq, reading))
    out.sort(key=lambda t: (t[0], t[1]))
    return [r for _, _, r in out]


def _influx_reading(row: Mapping[str, Any], ns: int) -> Reading:
    value: int | float = float(row["value"])
    if row.get("quantity") == "rain_tips" and row.get("tips") is not None:
        value = int(row["tips"])
    return stored_reading(
        row, ns, value=value, raw=json.loads(row["raw"]) if row.get("raw") else None,
        flags=row["flags"].split(",") if row.get("flags") else (),
    )


def influx_series_row(point: Sequence[Any], tips_field: bool) -> StoredRow:
    """The :data:`StoredRow` of one point of a series query (``time, value, tips, unit, flags,
    gateway, boot, seq, tip_size``; ``tips`` is read for rain).

    Raises:
        TypeError, ValueError: a field the row needs is missing (``None``) or not a number.
    """
    ns, value, tips, unit, flags, gateway, boot, seq, tip_size = point
    if unit is None or gateway is None or boot is None:
        raise TypeError("the point has no unit, gateway or boot")
    return (ns // 1_000, int(tips) if tips_field and tips is not None else float(value), unit, flags or "",
            gateway, boot, int(seq), tip_size or "")


def influx_events(points: Iterable[tuple[int, str]], unreadable: UnreadableRows | None = None,
                  site: str | None = None) -> list[Event]:
    """Events from their ``wire`` field (the full ``Event.to_wire()`` JSON), in the order given;
    one that cannot be read is counted in ``unreadable`` and skipped (``None``: it raises)."""
    out: list[Event] = []
    for ns, wire in points:
        try:
            out.append(Event.model_validate(json.loads(wire)))
        except ROW_ERRORS as exc:
            if unreadable is None:
                raise
            unreadable.skip("event", {"site": site} if site else {}, ns, exc)
    return out
