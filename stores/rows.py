"""Stored rows back into :class:`~stormwatch.contract.Reading` objects (the read side of every store).

Each store encodes a reading its own way (SQLite columns, InfluxDB fields from
:func:`stormwatch.stores.lineprotocol.reading_point`); once those columns are decoded, :func:`stored_reading`
builds the reading. :func:`influx_readings` decodes the InfluxDB field encoding shared by
:mod:`stormwatch.stores.influx1` and :mod:`stormwatch.stores.influx2` (``docs/influxdb-schema.md``).
"""

from __future__ import annotations

import json
from collections.abc import Generator, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from stormwatch.contract import Reading
from stormwatch.stores.base import ROW_BOOT, ROW_GATEWAY, ROW_SEQ, ROW_TIME, ReadingStore, StoredRow
from stormwatch.stores.lineprotocol import from_ns

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


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


def influx_readings(rows: Iterable[tuple[Mapping[str, Any], int]], *, late: bool | None) -> list[Reading]:
    """Readings from InfluxDB ``readings`` rows (fields pivoted into columns), in (time, ``seq``) order.

    Args:
        rows: ``(row, ns)`` pairs: the tag and field columns of one point and its time in ns.
            ``value`` comes back as a float, except ``rain_tips`` whose integer ``tips`` field is
            used; ``raw`` is JSON text (absent: ``None``); ``flags`` is comma-joined text.
        late: ``None`` every row, ``False`` rows without the ``late`` field, ``True`` late rows only.

    Raises:
        pydantic.ValidationError: a row does not make a valid reading.
    """
    out: list[tuple[int, int, Reading]] = []
    for row, ns in rows:
        if late is not None and bool(row.get("late")) != late:
            continue
        value: int | float = float(row["value"])
        if row.get("quantity") == "rain_tips" and row.get("tips") is not None:
            value = int(row["tips"])
        reading = stored_reading(
            row, ns, value=value, raw=json.loads(row["raw"]) if row.get("raw") else None,
            flags=row["flags"].split(",") if row.get("flags") else (),
        )
        out.append((ns, reading.seq, reading))
    out.sort(key=lambda t: (t[0], t[1]))
    return [r for _, _, r in out]
