"""InfluxDB 1.x store over HTTP: ``POST /write?db=&rp=&precision=ns`` and InfluxQL ``/query``.

Schema: ``docs/influxdb-schema.md`` (encoder: :mod:`stormwatch.stores.lineprotocol`).

The design: docs/stores.md ("The modules", `stores/influx1.py`).
"""

from __future__ import annotations

import base64
import http.client
import json
import logging
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from email.message import Message
from email.utils import parsedate_to_datetime
from typing import Any

from stormwatch.clock import Clock, WallClock
from stormwatch.contract import Event, Reading
from stormwatch.physics import FLAG_BEYOND_ENVELOPE
from stormwatch.stores.base import SeriesSummary, StoredRow, StoreError
from stormwatch.stores.influxwrite import LineProtocolWrites, Retryable, StoredPoint, Window
from stormwatch.stores.lineprotocol import (
    DEADLETTER,
    EVENTS,
    READINGS,
    from_ns,
    time_ns,
)
from stormwatch.stores.rows import UnreadableRows, engine_order, influx_events, influx_readings, influx_series_row
from stormwatch.stores.splitwrite import BatchRejected

log = logging.getLogger(__name__)

#: HTTP statuses that mean "try again later" (500 included: InfluxDB 1.x's "engine: error syncing wal", #18).
_RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
#: HTTP statuses that mean "this content is refused" (bisect the batch).
_REJECT_STATUSES = frozenset({400, 413, 422})
#: InfluxQL statements sent in one ``/query`` request when looking up stored points.
_STATEMENTS_PER_QUERY = 100


def influxql_string(text: str) -> str:
    """An InfluxQL single-quoted string literal (``\\`` and ``'`` escaped)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def influxql_ident(text: str) -> str:
    """An InfluxQL double-quoted identifier."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _clip(q: str, limit: int = 300) -> str:
    """A query for an error message (a query naming hundreds of sites is cut)."""
    return q if len(q) <= limit else f"{q[:limit]}... ({len(q)} characters)"


def _any_of(tag: str, values: Iterable[str]) -> str:
    """InfluxQL ``("tag" = 'a' OR "tag" = 'b')`` (InfluxQL has no ``IN``)."""
    return "(" + " OR ".join(f"{influxql_ident(tag)} = {influxql_string(v)}" for v in sorted(set(values))) + ")"


def _retry_after_s(value: str | None, now: datetime) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, (parsedate_to_datetime(value) - now).total_seconds())
    except (TypeError, ValueError):
        return None


