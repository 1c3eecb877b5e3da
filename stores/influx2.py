"""InfluxDB 2.x (and 3.x / Cloud, v2 write API) store through ``influxdb-client``.

Same schema and semantics as :mod:`stormwatch.stores.influx1` (``docs/influxdb-schema.md``): line protocol
from :mod:`stormwatch.stores.lineprotocol`, written with the synchronous write API at ns precision; retries
with backoff honouring ``Retry-After``; a refused batch (400/413/422) is bisected and only the
refused lines are dead-lettered (``store_rejected``); an unreachable server raises
:class:`~stormwatch.stores.base.StoreError`. Readings are read back with Flux (``pivot`` on ``_field``).

No InfluxDB 2.x server can run on the test machines (Debian ships 1.6, without the v2 API): the
conformance suite (``tests/stores/test_conformance.py``) runs this store through influxdb-client
against a recording endpoint that forwards its writes to a real InfluxDB 1.x -- its line protocol
must equal the 1.x store's byte for byte -- and checks its Flux texts.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any, cast

from influxdb_client import InfluxDBClient, WritePrecision
from influxdb_client.client.exceptions import InfluxDBError
from influxdb_client.client.write_api import SYNCHRONOUS

from stormwatch.clock import Clock, WallClock
from stormwatch.contract import Event, Reading
from stormwatch.physics import FLAG_BEYOND_ENVELOPE
from stormwatch.stores.base import SeriesSummary, StoreError
from stormwatch.stores.influxwrite import LineProtocolWrites, Retryable, StoredPoint, Window
from stormwatch.stores.lineprotocol import (
    EVENTS,
    READINGS,
    from_ns,
    time_ns,
)
from stormwatch.stores.rows import UnreadableRows, influx_events, influx_readings
from stormwatch.stores.splitwrite import BatchRejected
from stormwatch.wire import format_time

log = logging.getLogger(__name__)

_REJECT_STATUSES = frozenset({400, 413, 422})
_RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
#: The last instant a Flux time holds (int64 nanoseconds: 2262-04-11T23:47:16.854775807Z); ``range``'s
#: stop is exclusive.
_FLUX_MAX_NS = 2**63 - 1
#: Columns of a pivoted Flux record that are not tags.
_NOT_TAGS = frozenset({"result", "table", "stormwatch_ns"})


def flux_string(text: str) -> str:
    """A Flux string literal (``\\``, ``"`` and ``${`` escaped)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("${", "\\${") + '"'


def flux_set(column: str, values: Iterable[str]) -> str:
    """Flux ``contains(value: r.column, set: ["a", "b"])`` (each value once, sorted)."""
    return f"contains(value: r[{flux_string(column)}], set: [{', '.join(flux_string(v) for v in sorted(set(values)))}])"


def _flux_range(start: datetime, end: datetime) -> str:
    """``range`` of ``start <= _time < end`` (Flux's stop is exclusive), exact to the nanosecond."""
    return f"range(start: time(v: {time_ns(start)}), stop: time(v: {time_ns(end)}))"


class Influx2Store(LineProtocolWrites):
    """A :class:`stormwatch.stores.base.ReadingStore` on InfluxDB 2.x.

    Args:
        url: ``http(s)://host:port``.
        org, bucket, token: InfluxDB 2.x organisation, bucket and API token (never logged).
        clock: stamps dead letters of refused lines.
        timeout_s, retries, backoff_s, max_backoff_s, batch_lines, sleep: as
            :class:`stormwatch.stores.influx1.Influx1Store`.
    """

    _log = log

    def __init__(
        self,
        url: str,
        *,
        org: str,
        bucket: str,
        token: str,
        clock: Clock | None = None,
        timeout_s: float = 10.0,
        retries: int = 4,
        backoff_s: float = 0.25,
        max_backoff_s: float = 10.0,
        batch_lines: int = 5000,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not (org and bucket):
            raise ValueError("InfluxDB 2.x needs org and bucket")
        self.url = url
        self.org = org
        self.bucket = bucket
        #: rows answered that cannot be read (skipped, counted, logged; stores/rows.py)
        self.unreadable = UnreadableRows(f"influx2:{bucket}")
        self.clock: Clock = clock or WallClock()
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.batch_lines = batch_lines
        self._sleep = sleep
        self._client = InfluxDBClient(url=url, token=token, org=org, timeout=int(timeout_s * 1000))
        self._write_api = self._client.write_api(write_options=SYNCHRONOUS)
        self._lock = threading.RLock()
        self.rejected_total = 0
        #: HTTP retries so far (each a retryable failure followed by a backoff).
        self.retries_total = 0

    def __repr__(self) -> str:
        return f"Influx2Store({self.url!r}, org={self.org!r}, bucket={self.bucket!r})"

    def _send(self, lines: Sequence[str]) -> None:
        def attempt() -> None:
            try:
                self._write_api.write(bucket=self.bucket, org=self.org, record="\n".join(lines),
                                      write_precision=cast(WritePrecision, WritePrecision.NS))
            except InfluxDBError as exc:
                status = getattr(exc, "status", None) or getattr(getattr(exc, "response", None), "status", None)
                if status in _REJECT_STATUSES:
                    raise BatchRejected(f"HTTP {status}: {exc.message}") from exc
                if status is not None and status not in _RETRY_STATUSES:
                    raise StoreError(f"InfluxDB {self.url} answered HTTP {status}: {exc.message}") from exc
                try:
                    wait = float(exc.retry_after) if exc.retry_after else None
                except ValueError:
                    wait = None
                raise Retryable(f"HTTP {status}: {exc.message}", wait) from exc
            except OSError as exc:  # urllib3 connection errors derive from OSError
                raise Retryable(f"{type(exc).__name__}: {exc}") from exc
            except Exception as exc:  # urllib3 MaxRetryError etc. (not OSError in every version)
                if type(exc).__module__.startswith("urllib3"):
                    raise Retryable(f"{type(exc).__name__}: {exc}") from exc
                raise

        self._retrying(attempt, self.url)

    def _target(self) -> str:
        return self.url

    def _stored(self, measurement: str, fields: tuple[str, ...], windows: Sequence[Window]) -> Iterator[StoredPoint]:
        """Flux, one query per window: the fields pivoted into columns, the time as integer ns
        (``int(v: r._time)``: the Python client would cut ``_time`` to microseconds)."""
        field_test = " or ".join(f"r._field == {flux_string(f)}" for f in fields)
        for w in windows:
            match = " and ".join("(" + " or ".join(f"r[{flux_string(tag)}] == {flux_string(v)}" for v in values) + ")"
                                 for tag, values in w.match)
            flux = (
                f"from(bucket: {flux_string(self.bucket)})"
                f" |> range(start: time(v: {w.start_ns}), stop: time(v: {w.stop_ns + 1}))"
                f" |> filter(fn: (r) => r._measurement == {flux_string(measurement)} and {match})"
                f" |> filter(fn: (r) => {field_test})"
                ' |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")'
                " |> map(fn: (r) => ({r with stormwatch_ns: int(v: r._time)}))"
            )
            try:
                tables = self._client.query_api().query(flux, org=self.org)
            except Exception as exc:
                raise StoreError(f"InfluxDB {self.url} Flux query failed: {exc}") from exc
            for table in tables:
                for rec in table.records:
                    values = rec.values
                    tags = {k: str(v) for k, v in values.items()
                            if not k.startswith("_") and k not in fields and k not in _NOT_TAGS}
                    yield StoredPoint(tags, int(values["stormwatch_ns"]), tuple(values.get(f) for f in fields))

    def _deadletter_topic(self) -> str:
        return f"influx2:{self.bucket}"

    def query_readings(
        self,
        site: str,
        start: datetime | None = None,
        end: datetime | None = None,
        *,
        device: str | None = None,
        quantity: str | None = None,
        late: bool | None = None,
    ) -> list[Reading]:
        """See :meth:`stormwatch.stores.base.ReadingStore.query_readings` (Flux ``pivot``; rows decoded by
        :func:`stormwatch.stores.rows.influx_readings`; ``late`` as
        :meth:`stormwatch.stores.influx1.Influx1Store.query_readings`).

        Raises:
            StoreError: the query failed.
        """
        start_s = format_time(start) if start else "0"
        stop_s = format_time(end) if end else "2262-04-11T00:00:00Z"
        flux = (
            f"from(bucket: {flux_string(self.bucket)})"
            f" |> range(start: {start_s}, stop: {stop_s})"
            f' |> filter(fn: (r) => r._measurement == "{READINGS}" and r.site == {flux_string(site)})'
        )
        if device is not None:
            flux += f" |> filter(fn: (r) => r.device == {flux_string(device)})"
        if quantity is not None:
            flux += f" |> filter(fn: (r) => r.quantity == {flux_string(quantity)})"
        flux += ' |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")'
        try:
            tables = self._client.query_api().query(flux, org=self.org)
        except Exception as exc:
            raise StoreError(f"InfluxDB {self.url} Flux query failed: {exc}") from exc
        rows = ((rec.values, time_ns(rec.get_time())) for table in tables for rec in table.records)
        return influx_readings(rows, late=late, unreadable=self.unreadable)

    def query_events(self, site: str, start: datetime | None = None, end: datetime | None = None) -> list[Event]:
        """Events of ``site`` with ``start <= event_time < end`` in event-time order (from the
        ``wire`` field: the full ``Event.to_wire()`` JSON, ``docs/influxdb-schema.md``), as
        :meth:`stormwatch.stores.influx1.Influx1Store.query_events` reads them: one Flux query,
        the window exact to the nanosecond (``start`` absent: the epoch; ``end`` absent: the last
        instant Flux can hold), each point's time as integer ns (``stormwatch_ns``) to order them
        (the events of each ``kind``/``rule`` come back as a table of their own).

        Raises:
            StoreError: the query failed.
        """
        start_ns = time_ns(start) if start is not None else 0
        stop_ns = time_ns(end) if end is not None else _FLUX_MAX_NS
        flux = (f"from(bucket: {flux_string(self.bucket)})"
                f" |> range(start: time(v: {start_ns}), stop: time(v: {stop_ns}))"
                f" |> filter(fn: (r) => r._measurement == {flux_string(EVENTS)} and r.site == {flux_string(site)}"
                ' and r._field == "wire")'
                " |> map(fn: (r) => ({r with stormwatch_ns: int(v: r._time)}))")
        points = sorted((int(row["stormwatch_ns"]), str(row["_value"]))
                        for row in self._flux(flux) if row.get("_value"))
        return influx_events(points, self.unreadable, site)

    # -- many sites at once (stormwatch.stores.base.OverviewStore) -------------------------------

    def _flux(self, flux: str) -> list[dict[str, Any]]:
        """Run a Flux script; every record's columns, tables in order.

        Raises:
            StoreError: the query failed.
        """
        try:
            tables = self._client.query_api().query(flux, org=self.org)
        except Exception as exc:
            raise StoreError(f"InfluxDB {self.url} Flux query failed: {exc}") from exc
        return [dict(rec.values) for table in tables for rec in table.records]

    def summarize(self, start: datetime, end: datetime, series: Sequence[tuple[str, str, str]],
                  ) -> list[SeriesSummary]:
        """See :meth:`stormwatch.stores.base.OverviewStore.summarize`: one Flux script (one request)
        over every series -- ``value``, ``tips`` and ``flags`` pivoted into one row per point, grouped
        by ``site``, ``device``, ``quantity`` (pages and units of a series together), then four
        results: ``count`` of values, ``sum`` of ``tips`` per ``tip_size`` (rain readings not flagged
        ``rain_beyond_envelope``), and the first and last point
        (``min``/``max`` of the integer ns time, so the last point's value, tips, flags and unit come
        back together), as :meth:`stormwatch.stores.influx1.Influx1Store.summarize` does in InfluxQL.

        Raises:
            StoreError: the query failed.
        """
        if not series:
            return []
        wanted = set(series)
        flux = (
            f"data = from(bucket: {flux_string(self.bucket)}) |> {_flux_range(start, end)}"
            f" |> filter(fn: (r) => r._measurement == {flux_string(READINGS)}"
            f" and {flux_set('site', (s for s, _, _ in wanted))} and {flux_set('device', (d for _, d, _ in wanted))}"
            f" and {flux_set('quantity', (q for _, _, q in wanted))})"
            ' |> filter(fn: (r) => r._field == "value" or r._field == "tips" or r._field == "flags")'
            ' |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")'
            ' |> group(columns: ["site", "device", "quantity"])'
            " |> map(fn: (r) => ({r with stormwatch_ns: int(v: r._time)}))\n"
            'data |> count(column: "value") |> yield(name: "count")\n'
            'data |> filter(fn: (r) => r.quantity == "rain_tips" and r.tips > 0'
            f' and r.flags !~ /{FLAG_BEYOND_ENVELOPE}/)'
            ' |> group(columns: ["site", "device", "quantity", "tip_size"]) |> sum(column: "tips")'
            ' |> yield(name: "tips")\n'
            'data |> min(column: "stormwatch_ns") |> yield(name: "first")\n'
            'data |> max(column: "stormwatch_ns") |> yield(name: "last")'
        )
        results: dict[str, dict[tuple[str, str, str], dict[str, Any]]] = {}
        by_size: dict[tuple[str, str, str], dict[str, int]] = {}
        for row in self._flux(flux):
            key = (str(row.get("site")), str(row.get("device")), str(row.get("quantity")))
            if key not in wanted:
                continue
            if row.get("result") == "tips":
                bucket = by_size.setdefault(key, {})
                size = str(row.get("tip_size") or "")
                bucket[size] = bucket.get(size, 0) + int(row.get("tips") or 0)
            else:
                results.setdefault(str(row.get("result")), {})[key] = row
        count, first, last = (results.get(name, {}) for name in ("count", "first", "last"))
        out = []
        for key in sorted(count.keys() & first.keys() & last.keys()):
            site, device, quantity = key
            end_row = last[key]
            is_tips = quantity == "rain_tips"
            value = end_row["tips"] if is_tips and end_row.get("tips") is not None else end_row["value"]
            flags = end_row.get("flags")
            out.append(SeriesSummary(
                site=site, device=device, quantity=quantity, unit=str(end_row.get("unit")),
                count=int(count[key]["value"]),
                total=sum(by_size.get(key, {}).values()) if is_tips else None,
                first_time=from_ns(int(first[key]["stormwatch_ns"])), last_time=from_ns(int(end_row["stormwatch_ns"])),
                last_value=int(value) if is_tips else float(value),
                last_flags=tuple(str(flags).split(",")) if flags else (),
                tips_by_size=tuple(sorted(by_size.get(key, {}).items())) if is_tips else ()))
        return out

    def _sites_flux(self, start: datetime, end: datetime, condition: str, sites: Sequence[str] | None,
                    steps: str) -> str:
        """Flux of the points of ``[start, end)`` meeting ``condition`` (of ``sites``, when given), then
        ``steps``, each row with its integer ns time (``stormwatch_ns``)."""
        where = "" if sites is None else f" and {flux_set('site', sites)}"
        return (f"from(bucket: {flux_string(self.bucket)}) |> {_flux_range(start, end)}"
                f" |> filter(fn: (r) => {condition}{where}){steps}"
                " |> map(fn: (r) => ({r with stormwatch_ns: int(v: r._time)}))")

    def query_tips(self, start: datetime, end: datetime, sites: Sequence[str] | None = None) -> list[Reading]:
        """See :meth:`stormwatch.stores.base.OverviewStore.query_tips` (one Flux query, every site).

        Raises:
            StoreError: the query failed.
        """
        if sites is not None and not sites:
            return []
        flux = self._sites_flux(start, end, f'r._measurement == "{READINGS}" and r.quantity == "rain_tips"', sites,
                                ' |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")'
                                " |> filter(fn: (r) => r.tips > 0)")
        rows = ((row, int(row["stormwatch_ns"])) for row in self._flux(flux))
        return sorted(influx_readings(rows, late=None, unreadable=self.unreadable),
                      key=lambda r: (r.site, r.time, r.seq))

    def query_site_events(self, start: datetime, end: datetime, sites: Sequence[str] | None = None,
                          ) -> list[Event]:
        """See :meth:`stormwatch.stores.base.OverviewStore.query_site_events` (one Flux query of the
        events' ``wire`` field).

        Raises:
            StoreError: the query failed.
        """
        if sites is not None and not sites:
            return []
        flux = self._sites_flux(start, end, f'r._measurement == "{EVENTS}" and r._field == "wire"', sites, "")
        points = sorted((int(row["stormwatch_ns"]), str(row["_value"]))
                        for row in self._flux(flux) if row.get("_value"))
        return influx_events(points, self.unreadable)

    def close(self) -> None:
        """Close the HTTP client (writes are synchronous: nothing is buffered)."""
        self._write_api.close()
        self._client.close()
