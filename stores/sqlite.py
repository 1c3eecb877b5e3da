"""Embedded SQLite store (the default sink): readings, ordinance events and dead letters.

Durability: the database runs in WAL mode with ``synchronous=FULL``, so a transaction is on disk
(WAL fsynced) when ``commit`` returns -- ingest acknowledges MQTT messages only after that
(design-notes.md, "Delivery": write to sink (committed) -> acknowledge).

Concurrency: one :class:`SqliteStore` serialises its own calls with a lock, so it may be used from
any thread of one process (ingest writes from one worker thread); other processes may read the
same file concurrently (WAL readers do not block the writer). A second writing process waits up to
``busy_timeout_s`` for the lock.

The design: docs/stores.md ("The modules", `stores/sqlite.py`).
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Generator, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from stormwatch.clock import Clock, WallClock
from stormwatch.contract import Event, Reading
from stormwatch.physics import FLAG_BEYOND_ENVELOPE
from stormwatch.stores import sqlite_reader
from stormwatch.stores.base import (
    Conflict,
    DeadLetter,
    SeriesSummary,
    SiteInfo,
    StoredRow,
    StoreError,
    WriteOutcome,
    keep_refusals,
    measurement,
)
from stormwatch.stores.lineprotocol import from_ns, time_ns
from stormwatch.wire import format_time

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2

#: A series' rows in time order with every column a backfill reads (:mod:`stormwatch.stores.sqlite_reader`):
#: SQLite answers a series' day from the index alone, never looking a row up in the table -- the
#: reading processes of a one-year report spend about a third less CPU (``benchmarks/report.py``;
#: the file is about a sixth larger). Its first four columns are the whole of :data:`_OLD_SERIES_INDEX`,
#: which it replaces.
_SERIES_INDEX = ("CREATE INDEX IF NOT EXISTS readings_series ON readings"
                 " (site, device, quantity, time_us, value, seq, unit, gateway, boot, flags, tip_size)")
#: The series index of stores written before :data:`_SERIES_INDEX` (kept where it is found).
_OLD_SERIES_INDEX = "readings_site_device_quantity_time"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS readings (
    id             INTEGER PRIMARY KEY,
    site           TEXT    NOT NULL,
    device         TEXT    NOT NULL,
    quantity       TEXT    NOT NULL,
    value                  NOT NULL,
    unit           TEXT    NOT NULL,
    time_us        INTEGER NOT NULL,
    time           TEXT    NOT NULL,
    gateway        TEXT    NOT NULL,
    boot           TEXT    NOT NULL,
    seq            INTEGER NOT NULL,
    raw            TEXT    NOT NULL,
    flags          TEXT    NOT NULL,
    late           INTEGER NOT NULL DEFAULT 0,
    received_at_us INTEGER NOT NULL,
    tip_size       TEXT,
    UNIQUE (gateway, boot, seq)
);
CREATE INDEX IF NOT EXISTS readings_site_time ON readings (site, time_us);
CREATE INDEX IF NOT EXISTS readings_tips ON readings (site, device, time_us, value)
    WHERE quantity = 'rain_tips' AND value > 0;
CREATE TABLE IF NOT EXISTS events (
    id             INTEGER PRIMARY KEY,
    site           TEXT    NOT NULL,
    kind           TEXT    NOT NULL,
    occurrence     TEXT    NOT NULL,
    rule           TEXT    NOT NULL,
    event_time_us  INTEGER NOT NULL,
    citation       TEXT    NOT NULL,
    work_order     TEXT,
    due_at_us      INTEGER,
    message        TEXT    NOT NULL,
    wire           TEXT    NOT NULL,
    written_at_us  INTEGER NOT NULL,
    UNIQUE (site, kind, occurrence)
);
CREATE INDEX IF NOT EXISTS events_site_time ON events (site, event_time_us);
CREATE TABLE IF NOT EXISTS deadletter (
    id             INTEGER PRIMARY KEY,
    reason         TEXT    NOT NULL,
    detail         TEXT    NOT NULL,
    topic          TEXT    NOT NULL,
    payload        BLOB    NOT NULL,
    received_at_us INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS deadletter_reason ON deadletter (reason, received_at_us);
CREATE TABLE IF NOT EXISTS sites (
    site           TEXT    PRIMARY KEY,
    timezone       TEXT    NOT NULL,
    jurisdiction   TEXT    NOT NULL,
    at_us          INTEGER NOT NULL
);
"""