class Influx1Store(LineProtocolWrites):
    """A :class:`stormwatch.stores.base.ReadingStore` on an InfluxDB 1.x server.

    Args:
        base_url: ``http://host:port`` of the server.
        database: database name (created on first use).
        rp: retention policy to write to and read from (``None``: the database default).
        username, password: HTTP basic auth (never logged).
        clock: stamps dead letters of refused lines.
        timeout_s: per-request socket timeout (seconds).
        retries: retries of a retryable failure before :class:`StoreError`.
        backoff_s: first backoff; doubles each retry up to ``max_backoff_s`` (real seconds).
        batch_lines: maximum lines per ``/write`` request.
        sleep: real-time sleep used between retries (injectable).
    """

    _log = log

    def __init__(
        self,
        base_url: str,
        database: str,
        *,
        rp: str | None = None,
        username: str | None = None,
        password: str | None = None,
        clock: Clock | None = None,
        timeout_s: float = 10.0,
        retries: int = 4,
        backoff_s: float = 0.25,
        max_backoff_s: float = 10.0,
        batch_lines: int = 5000,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not database:
            raise ValueError("an InfluxDB database name is required")
        self.base_url = base_url.rstrip("/")
        self.database = database
        #: rows answered that cannot be read (skipped, counted, logged; stores/rows.py)
        self.unreadable = UnreadableRows(f"influx1:{database}")
        self.rp = rp
        self.clock: Clock = clock or WallClock()
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.batch_lines = batch_lines
        self._sleep = sleep
        self._auth = None
        if username is not None:
            token = base64.b64encode(f"{username}:{password or ''}".encode()).decode("ascii")
            self._auth = f"Basic {token}"
        self._lock = threading.RLock()
        parts = urllib.parse.urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"InfluxDB base URL must be http(s)://host:port, got {base_url!r}")
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 8086)
        self._connection_class = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        self._conn: http.client.HTTPConnection | None = None  # kept alive between requests
        self._db_ready = False
        #: Lines refused by the server since start (each was dead-lettered).
        self.rejected_total = 0
        #: HTTP retries so far (each a retryable failure followed by a backoff).
        self.retries_total = 0

    def __repr__(self) -> str:
        return f"Influx1Store({self.base_url!r}, {self.database!r}, rp={self.rp!r})"

    # -- HTTP ------------------------------------------------------------------------------

    def _request(self, path: str, params: dict[str, str], body: bytes | None,
                 content_type: str = "text/plain; charset=utf-8") -> bytes:
        """One HTTP request with retries.

        Raises:
            BatchRejected: 400/413/422 (content refused).
            StoreError: unreachable, still failing after retries, or another error status.
        """
        target = f"{path}?{urllib.parse.urlencode(params)}"
        headers = {"Content-Type": content_type} if body is not None else {}
        if self._auth:
            headers["Authorization"] = self._auth

        def attempt() -> bytes:
            try:
                status, reply_headers, data = self._exchange(target, body or b"", headers)
            except (OSError, http.client.HTTPException) as exc:
                raise Retryable(f"{type(exc).__name__}: {exc}") from exc
            if status < 300:
                return data
            text = data.decode("utf-8", "replace").strip()
            try:
                message = str(json.loads(text).get("error", text))
            except (ValueError, AttributeError):
                message = text
            if status in _REJECT_STATUSES:
                raise BatchRejected(f"HTTP {status}: {message}")
            if status == 404:
                self._db_ready = False  # e.g. the database was dropped: CREATE it again next time
            if status not in _RETRY_STATUSES:
                raise StoreError(f"InfluxDB {self.base_url}{path} answered HTTP {status}: {message}")
            raise Retryable(f"HTTP {status}: {message}",
                            _retry_after_s(reply_headers.get("Retry-After"), self.clock.now()))

        return self._retrying(attempt, self.base_url, max_wait_s=self.max_backoff_s * 3)

    def _exchange(self, target: str, body: bytes, headers: dict[str, str]) -> tuple[int, Message, bytes]:
        """One POST on the kept-alive connection: (status, headers, body).

        A connection the server closed while idle is replaced and the request sent once more at
        once (that is not a failure of the server); any other failure closes the connection.

        Raises:
            OSError, http.client.HTTPException: the request could not be completed.
        """
        with self._lock:
            for fresh in (self._conn is None, True):
                if self._conn is None:
                    self._conn = self._connection_class(self._host, self._port, timeout=self.timeout_s)
                try:
                    self._conn.request("POST", target, body=body, headers=headers)
                    resp = self._conn.getresponse()
                    data = resp.read()
                except (OSError, http.client.HTTPException) as exc:
                    self._conn.close()
                    self._conn = None
                    idle_close = isinstance(exc, http.client.RemoteDisconnected | BrokenPipeError |
                                            ConnectionResetError)
                    if fresh or not idle_close:
                        raise
                    continue
                if resp.will_close:
                    self._conn.close()
                    self._conn = None
                return resp.status, resp.headers, data
        raise AssertionError("unreachable")  # pragma: no cover

    def _query(self, q: str, *, with_db: bool = True) -> list[dict[str, Any]]:
        """Run InfluxQL; returns the ``series`` of every statement (chunks concatenated).

        Raises:
            StoreError: unreachable or the query failed.
        """
        return [s for statement in self._statements(q, with_db=with_db) for s in statement]

    def _statements(self, q: str, *, with_db: bool = True) -> list[list[dict[str, Any]]]:
        """Run InfluxQL (``;``-separated statements, one request); returns each statement's
        ``series`` in statement order (the chunks of one statement concatenated).

        The statements travel in the request body (a form field), so a query naming hundreds of
        sites is not limited by the length of a URL.

        Raises:
            StoreError: unreachable or the query failed.
        """
        params = {"epoch": "ns", "chunked": "true", "chunk_size": "10000"}
        if with_db:
            params["db"] = self.database
        form = urllib.parse.urlencode({"q": q}).encode("ascii")
        try:
            body = self._request("/query", params, form, "application/x-www-form-urlencoded")
        except BatchRejected as exc:
            raise StoreError(f"InfluxQL query refused: {exc.message} (query: {_clip(q)})") from exc
        by_statement: dict[int, list[dict[str, Any]]] = {}
        for chunk in body.decode("utf-8").splitlines():
            if not chunk.strip():
                continue
            data = json.loads(chunk)
            if "error" in data:
                raise StoreError(f"InfluxQL error: {data['error']} (query: {_clip(q)})")
            for result in data.get("results", []):
                if "error" in result:
                    raise StoreError(f"InfluxQL error: {result['error']} (query: {_clip(q)})")
                by_statement.setdefault(int(result.get("statement_id", 0)), []).extend(result.get("series", []))
        return [by_statement.get(i, []) for i in range(max(by_statement, default=-1) + 1)]

    def ensure_database(self) -> None:
        """``CREATE DATABASE`` (idempotent in 1.x) once per store.

        Raises:
            StoreError: the server is unreachable or refused.
        """
        if self._db_ready:
            return
        self._query(f"CREATE DATABASE {influxql_ident(self.database)}", with_db=False)
        self._db_ready = True

    def _send(self, lines: Sequence[str]) -> None:
        params = {"db": self.database, "precision": "ns"}
        if self.rp:
            params["rp"] = self.rp
        self._request("/write", params, ("\n".join(lines) + "\n").encode("utf-8"))

    # -- writes (stormwatch.stores.influxwrite.LineProtocolWrites) --------------------------------------

    def _before_write(self) -> None:
        self.ensure_database()

    def _target(self) -> str:
        return f"{self.base_url}/{self.database}"

    def _stored(self, measurement: str, fields: tuple[str, ...], windows: Sequence[Window]) -> Iterator[StoredPoint]:
        """InfluxQL: one ``SELECT <fields> ... GROUP BY *`` statement per window, at most
        :data:`_STATEMENTS_PER_QUERY` statements per request."""
        selected = ", ".join(influxql_ident(f) for f in fields)
        statements = []
        for w in windows:
            where = " AND ".join(
                "(" + " OR ".join(f"{influxql_ident(tag)} = {influxql_string(v)}" for v in values) + ")"
                for tag, values in w.match)
            statements.append(f"SELECT {selected} FROM {self._from(measurement)} WHERE {where} "
                              f"AND time >= {w.start_ns} AND time <= {w.stop_ns} GROUP BY *")
        for i in range(0, len(statements), _STATEMENTS_PER_QUERY):
            for series in self._query("; ".join(statements[i:i + _STATEMENTS_PER_QUERY])):
                tags = series.get("tags") or {}
                for values in series.get("values", []):
                    yield StoredPoint(tags, int(values[0]), tuple(values[1:]))

    def _deadletter_topic(self) -> str:
        return f"influx1:{self.database}"

    # -- ReadingStore ----------------------------------------------------------------------

    def _from(self, measurement: str) -> str:
        if self.rp:
            return f"{influxql_ident(self.rp)}.{influxql_ident(measurement)}"
        return influxql_ident(measurement)

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
        """See :meth:`stormwatch.stores.base.ReadingStore.query_readings`.

        Rows become readings in :func:`stormwatch.stores.rows.influx_readings`.

        ``late``: ``None`` all, ``False`` live only, ``True`` late only (extension).

        Raises:
            StoreError: unreachable or the query failed.
        """
        q = f"SELECT * FROM {self._from(READINGS)} WHERE \"site\" = {influxql_string(site)}"
        if start is not None:
            q += f" AND time >= {time_ns(start)}"
        if end is not None:
            q += f" AND time < {time_ns(end)}"
        if device is not None:
            q += f" AND \"device\" = {influxql_string(device)}"
        if quantity is not None:
            q += f" AND \"quantity\" = {influxql_string(quantity)}"
        self.ensure_database()
        rows = (dict(zip(s["columns"], values, strict=True)) for s in self._query(q) for values in s.get("values", []))
        return influx_readings(((row, int(row["time"])) for row in rows), late=late, unreadable=self.unreadable)

    def stored_series(self, site: str) -> list[tuple[str, str]]:
        """See :meth:`stormwatch.stores.base.SeriesStore.stored_series`: ``SHOW TAG VALUES`` of the
        ``device`` and ``quantity`` tags (from the index, no point is read).

        Raises:
            StoreError: unreachable or the query failed.
        """
        self.ensure_database()
        where = f"WHERE \"site\" = {influxql_string(site)}"
        devices = [str(v[1]) for s_ in self._query(f"SHOW TAG VALUES FROM {self._from(READINGS)} WITH KEY = "
                                                    f"\"device\" {where}") for v in s_.get("values", [])]
        out: set[tuple[str, str]] = set()
        for device in devices:
            q = (f"SHOW TAG VALUES FROM {self._from(READINGS)} WITH KEY = \"quantity\" {where} "
                 f"AND \"device\" = {influxql_string(device)}")
            out |= {(device, str(v[1])) for s_ in self._query(q) for v in s_.get("values", [])}
        return sorted(out)

    def query_series(self, site: str, series: Sequence[tuple[str, str]], start: datetime, end: datetime,
                     ) -> dict[tuple[str, str], list[StoredRow]]:
        """See :meth:`stormwatch.stores.base.SeriesStore.query_series`: one ``/query`` request of one
        InfluxQL statement per series, only the fields a rule reads (not ``raw``), decoded as
        :func:`stormwatch.stores.rows.influx_readings` decodes them.

        Raises:
            StoreError: unreachable or the query failed.
        """
        if not series:
            return {}
        statements = [
            f"SELECT \"value\", \"tips\", \"unit\", \"flags\", \"gateway\", \"boot\", \"seq\", \"tip_size\" "
            f"FROM {self._from(READINGS)} WHERE \"site\" = {influxql_string(site)} "
            f"AND \"device\" = {influxql_string(device)} AND \"quantity\" = {influxql_string(quantity)} "
            f"AND time >= {time_ns(start)} AND time < {time_ns(end)}" for device, quantity in series]
        self.ensure_database()
        body = self._request("/query", {"q": "; ".join(statements), "db": self.database, "epoch": "ns",
                                        "chunked": "true", "chunk_size": "10000"}, None)
        values: list[list[list[Any]]] = [[] for _ in series]
        for chunk in body.decode("utf-8").splitlines():
            if not chunk.strip():
                continue
            for result in json.loads(chunk).get("results", []):
                if "error" in result:
                    raise StoreError(f"InfluxQL error: {result['error']} (query: {statements[0]})")
                for s_ in result.get("series", []):
                    values[int(result.get("statement_id", 0))].extend(s_.get("values", []))
        out: dict[tuple[str, str], list[StoredRow]] = {}
        for (device, quantity), points in zip(series, values, strict=True):
            rows: list[StoredRow] = []
            for point in points:
                try:
                    rows.append(influx_series_row(point, quantity == "rain_tips"))
                except (TypeError, ValueError) as exc:
                    self.unreadable.skip("reading", {"site": site, "device": device, "quantity": quantity,
                                                     "gateway": point[5], "boot": point[6], "seq": point[7]},
                                         point[0], exc)
            rows.sort(key=engine_order)
            out[(device, quantity)] = rows
        return out

    def query_events(self, site: str, start: datetime | None = None, end: datetime | None = None) -> list[Event]:
        """Events of ``site`` with ``start <= event_time < end`` in event-time order (from the
        ``wire`` field: the full ``Event.to_wire()`` JSON, ``docs/influxdb-schema.md``).

        Raises:
            StoreError: unreachable or the query failed.
        """
        q = f"SELECT \"wire\" FROM {self._from(EVENTS)} WHERE \"site\" = {influxql_string(site)}"
        if start is not None:
            q += f" AND time >= {time_ns(start)}"
        if end is not None:
            q += f" AND time < {time_ns(end)}"
        self.ensure_database()
        return influx_events(((values[0], values[1]) for s in self._query(q) for values in s.get("values", [])
                              if values[1]), self.unreadable, site)

    def query_deadletter_count(self, reason: str | None = None) -> int:
        """How many dead letters are stored (of ``reason`` when given).

        Raises:
            StoreError: unreachable or the query failed.
        """
        q = f"SELECT COUNT(\"detail\") FROM {self._from(DEADLETTER)}"
        if reason is not None:
            q += f" WHERE \"reason\" = {influxql_string(reason)}"
        self.ensure_database()
        series = self._query(q)
        return int(series[0]["values"][0][1]) if series else 0

    # -- many sites at once (stormwatch.stores.base.OverviewStore) -------------------------------

    def database_exists(self) -> bool:
        """Whether the server holds :attr:`database` (``SHOW DATABASES``; creates nothing).

        Raises:
            StoreError: unreachable or the query failed.
        """
        found = any(values and values[0] == self.database
                    for s in self._query("SHOW DATABASES", with_db=False) for values in s.get("values", []))
        self._db_ready = self._db_ready or found  # no CREATE DATABASE before the first query
        return found

    def _window(self, start: datetime, end: datetime, sites: Iterable[str] | None) -> str:
        where = f"time >= {time_ns(start)} AND time < {time_ns(end)}"
        return where if sites is None else f"{where} AND {_any_of('site', sites)}"

    def summarize(self, start: datetime, end: datetime, series: Sequence[tuple[str, str, str]],
                  ) -> list[SeriesSummary]:
        """See :meth:`stormwatch.stores.base.OverviewStore.summarize`: one request of four InfluxQL
        statements over every series, ``GROUP BY "site", "device", "quantity"`` (pages, units and tip
        sizes of a series together): ``COUNT("value")``, ``FIRST("value")`` for the first time,
        ``LAST("value")`` with the same point's ``tips``, ``flags`` and ``unit``, and ``SUM("tips")``
        of the rain readings not flagged ``rain_beyond_envelope``, also grouped by ``tip_size`` (the
        exact tip totals per size, ``docs/influxdb-schema.md``).

        The ``WHERE`` names each site, device and quantity once (not each series), so its length
        grows with the sites, never with their product; series asked for by none are dropped.
        Two readings of one series in the same microsecond: the last is the one in the higher
        nanosecond slot (``docs/influxdb-schema.md``), not necessarily the higher ``seq``.

        Raises:
            StoreError: unreachable or the query failed.
        """
        if not series:
            return []
        wanted = set(series)
        where = (f"{self._window(start, end, (s for s, _, _ in wanted))}"
                 f" AND {_any_of('device', (d for _, d, _ in wanted))}"
                 f" AND {_any_of('quantity', (q for _, _, q in wanted))}")
        source = f"FROM {self._from(READINGS)} WHERE {where} GROUP BY \"site\", \"device\", \"quantity\""
        self.ensure_database()
        rain = (f"FROM {self._from(READINGS)} WHERE {where} AND \"quantity\" = 'rain_tips' AND \"tips\" > 0 "
                f"AND \"flags\" !~ /{FLAG_BEYOND_ENVELOPE}/ GROUP BY \"site\", \"device\", \"quantity\", \"tip_size\"")
        counts, firsts, lasts, sums = self._statements(
            f"SELECT COUNT(\"value\") {source}; SELECT FIRST(\"value\") {source}; "
            f"SELECT LAST(\"value\"), \"tips\", \"flags\", \"unit\" {source}; SELECT SUM(\"tips\") {rain}")

        def by_series(statement: list[dict[str, Any]]) -> dict[tuple[str, str, str], list[Any]]:
            out = {}
            for s in statement:
                tags = s.get("tags") or {}
                key = (str(tags.get("site")), str(tags.get("device")), str(tags.get("quantity")))
                if key in wanted and s.get("values"):
                    out[key] = s["values"][0]
            return out

        count, first, last = by_series(counts), by_series(firsts), by_series(lasts)
        by_size: dict[tuple[str, str, str], dict[str, int]] = {}
        for s_ in sums:
            tags = s_.get("tags") or {}
            key = (str(tags.get("site")), str(tags.get("device")), str(tags.get("quantity")))
            size, tips = str(tags.get("tip_size") or ""), sum(int(v[1] or 0) for v in s_.get("values", []))
            bucket = by_size.setdefault(key, {})
            bucket[size] = bucket.get(size, 0) + tips
        out = []
        for key in sorted(count.keys() & first.keys() & last.keys()):
            site, device, quantity = key
            _, n = count[key]
            t_last, value, last_tips, flags, unit = last[key]
            is_tips = quantity == "rain_tips"
            sizes = tuple(sorted(by_size.get(key, {}).items())) if is_tips else ()
            out.append(SeriesSummary(
                site=site, device=device, quantity=quantity, unit=str(unit), count=int(n),
                total=sum(t for _, t in sizes) if is_tips else None, first_time=from_ns(int(first[key][0])),
                last_time=from_ns(int(t_last)),
                last_value=int(last_tips) if is_tips and last_tips is not None else float(value),
                last_flags=tuple(str(flags).split(",")) if flags else (), tips_by_size=sizes))
        return out

    def query_tips(self, start: datetime, end: datetime, sites: Sequence[str] | None = None) -> list[Reading]:
        """See :meth:`stormwatch.stores.base.OverviewStore.query_tips` (one InfluxQL statement:
        ``"quantity" = 'rain_tips' AND "tips" > 0``, every site).

        Raises:
            StoreError: unreachable or the query failed.
        """
        if sites is not None and not sites:
            return []
        q = (f"SELECT * FROM {self._from(READINGS)} WHERE {self._window(start, end, sites)}"
             " AND \"quantity\" = 'rain_tips' AND \"tips\" > 0")
        self.ensure_database()
        rows = (dict(zip(s["columns"], values, strict=True)) for s in self._query(q) for values in s.get("values", []))
        readings = influx_readings(((row, int(row["time"])) for row in rows), late=None, unreadable=self.unreadable)
        return sorted(readings, key=lambda r: (r.site, r.time, r.seq))

    def query_site_events(self, start: datetime, end: datetime, sites: Sequence[str] | None = None,
                          ) -> list[Event]:
        """See :meth:`stormwatch.stores.base.OverviewStore.query_site_events` (one InfluxQL statement,
        events decoded from their ``wire`` field).

        Raises:
            StoreError: unreachable or the query failed.
        """
        if sites is not None and not sites:
            return []
        q = f"SELECT \"wire\" FROM {self._from(EVENTS)} WHERE {self._window(start, end, sites)}"
        self.ensure_database()
        points = sorted((int(values[0]), values[1]) for s in self._query(q) for values in s.get("values", [])
                        if values[1])
        return influx_events(points, self.unreadable)

    def close(self) -> None:
        """Close the kept-alive HTTP connection (nothing is buffered: every write is synchronous)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