_READING_FIELDS = ("site", "device", "quantity", "value", "unit", "time_us", "gateway", "boot", "seq", "raw", "flags",
                   "tip_size")
_READING_COLUMNS = ", ".join(_READING_FIELDS)


def _us(value: datetime) -> int:
    return time_ns(value) // 1_000


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ALL_FIELDS = set(Reading.model_fields)


def _readings(rows: list[tuple[Any, ...]]) -> list[Reading]:
    """Readings of ``SELECT {_READING_COLUMNS}`` rows.

    Every row was a validated :class:`Reading` when :meth:`SqliteStore.write_readings` stored it
    (the only way into the table), so rows are turned back into readings without validating them
    again (built as ``Reading.model_construct`` builds a model): a year of 1-minute readings of a
    site is read in seconds, not minutes (``benchmarks/report.py``). The columns are decoded exactly as
    :func:`stormwatch.stores.rows.stored_reading` would: time from integer microseconds (UTC),
    ``raw`` and ``flags`` from JSON.
    """
    out = []
    new = Reading.__new__
    setattr_ = object.__setattr__
    loads = json.loads
    for site, device, quantity, value, unit, time_us, gateway, boot, seq, raw, flags, tip_size in rows:
        # what Reading.model_construct does, without its per-call field bookkeeping (5x faster)
        r = new(Reading)
        setattr_(r, "__dict__", {
            "site": site, "device": device, "quantity": quantity, "value": value, "unit": unit,
            "time": _EPOCH + timedelta(microseconds=time_us), "gateway": gateway, "boot": boot, "seq": seq,
            "raw": None if raw == "null" else loads(raw), "flags": () if flags == "[]" else tuple(loads(flags)),
            "tip_size": tip_size})
        setattr_(r, "__pydantic_fields_set__", _ALL_FIELDS.copy())
        setattr_(r, "__pydantic_extra__", None)
        setattr_(r, "__pydantic_private__", None)
        out.append(r)
    return out


class SqliteStore:
    """A :class:`stormwatch.stores.base.ReadingStore` in one SQLite file.

    Args:
        path: database file (created with its parent directory), or ``":memory:"``.
        clock: stamps ``received_at`` / ``written_at`` (default: the wall clock).
        busy_timeout_s: how long a write waits for another process's lock.

    Raises:
        StoreError: the file cannot be opened or initialised.
    """

    #: :meth:`series_chunks` reads ahead in a second process from this many windows (days) on.
    read_ahead_from = 8

    def __init__(self, path: str | Path, clock: Clock | None = None, busy_timeout_s: float = 10.0) -> None:
        self.path = str(path)
        self.clock: Clock = clock or WallClock()
        self._lock = threading.Lock()
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, timeout=busy_timeout_s, check_same_thread=False,
                                         isolation_level=None)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=FULL")
            self._migrate()
            self._conn.executescript(_SCHEMA)
            self._series_index()
            self._conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open SQLite store {self.path}: {exc}") from exc
        self._closed = False

    def __repr__(self) -> str:
        return f"SqliteStore({self.path!r})"

    def _series_index(self) -> None:
        """Give a new store :data:`_SERIES_INDEX`; a store that has the narrower index of stormwatch before
        it (:data:`_OLD_SERIES_INDEX`) keeps that one -- the same answers, a backfill a little slower --
        since building the wider one over years of readings would hold every other process of the
        store waiting at open (docs/reports.md says how to give such a store the new index)."""
        old = self._conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?",
                                 (_OLD_SERIES_INDEX,)).fetchone()
        if old is None:
            self._conn.execute(_SERIES_INDEX)

    def _migrate(self) -> None:
        """Bring a store written by an earlier stormwatch to :data:`SCHEMA_VERSION` (module docstring)."""
        columns = {str(row[1]) for row in self._conn.execute("PRAGMA table_info(readings)")}
        if columns and "tip_size" not in columns:
            try:
                self._conn.execute("ALTER TABLE readings ADD COLUMN tip_size TEXT")
            except sqlite3.OperationalError as exc:
                if "duplicate column" not in str(exc):
                    raise
                return  # another process migrated it a moment ago
            log.warning("SQLite store %s: schema 1 -> 2, added readings.tip_size; its earlier rain readings carry no "
                        "tip size and are read with the size the site file gives for their time (each reader says "
                        "how many)", self.path)

    # -- writing ---------------------------------------------------------------------------

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """The connection inside one ``BEGIN IMMEDIATE`` transaction under the store's lock: committed
        when the block ends, rolled back when it raises.

        Raises:
            StoreError: the store is closed, or SQLite failed (nothing of the block was written).
        """
        with self._lock:
            if self._closed:
                raise StoreError(f"SQLite store {self.path} is closed")
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    yield self._conn
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite write to {self.path} failed: {exc}") from exc

    def _write(self, sql: str, rows: Sequence[tuple[Any, ...]]) -> int:
        """Run ``sql`` for ``rows`` in one committed transaction; returns rows changed."""
        if not rows:
            return 0
        with self._transaction() as conn:
            before = conn.total_changes
            conn.executemany(sql, rows)
            return conn.total_changes - before

    def write_checked(self, readings: Sequence[Reading], *, late: bool = False) -> WriteOutcome:
        """Durably insert readings, in one transaction: see
        :meth:`stormwatch.stores.base.ReadingStore.write_checked`. A reading whose identity
        ``(gateway, boot, seq)`` is already stored is not inserted; it is a duplicate when the stored
        row says the same (:func:`~stormwatch.stores.base.measurement`), else a conflict. The stored
        rows are looked up only when the insert skipped some (a batch of new readings costs nothing more).

        Raises:
            StoreError: nothing was written (the caller must not acknowledge).
        """
        if not readings:
            return WriteOutcome()
        received = _us(self.clock.now())
        rows = [
            (r.site, r.device, r.quantity, r.value, r.unit, _us(r.time), format_time(r.time), r.gateway, r.boot,
             r.seq, json.dumps(r.raw, separators=(",", ":")), json.dumps(list(r.flags)), int(late), received,
             r.tip_size)
            for r in readings
        ]
        with self._transaction() as conn:
            before = conn.total_changes
            conn.executemany(
                "INSERT OR IGNORE INTO readings (site, device, quantity, value, unit, time_us, time, gateway, "
                "boot, seq, raw, flags, late, received_at_us, tip_size) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                "?, ?, ?, ?, ?)", rows)
            new = conn.total_changes - before
            conflicts = self._conflicts(readings) if new < len(readings) else ()
        return WriteOutcome(new=new, already=len(readings) - new - len(conflicts), conflicts=conflicts)

    def _conflicts(self, readings: Sequence[Reading]) -> tuple[Conflict, ...]:
        """The readings whose identity the table holds with another measurement (inside the write's
        transaction: the rows inserted a moment ago count as stored)."""
        found: dict[tuple[str, str, int], tuple[Any, ...]] = {}
        ids = list({r.identity for r in readings})
        for i in range(0, len(ids), 300):  # 3 parameters each, well below SQLite's variable limit
            chunk = ids[i:i + 300]
            sql = ("SELECT gateway, boot, seq, site, device, quantity, unit, time_us, value FROM readings WHERE "
                   "(gateway, boot, seq) IN (VALUES " + ", ".join(["(?, ?, ?)"] * len(chunk)) + ")")
            for row in self._conn.execute(sql, [x for identity in chunk for x in identity]):
                found[(row[0], row[1], row[2])] = row[3:]
        out = []
        for r in readings:
            held = found.get(r.identity)
            if held is None:
                continue
            site, device, quantity, unit, time_us, value = held
            stored_time = _EPOCH + timedelta(microseconds=time_us)
            if measurement(r) != (site, device, quantity, unit, stored_time, value):
                out.append(Conflict(r, value, unit, stored_time))
        return tuple(out)

    def write_readings(self, readings: Sequence[Reading], *, late: bool = False) -> int:
        """Durably insert readings; duplicates (same ``(gateway, boot, seq)``, same measurement) are
        ignored, conflicts kept as ``conflicting_value`` dead letters (:func:`~stormwatch.stores.base.keep_refusals`).

        Returns:
            How many readings were new.

        Raises:
            StoreError: nothing was written (the caller must not acknowledge).
        """
        outcome = self.write_checked(readings, late=late)
        keep_refusals(self, outcome, self.clock.now())
        return outcome.new

    def supersede(self, reading: Reading) -> Reading | None:
        """See :meth:`stormwatch.stores.base.ReadingStore.supersede`: one ``UPDATE`` of the row with the
        reading's identity, site, device, quantity, unit and time (its value, ``raw``, flags and
        tip size), in one transaction with the read of the row it replaces.

        Raises:
            StoreError: the store is unavailable; nothing was changed.
        """
        where = "gateway = ? AND boot = ? AND seq = ? AND site = ? AND device = ? AND quantity = ? AND unit = ? " \
                "AND time_us = ?"
        key = (*reading.identity, reading.site, reading.device, reading.quantity, reading.unit, _us(reading.time))
        with self._transaction() as conn:
            rows = list(conn.execute(f"SELECT {_READING_COLUMNS} FROM readings WHERE {where}", key))
            if rows:
                conn.execute(
                    f"UPDATE readings SET value = ?, raw = ?, flags = ?, tip_size = ?, received_at_us = ? "
                    f"WHERE {where}", (reading.value, json.dumps(reading.raw, separators=(",", ":")),
                                       json.dumps(list(reading.flags)), reading.tip_size,
                                       _us(self.clock.now()), *key))
        return _readings(rows)[0] if rows else None

    def write_events(self, events: Sequence[Event]) -> None:
        """Upsert events on ``(site, kind, occurrence)`` (the same event twice is one row).

        Raises:
            StoreError: nothing was written.
        """
        written = _us(self.clock.now())
        rows = [
            (e.site, e.kind, e.occurrence, e.rule, _us(e.event_time), e.citation, e.work_order,
             _us(e.due_at) if e.due_at else None, e.message, json.dumps(e.to_wire(), separators=(",", ":")), written)
            for e in events
        ]
        self._write(
            "INSERT INTO events (site, kind, occurrence, rule, event_time_us, citation, work_order, due_at_us, "
            "message, wire, written_at_us) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (site, kind, occurrence) DO UPDATE SET rule=excluded.rule, "
            "event_time_us=excluded.event_time_us, citation=excluded.citation, work_order=excluded.work_order, "
            "due_at_us=excluded.due_at_us, message=excluded.message, wire=excluded.wire, "
            "written_at_us=excluded.written_at_us",
            rows,
        )

    def write_sites(self, sites: Sequence[SiteInfo], at: datetime) -> None:
        """Upsert the configured sites (one row per site id, the latest ``at`` kept).

        Raises:
            StoreError: nothing was written.
        """
        self._write(
            "INSERT INTO sites (site, timezone, jurisdiction, at_us) VALUES (?, ?, ?, ?) ON CONFLICT (site) DO "
            "UPDATE SET timezone=excluded.timezone, jurisdiction=excluded.jurisdiction, at_us=excluded.at_us",
            [(s.site, s.timezone, s.jurisdiction, _us(at)) for s in sites],
        )

    def write_deadletters(self, letters: Sequence[DeadLetter]) -> None:
        """Append dead letters.

        Raises:
            StoreError: nothing was written.
        """
        rows = [(d.reason, d.detail, d.topic, bytes(d.payload), _us(d.received_at)) for d in letters]
        self._write(
            "INSERT INTO deadletter (reason, detail, topic, payload, received_at_us) VALUES (?, ?, ?, ?, ?)", rows
        )

    # -- reading ---------------------------------------------------------------------------

    def _select(self, sql: str, params: list[object]) -> list[tuple[Any, ...]]:
        with self._lock:
            if self._closed:
                raise StoreError(f"SQLite store {self.path} is closed")
            try:
                return list(self._conn.execute(sql, params))
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite query on {self.path} failed: {exc}") from exc

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

        Args:
            late: extension of the protocol -- ``None`` all readings, ``False`` only live ones,
                ``True`` only those stored as late (retained / too old on arrival).

        Raises:
            StoreError: the query failed.
        """
        sql = f"SELECT {_READING_COLUMNS} FROM readings WHERE site = ?"
        params: list[object] = [site]
        if start is not None:
            sql += " AND time_us >= ?"
            params.append(_us(start))
        if end is not None:
            sql += " AND time_us < ?"
            params.append(_us(end))
        if device is not None:
            sql += " AND device = ?"
            params.append(device)
        if quantity is not None:
            sql += " AND quantity = ?"
            params.append(quantity)
        if late is not None:
            sql += " AND late = ?"
            params.append(int(late))
        sql += " ORDER BY time_us, seq, gateway, boot"
        return _readings(self._select(sql, params))

    def stored_series(self, site: str) -> list[tuple[str, str]]:
        """See :meth:`stormwatch.stores.base.SeriesStore.stored_series`: one index seek per device and
        per series (``(site, device, quantity, time_us)``), never a scan of the readings.

        Raises:
            StoreError: the query failed.
        """
        out: list[tuple[str, str]] = []
        device = ""
        while found := self._select("SELECT device FROM readings WHERE site = ? AND device > ? ORDER BY device LIMIT 1",
                                    [site, device]):
            device, quantity = str(found[0][0]), ""
            while more := self._select("SELECT quantity FROM readings WHERE site = ? AND device = ? AND quantity > ?"
                                       " ORDER BY quantity LIMIT 1", [site, device, quantity]):
                quantity = str(more[0][0])
                out.append((device, quantity))
        return out

    def query_series(self, site: str, series: Sequence[tuple[str, str]], start: datetime, end: datetime,
                     ) -> dict[tuple[str, str], list[StoredRow]]:
        """See :meth:`stormwatch.stores.base.SeriesStore.query_series`: one index range per series
        (:data:`_SERIES_INDEX`, answered from the index alone), rows as SQLite returns them (no model objects;
        :func:`stormwatch.stores.sqlite_reader.series_rows`).

        Raises:
            StoreError: the query failed.
        """
        with self._lock:
            if self._closed:
                raise StoreError(f"SQLite store {self.path} is closed")
            try:
                return sqlite_reader.series_rows(self._conn, site, series, _us(start), _us(end))
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite query on {self.path} failed: {exc}") from exc

    def _series_columns(self, site: str, series: Sequence[tuple[str, str]], start: datetime,
                        end: datetime) -> dict[tuple[str, str], Sequence[StoredRow]]:
        """:meth:`query_series` as :func:`~stormwatch.stores.sqlite_reader.as_series` gives it (a
        series' columns, not its tuples), read in this process."""
        with self._lock:
            if self._closed:
                raise StoreError(f"SQLite store {self.path} is closed")
            try:
                return sqlite_reader.as_series(sqlite_reader.compact_rows(self._conn, site, series, _us(start),
                                                                          _us(end)))
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite query on {self.path} failed: {exc}") from exc

    def series_chunks(self, site: str, series: Sequence[tuple[str, str]], windows: Sequence[tuple[datetime, datetime]],
                      ) -> Generator[dict[tuple[str, str], Sequence[StoredRow]], None, None]:
        """:meth:`query_series` of each window in turn -- a series' rows as its columns where it can
        (:func:`~stormwatch.stores.sqlite_reader.as_series`) --, read ahead by a second process while the caller
        works on the window before (:func:`stormwatch.stores.sqlite_reader.read_ahead`: a backfill's
        reading beside its rules) from :attr:`read_ahead_from` windows on (a shorter read is not worth
        starting a process); in this process for an in-memory database or when the reading process
        cannot start.

        Raises:
            StoreError: the store cannot be read.
        """
        if self.path == ":memory:" or len(windows) < self.read_ahead_from:
            for a, b in windows:
                yield self._series_columns(site, series, a, b)
            return
        try:
            yield from sqlite_reader.read_ahead(self.path, site, series, [(_us(a), _us(b)) for a, b in windows])
        except OSError as exc:
            log.warning("%s: cannot start the reading process (%s): reading in this process", self.path, exc)
            for a, b in windows:
                yield self._series_columns(site, series, a, b)
        except sqlite_reader.ReadAheadError as exc:
            raise StoreError(f"{self.path}: {exc}") from exc

    def late_identities(self, site: str) -> set[tuple[str, str, int]]:
        """Identities ``(gateway, boot, seq)`` of ``site``'s readings stored as late.

        Raises:
            StoreError: the query failed.
        """
        rows = self._select("SELECT gateway, boot, seq FROM readings WHERE site = ? AND late = 1", [site])
        return {(str(g), str(b), int(s)) for g, b, s in rows}

    def query_events(self, site: str, start: datetime | None = None, end: datetime | None = None) -> list[Event]:
        """Events of ``site`` with ``start <= event_time < end`` in event-time order.

        Raises:
            StoreError: the query failed.
        """
        sql = "SELECT wire FROM events WHERE site = ?"
        params: list[object] = [site]
        if start is not None:
            sql += " AND event_time_us >= ?"
            params.append(_us(start))
        if end is not None:
            sql += " AND event_time_us < ?"
            params.append(_us(end))
        sql += " ORDER BY event_time_us, id"
        return [Event.model_validate(json.loads(str(w))) for (w,) in self._select(sql, params)]

    def query_deadletters(self, reason: str | None = None) -> list[DeadLetter]:
        """Stored dead letters (optionally of one ``reason``) in arrival order.

        Raises:
            StoreError: the query failed.
        """
        sql = "SELECT reason, detail, topic, payload, received_at_us FROM deadletter"
        params: list[object] = []
        if reason is not None:
            sql += " WHERE reason = ?"
            params.append(reason)
        sql += " ORDER BY id"
        return [
            DeadLetter(reason=str(r), detail=str(d), topic=str(t), payload=bytes(p),
                       received_at=from_ns(int(us) * 1_000))
            for r, d, t, p, us in self._select(sql, params)
        ]

    # -- many sites at once (stormwatch.stores.base.OverviewStore) -------------------------------

    @staticmethod
    def _window(start: datetime, end: datetime, sites: Sequence[str] | None, column: str = "time_us",
                ) -> tuple[str, list[object]]:
        """``WHERE`` text and parameters of ``start <= column < end`` (and ``site IN sites``)."""
        params: list[object] = [_us(start), _us(end)]
        where = f"WHERE {column} >= ? AND {column} < ?"
        if sites is not None:
            params.extend(sites)
            where += f" AND site IN ({','.join('?' * len(sites))})"
        return where, params

    def stored_span(self, site: str, series: Sequence[tuple[str, str]], start: datetime, end: datetime,
                    ) -> tuple[datetime, datetime] | None:
        """The first and the last event time (UTC) of ``site``'s readings of ``series`` (``(device,
        quantity)`` pairs) in ``[start, end)``, or ``None`` when there are none: two seeks per series
        in the ``(site, device, quantity, time_us)`` index (:meth:`summarize` also counts every
        reading: a year of a site's 1-minute data was 0.4 s of a report's start).

        Raises:
            StoreError: the query failed.
        """
        a, b = _us(start), _us(end)
        first: int | None = None
        last: int | None = None
        cond = "FROM readings WHERE site = ? AND device = ? AND quantity = ? AND time_us >= ? AND time_us < ?"
        for device, quantity in series:
            key = [site, device, quantity, a, b]
            ((lo, hi),) = self._select(f"SELECT (SELECT MIN(time_us) {cond}), (SELECT MAX(time_us) {cond})", key + key)
            if lo is not None and hi is not None:
                first = int(lo) if first is None else min(first, int(lo))
                last = int(hi) if last is None else max(last, int(hi))
        if first is None or last is None:
            return None
        return from_ns(first * 1_000), from_ns(last * 1_000)

    def summarize(self, start: datetime, end: datetime, series: Sequence[tuple[str, str, str]],
                  ) -> list[SeriesSummary]:
        """See :meth:`stormwatch.stores.base.OverviewStore.summarize`: one statement, index seeks per series.

        Per series the count and first time come from the ``(site, device, quantity, time_us)``
        index alone, the last reading from one seek, and a ``rain_tips`` total per tip size from the
        partial index of readings with tips (``readings_tips``; readings flagged
        ``rain_beyond_envelope`` are not rain and not counted), so the cost grows with the number
        of series and readings in the window, never with a table scan.

        Raises:
            StoreError: the query failed.
        """
        if not series:
            return []
        a, b = _us(start), _us(end)
        rows = self._select(
            "WITH s(site, device, quantity) AS (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'),"
            " json_extract(value, '$[2]') FROM json_each(?)),"
            " k AS (SELECT s.site, s.device, s.quantity,"
            "  (SELECT COUNT(*) FROM readings r WHERE r.site = s.site AND r.device = s.device"
            "   AND r.quantity = s.quantity AND r.time_us >= ? AND r.time_us < ?) AS n,"
            "  (SELECT MIN(r.time_us) FROM readings r WHERE r.site = s.site AND r.device = s.device"
            "   AND r.quantity = s.quantity AND r.time_us >= ? AND r.time_us < ?) AS first_us,"
            "  (SELECT r.id FROM readings r WHERE r.site = s.site AND r.device = s.device"
            "   AND r.quantity = s.quantity AND r.time_us >= ? AND r.time_us < ? ORDER BY r.time_us DESC, r.seq DESC"
            "   LIMIT 1) AS last_id,"
            "  CASE WHEN s.quantity = 'rain_tips' THEN (SELECT json_group_array(json_array(z, t)) FROM"
            "   (SELECT COALESCE(r.tip_size, '') AS z, TOTAL(r.value) AS t FROM readings r"
            "    WHERE r.site = s.site AND r.device = s.device AND r.quantity = 'rain_tips' AND r.value > 0"
            "    AND r.time_us >= ? AND r.time_us < ? AND instr(r.flags, ?) = 0 GROUP BY z ORDER BY z)) END AS tips"
            " FROM s)"
            " SELECT k.site, k.device, k.quantity, l.unit, k.n, k.tips, k.first_us, l.time_us, l.value, l.flags"
            " FROM k JOIN readings l ON l.id = k.last_id ORDER BY k.site, k.device, k.quantity",
            [json.dumps([list(x) for x in series]), a, b, a, b, a, b, a, b, json.dumps(FLAG_BEYOND_ENVELOPE)])
        out = []
        for s_, d, q, u, n, tips, t0, t1, value, flags in rows:
            by_size = tuple((str(z), int(t)) for z, t in json.loads(tips)) if tips is not None else ()
            out.append(SeriesSummary(site=s_, device=d, quantity=q, unit=u, count=int(n),
                                     total=sum(t for _, t in by_size) if q == "rain_tips" else None,
                                     first_time=from_ns(int(t0) * 1_000), last_time=from_ns(int(t1) * 1_000),
                                     last_value=value, last_flags=tuple(json.loads(str(flags))),
                                     tips_by_size=by_size))
        return out

    def query_tips(self, start: datetime, end: datetime, sites: Sequence[str] | None = None) -> list[Reading]:
        """See :meth:`stormwatch.stores.base.OverviewStore.query_tips`.

        Raises:
            StoreError: the query failed.
        """
        if sites is not None and not sites:
            return []
        where, params = self._window(start, end, sites)
        rows = self._select(
            f"SELECT {_READING_COLUMNS} FROM readings {where} AND quantity = 'rain_tips' AND value > 0"
            " ORDER BY site, time_us, seq", params)
        return _readings(rows)

    def query_site_events(self, start: datetime, end: datetime, sites: Sequence[str] | None = None,
                          ) -> list[Event]:
        """See :meth:`stormwatch.stores.base.OverviewStore.query_site_events`.

        Raises:
            StoreError: the query failed.
        """
        if sites is not None and not sites:
            return []
        where, params = self._window(start, end, sites, "event_time_us")
        sql = f"SELECT wire FROM events {where} ORDER BY event_time_us, id"
        return [Event.model_validate(json.loads(str(w))) for (w,) in self._select(sql, params)]

    def count_readings(self, site: str | None = None) -> int:
        """Number of stored readings (of ``site`` when given)."""
        if site is None:
            rows = self._select("SELECT COUNT(*) FROM readings", [])
        else:
            rows = self._select("SELECT COUNT(*) FROM readings WHERE site = ?", [site])
        return int(rows[0][0])

    def close(self) -> None:
        """Close the connection (every write is already committed). Idempotent."""
        with self._lock:
            if not self._closed:
                self._closed = True
                try:
                    self._conn.close()
                except sqlite3.Error as exc:
                    log.warning("closing SQLite store %s: %s", self.path, exc)

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def recorded_sites(path: Path) -> list[str]:
    """The configured site ids a SQLite store file ``path`` records (table ``sites``, written by
    :meth:`SqliteStore.write_sites`), sorted; ``[]`` when the file does not exist or has no such
    table. Read only: the file is never created or changed.

    Raises:
        sqlite3.Error: the file exists but cannot be read as a database.
    """
    if not path.is_file():
        return []
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sites'").fetchone() is None:
            return []
        return sorted(str(row[0]) for row in db.execute("SELECT site FROM sites"))
    finally:
        db.close()
