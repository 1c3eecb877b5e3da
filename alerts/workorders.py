"""Inspection work orders, persisted in SQLite (the alert service's state file).

One order per (site, rule, occurrence), opened by the events the rule modules declare
(:func:`opening_kinds`), due as their rule says; its status moves open -> acknowledged -> completed,
every change kept as history; overdue is a flag of its own.

The design: docs/alerts.md ("The modules", `alerts/workorders.py`).
"""

from __future__ import annotations

import builtins
import hashlib
import json
import logging
import sqlite3
import threading
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from stormwatch.alerts.business_days import report_deadline
from stormwatch.alerts.rules.registry import rule_kinds
from stormwatch.alerts.rules.report import ReportRule
from stormwatch.alerts.servicestate import STATE_BUSY_TIMEOUT_MS
from stormwatch.clock import Clock, ScenarioClock, WallClock
from stormwatch.contract import Event, check_person_name
from stormwatch.display import local_time
from stormwatch.errors import InputError
from stormwatch.wire import format_time

log = logging.getLogger(__name__)

Status = Literal["open", "acknowledged", "completed"]

#: The statuses, in lifecycle order.
STATUSES: tuple[Status, ...] = ("open", "acknowledged", "completed")

#: Who the history names for changes made by the alert service itself.
ENGINE = "alert engine"

def opening_kinds() -> dict[str, str]:
    """event kind → work-order kind, for the events that open an order (declared by the rule
    modules: :meth:`stormwatch.alerts.rules.registry.Registry.opening_kinds`)."""
    return rule_kinds().opening_kinds()


def closing_kinds() -> dict[str, str]:
    """event kind → work-order kind, for the events that complete an order (declared by the rule
    modules with ``EventKindSpec(closes=...)``: a recorded sample completes its reminder)."""
    return rule_kinds().closing_kinds()


def inspection_kinds() -> tuple[str, ...]:
    """Order kinds that are inspections (their completion is "an inspection" for reports and cadence)."""
    return rule_kinds().inspection_orders()

#: Schema version written to ``PRAGMA user_version`` (1: before history; 2: history, overdue flag, clock;
#: 3: photos kept with an order).
SCHEMA_VERSION = 3

#: A simulated engine clock whose last record is more than this many real seconds behind its
#: formula is taken as stopped (crashed without recording its stop).
LIVE_LAG_REAL_S = 10.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS work_orders (
    id TEXT PRIMARY KEY,
    site TEXT NOT NULL,
    kind TEXT NOT NULL,
    rule TEXT NOT NULL,
    citation TEXT NOT NULL,
    occurrence TEXT NOT NULL,
    event_time TEXT NOT NULL,
    opened_at TEXT NOT NULL,
    due_at TEXT,
    status TEXT NOT NULL,
    message TEXT NOT NULL DEFAULT '',
    evidence TEXT NOT NULL DEFAULT '[]',
    inspector TEXT,
    notes TEXT,
    acknowledged_at TEXT,
    acknowledged_by TEXT,
    completed_at TEXT,
    report_json TEXT,
    parent TEXT,
    overdue_at TEXT,
    timezone TEXT,
    UNIQUE (site, rule, occurrence)
);
CREATE INDEX IF NOT EXISTS work_orders_site ON work_orders (site, rule, completed_at);
CREATE TABLE IF NOT EXISTS work_order_history (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    order_id TEXT NOT NULL REFERENCES work_orders (id),
    at TEXT NOT NULL,
    by TEXT NOT NULL,
    action TEXT NOT NULL,
    status TEXT NOT NULL,
    notes TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS work_order_history_order ON work_order_history (order_id, seq);
CREATE TABLE IF NOT EXISTS engine_clock (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS work_order_photos (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    order_id TEXT NOT NULL REFERENCES work_orders (id),
    at TEXT NOT NULL,
    by TEXT NOT NULL,
    filename TEXT NOT NULL,
    content_type TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    data BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS work_order_photos_order ON work_order_photos (order_id, seq);
"""

_COLUMNS = ("id, site, kind, rule, citation, occurrence, event_time, opened_at, due_at, status, message, evidence, "
            "inspector, notes, acknowledged_at, acknowledged_by, completed_at, parent, overdue_at, timezone")

#: Schema 1 → 2 (run inside one transaction; see the module docstring).
_MIGRATE_1_TO_2 = """
ALTER TABLE work_orders ADD COLUMN overdue_at TEXT;
ALTER TABLE work_orders ADD COLUMN timezone TEXT;
UPDATE work_orders SET overdue_at = due_at WHERE status = 'overdue';
UPDATE work_orders SET status = CASE WHEN completed_at IS NOT NULL THEN 'completed'
                                     WHEN acknowledged_at IS NOT NULL THEN 'acknowledged'
                                     ELSE 'open' END
 WHERE status NOT IN ('open', 'acknowledged', 'completed');
INSERT INTO work_order_history (order_id, at, by, action, status, notes)
SELECT id, at, by, action, status, notes FROM (
    SELECT id, opened_at AS at, 'alert engine' AS by, 'opened' AS action, 'open' AS status,
           'reconstructed from a state file written before history was kept' AS notes, 0 AS step
      FROM work_orders
    UNION ALL
    SELECT id, acknowledged_at, COALESCE(acknowledged_by, 'unknown'), 'acknowledged', 'acknowledged',
           'reconstructed: only the last acknowledgement was kept', 1
      FROM work_orders WHERE acknowledged_at IS NOT NULL
    UNION ALL
    SELECT id, overdue_at, 'alert engine', 'overdue',
           CASE WHEN acknowledged_at IS NOT NULL AND acknowledged_at <= overdue_at THEN 'acknowledged' ELSE 'open' END,
           'reconstructed: due ' || due_at || ' passed', 2
      FROM work_orders WHERE overdue_at IS NOT NULL
    UNION ALL
    SELECT id, completed_at, COALESCE(inspector, 'unknown'), 'completed', 'completed', COALESCE(notes, ''), 3
      FROM work_orders WHERE completed_at IS NOT NULL
) ORDER BY at, step, id;
"""


class WorkOrderError(InputError):
    """Unknown work order, a change the lifecycle does not allow, or an unusable state file."""


@dataclass(frozen=True)
class WorkOrder:
    """One work order. Times are UTC; ``evidence`` is the opening event's evidence.

    Attributes:
        status: ``open``, ``acknowledged`` or ``completed``.
        overdue_at: when the alert service found the order past ``due_at`` (``None``: not yet).
        acknowledged_at, acknowledged_by: the first acknowledgement (later ones are in the history).
        inspector, notes, completed_at: who completed it, the completion note, when.
        timezone: the site's IANA zone (for showing local times; ``None`` in migrated orders).
    """

    id: str
    site: str
    kind: str
    rule: str
    citation: str
    occurrence: str
    event_time: datetime
    opened_at: datetime
    due_at: datetime | None
    status: Status
    message: str
    evidence: list[dict[str, Any]]
    inspector: str | None
    notes: str | None
    acknowledged_at: datetime | None
    acknowledged_by: str | None
    completed_at: datetime | None
    parent: str | None
    overdue_at: datetime | None = None
    timezone: str | None = None

    def is_overdue(self, now: datetime) -> bool:
        """Not completed and past its due time at ``now``."""
        return self.status != "completed" and self.due_at is not None and now > self.due_at

    @property
    def late_by(self) -> timedelta | None:
        """How long after its due time it was completed; ``None`` when not completed, or in time."""
        if self.completed_at is None or self.due_at is None or self.completed_at <= self.due_at:
            return None
        return self.completed_at - self.due_at

    def to_json(self, now: datetime | None = None) -> dict[str, Any]:
        """JSON-ready dict (times RFC 3339 UTC); with ``now``, also ``overdue`` as of ``now``."""
        out: dict[str, Any] = {}
        for key, value in self.__dict__.items():
            out[key] = format_time(value) if isinstance(value, datetime) else value
        if now is not None:
            out["overdue"] = self.is_overdue(now)
        return out


@dataclass(frozen=True)
class Photo:
    """A photo kept with an order (evidence of the inspection): ``seq`` is its number in the book.

    ``data`` is the file as uploaded (``content_type`` checked by the caller, e.g. ``image/jpeg``).
    """

    seq: int
    order_id: str
    at: datetime
    by: str
    filename: str
    content_type: str
    sha256: str
    size: int
    data: bytes = b""


@dataclass(frozen=True)
class Change:
    """One entry of an order's history: ``by`` did ``action`` at ``at``; the status after it."""

    at: datetime
    by: str
    action: str
    status: Status
    notes: str

    def to_json(self) -> dict[str, Any]:
        return {"at": format_time(self.at), "by": self.by, "action": self.action, "status": self.status,
                "notes": self.notes}


class _Frozen:
    """A clock stopped at ``t`` (a simulation that has ended)."""

    def __init__(self, t: datetime) -> None:
        self.t = t

    def now(self) -> datetime:
        return self.t

    def sleep(self, seconds: float) -> None:
        return None

    async def asleep(self, seconds: float) -> None:
        return None


@dataclass(frozen=True)
class EngineClock:
    """The clock of the alert service that writes a state file, as it recorded it.

    Attributes:
        kind: ``wall`` or ``simulated``.
        last_now: the service's clock time when it last recorded it.
        stopped: the service recorded a normal stop.
        scenario: the simulated clock's parameters (``None`` for other simulated clocks).
        run_start: a simulated run's first instant (a scenario's or a lockstep run's start; ``None``:
            not recorded): no device had a poll grid before it.
    """

    kind: Literal["wall", "simulated"]
    last_now: datetime
    stopped: bool
    scenario: ScenarioClock | None = None
    run_start: datetime | None = None

    def reader_clock(self, wall_time: bool = False) -> tuple[Clock, str]:
        """The clock a reader of the state should use, and a few words saying which it is.

        The wall clock for a wall-clock service (or when ``wall_time``); for a simulated one that
        is still running, its simulated clock; otherwise the simulated time it had reached.
        """
        if wall_time or self.kind == "wall":
            return WallClock(), "wall-clock time"
        sc = self.scenario
        if sc is not None and not self.stopped and \
                (sc.now() - self.last_now).total_seconds() <= LIVE_LAG_REAL_S * sc.speed:
            return sc, "simulated time of the running alert engine"
        return _Frozen(self.last_now), REACHED


#: What a reader's clock is after a simulated run ended (a kept demo state): the time its engine
#: reached, a few minutes past the data's last reading -- silence is then judged at the data's end.
REACHED = "simulated time the alert engine reached"


def order_id(site: str, rule: str, occurrence: str) -> str:
    """Stable id of the order for ``(site, rule, occurrence)``: ``WO-`` + 10 hex digits."""
    return "WO-" + hashlib.sha256(f"{site}\x00{rule}\x00{occurrence}".encode()).hexdigest()[:10]


def _ts(value: datetime) -> str:
    """Fixed-width UTC text, so SQL string order is time order."""
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def _t(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def _text(value: datetime | None, timezone: str | None) -> str:
    """A time in a message a person reads (a refusal, a history note, a report's reason): local to
    the order's site, with the year (:func:`stormwatch.display.local_time`; UTC for an order from
    before orders kept their zone), ``-`` for none. The order's fields themselves stay UTC."""
    return local_time(value, timezone or "UTC")


def _statements(script: str) -> list[str]:
    """The SQL statements of ``script`` (run one by one: ``executescript`` would commit a transaction)."""
    return [s.strip() for s in script.split(";\n") if s.strip()]


def _need_name(value: str, what: str) -> str:
    """A person's name as history records it (:func:`stormwatch.contract.check_person_name`: one
    line, no control characters, at most 64 characters).

    Raises:
        WorkOrderError: ``what`` named, and what is wrong.
    """
    try:
        return check_person_name(value, what)
    except ValueError as exc:
        raise WorkOrderError(str(exc)) from None


def _need_text(value: str, what: str) -> str:
    text = value.strip()
    if not text:
        raise WorkOrderError(f"{what} must not be empty")
    return text


class WorkOrders:
    """The work-order book of one alert service (thread-safe; one SQLite file).

    Args:
        path: SQLite file (created if absent; its directory must exist).
        clock: stamps ``opened_at``, acknowledgements and completions; checks overdue.

    Raises:
        WorkOrderError: ``path`` is not a work-order SQLite database, was written by a newer
            stormwatch, or its directory does not exist.
    """

    def __init__(self, path: str | Path, clock: Clock) -> None:
        self.path = Path(path)
        self.clock = clock
        if not self.path.parent.is_dir():
            raise WorkOrderError(f"{self.path}: directory {self.path.parent} does not exist")
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
        # last_completed's answers, valid while the book is as it was when they were read
        self._completed: dict[tuple[str, tuple[str, ...]], datetime | None] = {}
        self._completed_at: tuple[int, int] = (-1, -1)
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA busy_timeout={STATE_BUSY_TIMEOUT_MS}")
            self._open_schema()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise WorkOrderError(f"{self.path}: not a work-order state file (SQLite): {exc}") from exc
        except WorkOrderError:
            self._db.close()
            raise

    def _open_schema(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise WorkOrderError(f"{self.path}: written by a newer stormwatch (state schema {version}; "
                                 f"this version reads up to {SCHEMA_VERSION})")
        if version == SCHEMA_VERSION:
            return
        tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if tables and "work_orders" not in tables:
            raise WorkOrderError(f"{self.path}: an SQLite database but not a work-order state file "
                                 f"(tables: {', '.join(sorted(tables))})")
        old = "work_orders" in tables and version < 2
        self._db.execute("BEGIN IMMEDIATE")
        try:
            if self._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
                self._db.execute("COMMIT")  # another process created or migrated it meanwhile
                return
            for stmt in _statements(_SCHEMA):  # CREATE ... IF NOT EXISTS: leaves older tables as they are
                self._db.execute(stmt)
            if old:  # schema 1: add the new columns, clear 'overdue' as a status, rebuild the history
                for stmt in _statements(_MIGRATE_1_TO_2):
                    self._db.execute(stmt)
            self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        if old:
            log.info("%s: work-order state migrated to schema %d (status without 'overdue', history kept)",
                     self.path, SCHEMA_VERSION)

    # -- records (stormwatch archive / import-archive) -------------------------------------

    def export_records(self, site: str, start: datetime, end: datetime) -> builtins.list[dict[str, Any]]:
        """Every stored column of the site's orders whose opening event is in ``[start, end)``, and of
        the orders they opened (inspection reports), each with ``history`` and ``photos`` (rows as
        stored; a photo's ``data`` as bytes): the lossless form of :meth:`import_records`."""
        with self._lock:
            cur = self._db.execute("SELECT * FROM work_orders WHERE site = ? AND event_time >= ? AND event_time < ?"
                                   " ORDER BY event_time, id", (site, _ts(start), _ts(end)))
            names = [d[0] for d in cur.description]
            rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
            ids = {r["id"] for r in rows}
            children = self._db.execute(f"SELECT * FROM work_orders WHERE parent IN ({','.join('?' * len(ids))})"
                                        " ORDER BY event_time, id", sorted(ids)).fetchall() if ids else []
            rows += [dict(zip(names, r, strict=True)) for r in children if r[0] not in ids]
            for row in rows:
                for table, key in (("work_order_history", "history"), ("work_order_photos", "photos")):
                    cur = self._db.execute(f"SELECT * FROM {table} WHERE order_id = ? ORDER BY seq", (row["id"],))
                    cols = [d[0] for d in cur.description]
                    row[key] = [{k: v for k, v in zip(cols, r, strict=True) if k not in ("seq", "order_id")}
                                for r in cur.fetchall()]
        return rows

    def import_records(self, records: builtins.list[dict[str, Any]]) -> tuple[int, int]:
        """Add orders exported by :meth:`export_records` (with their history and photos, as they
        were); an order whose id is already in this book is left as it is. Returns ``(added,
        already present)``.

        Raises:
            WorkOrderError: a record lacks a column this book requires.
        """
        added = present = 0
        with self._lock:
            columns = [r[1] for r in self._db.execute("PRAGMA table_info(work_orders)")]
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for rec in records:
                    row = {k: rec[k] for k in columns if k in rec}
                    cur = self._db.execute(
                        f"INSERT OR IGNORE INTO work_orders ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                        list(row.values()))
                    if cur.rowcount != 1:
                        present += 1
                        continue
                    added += 1
                    for table, key in (("work_order_history", "history"), ("work_order_photos", "photos")):
                        for item in rec.get(key, []):
                            cols = ["order_id", *item]
                            self._db.execute(f"INSERT INTO {table} ({', '.join(cols)}) VALUES "
                                             f"({', '.join('?' * len(cols))})", [rec["id"], *item.values()])
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                self._db.execute("ROLLBACK")
                raise WorkOrderError(f"{self.path}: cannot import work orders: {exc}") from exc
        return added, present

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- reading ---------------------------------------------------------------------------

    def _row(self, row: sqlite3.Row | tuple[Any, ...]) -> WorkOrder:
        (oid, site, kind, rule, citation, occurrence, event_time, opened_at, due_at, status, message, evidence,
         inspector, notes, ack_at, ack_by, completed_at, parent, overdue_at, timezone) = row
        return WorkOrder(
            id=oid, site=site, kind=kind, rule=rule, citation=citation, occurrence=occurrence,
            event_time=_t(event_time), opened_at=_t(opened_at), due_at=_t(due_at), status=status,  # type: ignore[arg-type]
            message=message, evidence=json.loads(evidence), inspector=inspector, notes=notes,
            acknowledged_at=_t(ack_at), acknowledged_by=ack_by, completed_at=_t(completed_at), parent=parent,
            overdue_at=_t(overdue_at), timezone=timezone,
        )

    def get(self, oid: str) -> WorkOrder:
        """The order ``oid``.

        Raises:
            WorkOrderError: no such order.
        """
        with self._lock:
            row = self._db.execute(f"SELECT {_COLUMNS} FROM work_orders WHERE id = ?", (oid,)).fetchone()
        if row is None:
            raise WorkOrderError(f"no work order {oid!r} in {self.path}")
        return self._row(row)

    def find(self, site: str, rule: str, occurrence: str) -> WorkOrder | None:
        """The order of ``(site, rule, occurrence)``, if one was opened."""
        with self._lock:
            row = self._db.execute(f"SELECT {_COLUMNS} FROM work_orders WHERE site = ? AND rule = ? AND occurrence = ?",
                                   (site, rule, occurrence)).fetchone()
        return None if row is None else self._row(row)

    def list(self, site: str | None = None, status: str | None = None, *,
             overdue_at: datetime | None = None) -> list[WorkOrder]:
        """Orders, oldest event first.

        Args:
            site: only this site's.
            status: only orders with this status (one of :data:`STATUSES`).
            overdue_at: only orders overdue at this time (:meth:`WorkOrder.is_overdue`).

        Raises:
            WorkOrderError: an unknown status.
        """
        sql, args = f"SELECT {_COLUMNS} FROM work_orders WHERE 1=1", []
        if site is not None:
            sql += " AND site = ?"
            args.append(site)
        if status is not None:
            if status not in STATUSES:
                raise WorkOrderError(f"unknown status {status!r}: one of {', '.join(STATUSES)}")
            sql += " AND status = ?"
            args.append(status)
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY event_time, id", args).fetchall()
        orders = [self._row(r) for r in rows]
        return orders if overdue_at is None else [o for o in orders if o.is_overdue(overdue_at)]

    def current(self, sites: Collection[str] | None = None, *,
                completed_since: datetime | None = None) -> builtins.list[WorkOrder]:
        """The orders not completed yet (open or acknowledged) and, with ``completed_since``, those
        completed at or after it; oldest event first. What a page or a notifier scan needs from a
        book that keeps every order of years: read through the ``(site, rule, completed_at)`` index
        -- each site's rules found by index seeks, then each rule's orders without a completion and
        completed since the time -- so the cost grows with the orders returned, not the orders kept
        (``benchmarks/web.py``).

        Args:
            sites: only these sites' orders (``None``: every site in the book).
            completed_since: also the orders completed at or after this time (``None``: none completed).
        """
        if sites is not None and not sites:
            return []
        cols = ", ".join(f"w.{c.strip()}" for c in _COLUMNS.split(","))
        wanted = ("SELECT DISTINCT value FROM json_each(?)" if sites is not None else
                  "SELECT MIN(site) FROM work_orders UNION ALL SELECT (SELECT MIN(site) FROM work_orders"
                  " WHERE site > wanted.site) FROM wanted WHERE site IS NOT NULL")
        sql = (f"WITH RECURSIVE wanted(site) AS ({wanted}),"
               " keys(site, rule) AS (SELECT site, (SELECT MIN(rule) FROM work_orders WHERE site = wanted.site)"
               " FROM wanted WHERE site IS NOT NULL"
               " UNION ALL SELECT site, (SELECT MIN(rule) FROM work_orders WHERE site = keys.site AND rule > keys.rule)"
               " FROM keys WHERE rule IS NOT NULL)"
               f" SELECT {cols} FROM keys JOIN work_orders w ON w.site = keys.site AND w.rule = keys.rule"
               " WHERE keys.rule IS NOT NULL AND w.completed_at IS NULL")
        args: builtins.list[Any] = [json.dumps(sorted(set(sites)))] if sites is not None else []
        if completed_since is not None:
            sql += (f" UNION ALL SELECT {cols} FROM keys JOIN work_orders w ON w.site = keys.site AND"
                    " w.rule = keys.rule WHERE keys.rule IS NOT NULL AND w.completed_at >= ?")
            args.append(_ts(completed_since))
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY 7, 1", args).fetchall()  # event_time, id
        return [self._row(r) for r in rows]

    def history(self, oid: str) -> builtins.list[Change]:
        """Every change of order ``oid``, oldest first.

        Raises:
            WorkOrderError: no such order.
        """
        self.get(oid)
        with self._lock:
            rows = self._db.execute("SELECT at, by, action, status, notes FROM work_order_history"
                                    " WHERE order_id = ? ORDER BY seq", (oid,)).fetchall()
        return [Change(at=_t(at), by=by, action=action, status=status, notes=notes)  # type: ignore[arg-type]
                for at, by, action, status, notes in rows]

    def last_completed(self, site: str, kinds: tuple[str, ...]) -> datetime | None:
        """Completion time of the site's latest completed order of one of ``kinds``.

        Asked at every watermark move of every site: the answer is kept until the file changes --
        a write of this book (``total_changes``) or a commit of any other connection, such as the
        web desk's (``PRAGMA data_version``), which SQLite counts for exactly this.
        """
        key = (site, kinds)
        with self._lock:
            book = (self._db.execute("PRAGMA data_version").fetchone()[0], self._db.total_changes)
            if book != self._completed_at:
                self._completed.clear()
                self._completed_at = book
            elif key in self._completed:
                return self._completed[key]
            marks = ",".join("?" * len(kinds))
            row = self._db.execute(
                f"SELECT MAX(completed_at) FROM work_orders WHERE site = ? AND kind IN ({marks})",
                (site, *kinds)).fetchone()
            done = _t(row[0]) if row and row[0] else None
            self._completed[key] = done
        return done

    def latest_period(self, site: str, rule: str) -> tuple[datetime, datetime] | None:
        """``(event_time, due_at)`` of the site's latest order of ``rule`` (the routine cadence's anchor)."""
        with self._lock:
            row = self._db.execute(
                "SELECT event_time, due_at FROM work_orders WHERE site = ? AND rule = ? AND due_at IS NOT NULL"
                " ORDER BY event_time DESC LIMIT 1", (site, rule)).fetchone()
        if row is None:
            return None
        start, due = _t(row[0]), _t(row[1])
        assert start is not None and due is not None
        return start, due

    def watermark(self) -> datetime | None:
        """The newest watermark the alert service recorded for any site in this state file
        (:mod:`stormwatch.alerts.servicestate`: every reading before it has arrived or is late), or
        ``None`` (none recorded, or no service wrote this file)."""
        with self._lock:
            try:
                rows = self._db.execute("SELECT watermark FROM engine_progress").fetchall()
            except sqlite3.OperationalError:  # no such table: no alert service wrote here yet
                return None
        return max((datetime.fromisoformat(w.replace("Z", "+00:00")) for (w,) in rows), default=None)

    def engine_clock(self) -> EngineClock | None:
        """The clock the alert service recorded (:meth:`record_clock`), or ``None`` if none did."""
        with self._lock:
            doc = dict(self._db.execute("SELECT key, value FROM engine_clock").fetchall())
        if "kind" not in doc or "last_now" not in doc:
            return None
        scenario = None
        if "sim_start" in doc:
            scenario = ScenarioClock(sim_start=datetime.fromisoformat(doc["sim_start"]), speed=float(doc["speed"]),
                                     wall_start=float(doc["wall_start"]))
        last_now = _t(doc["last_now"])
        assert last_now is not None
        start = doc.get("run_start") or doc.get("sim_start")
        return EngineClock(kind="wall" if doc["kind"] == "wall" else "simulated", last_now=last_now,
                           stopped=doc.get("stopped") == "1", scenario=scenario, run_start=_t(start))

    # -- writing ---------------------------------------------------------------------------

    def _log_change(self, oid: str, at: datetime, by: str, action: str, status: Status, notes: str = "") -> None:
        self._db.execute("INSERT INTO work_order_history (order_id, at, by, action, status, notes)"
                         " VALUES (?, ?, ?, ?, ?, ?)", (oid, _ts(at), by, action, status, notes))

    def record_clock(self, clock: Clock, *, stopped: bool = False) -> None:
        """Record the clock of the service writing this state (at start, periodically, at stop)."""
        doc = {"kind": "wall" if isinstance(clock, WallClock) else "simulated", "last_now": _ts(clock.now()),
               "stopped": "1" if stopped else "0"}
        if isinstance(clock, ScenarioClock):
            doc.update(sim_start=clock.sim_start.isoformat(), speed=repr(clock.speed),
                       wall_start=repr(clock.wall_start))
        start = getattr(clock, "sim_start", None)  # a lockstep run's too: where its poll grids begin
        if isinstance(start, datetime) and not isinstance(clock, WallClock):
            doc.update(run_start=_ts(start))
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("DELETE FROM engine_clock")
            self._db.executemany("INSERT INTO engine_clock (key, value) VALUES (?, ?)", sorted(doc.items()))
            self._db.execute("COMMIT")

    def open_for(self, event: Event, *, report: ReportRule | None = None, timezone: str = "UTC",
                 ) -> tuple[WorkOrder, bool]:
        """Open the order an event calls for, or return the existing one for its occurrence.

        Args:
            event: an event whose kind is in :func:`opening_kinds`.
            report: the pack's report rule (Ch. 196), remembered so that completing this
                inspection opens the report order.
            timezone: the site's IANA zone (business days are local; times are shown in it).

        Returns:
            ``(order, created)``; ``created`` is False when the occurrence already had an order.

        Raises:
            WorkOrderError: the event kind opens no order.
        """
        kind = opening_kinds().get(event.kind)
        if kind is None:
            raise WorkOrderError(f"event kind {event.kind!r} opens no work order")
        return self._insert(
            site=event.site, kind=kind, rule=event.rule, citation=event.citation, occurrence=event.occurrence,
            event_time=event.event_time, due_at=event.due_at, message=event.message, evidence=event.evidence,
            report=({"rule": report.model_dump(), "timezone": timezone}
                    if report is not None and kind in inspection_kinds() else None),
            parent=None, timezone=timezone,
        )

    def close_for(self, event: Event) -> WorkOrder | None:
        """Complete the order an event says was done (its kind is in :func:`closing_kinds`): the order
        of the event's ``(site, rule, occurrence)`` of the kind the event closes, completed at the
        event's time (when the work was done, e.g. the sampling time) by :data:`ENGINE`, with the
        event's message as the note (it names the sample and who recorded it).

        Returns:
            the order (completed now or before), or ``None`` when the occurrence has no order of that
            kind (nothing was asked for: the work was done before a reminder was due).

        Raises:
            WorkOrderError: the event kind completes no work order.
        """
        kind = closing_kinds().get(event.kind)
        if kind is None:
            raise WorkOrderError(f"event kind {event.kind!r} completes no work order")
        order = self.find(event.site, event.rule, event.occurrence)
        if order is None or order.kind != kind:
            return None
        if order.status == "completed":
            return order
        return self.complete(order.id, ENGINE, event.message or f"{event.kind} at {format_time(event.event_time)}",
                             at=event.event_time)

    def _insert(self, *, site: str, kind: str, rule: str, citation: str, occurrence: str, event_time: datetime,
                due_at: datetime | None, message: str, evidence: builtins.list[dict[str, Any]],
                report: dict[str, Any] | None, parent: str | None, timezone: str | None) -> tuple[WorkOrder, bool]:
        oid = order_id(site, rule, occurrence)
        now = self.clock.now()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                cur = self._db.execute(
                    "INSERT OR IGNORE INTO work_orders (id, site, kind, rule, citation, occurrence, event_time,"
                    " opened_at, due_at, status, message, evidence, report_json, parent, timezone)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'open', ?, ?, ?, ?, ?)",
                    (oid, site, kind, rule, citation, occurrence, _ts(event_time), _ts(now),
                     _ts(due_at) if due_at else None, message, json.dumps(evidence),
                     json.dumps(report) if report else None, parent, timezone))
                created = cur.rowcount == 1
                if created:
                    self._log_change(oid, now, ENGINE, "opened", "open",
                                     f"due {_text(due_at, timezone)}" if due_at else "")
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        if created:
            log.info("work order %s opened: %s %s (%s) due %s", oid, site, kind, citation,
                     format_time(due_at) if due_at else "-")
        return self.get(oid), created

    def acknowledge(self, oid: str, by: str, notes: str = "") -> WorkOrder:
        """Acknowledge ``oid`` as ``by``.

        The first acknowledgement sets the status and ``acknowledged_at/_by``; a later one (by the
        same or another person) is kept in the history and changes nothing else.

        Raises:
            WorkOrderError: no such order, it is completed, or ``by`` is empty.
        """
        by = _need_name(by, "the name of who acknowledges (--by)")
        order = self.get(oid)
        if order.status == "completed":
            raise WorkOrderError(f"work order {oid} was completed at {_text(order.completed_at, order.timezone)} by "
                                 f"{order.inspector}: nothing to acknowledge")
        now = self.clock.now()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            if order.status == "open":
                self._db.execute("UPDATE work_orders SET status = 'acknowledged', acknowledged_at = ?,"
                                 " acknowledged_by = ? WHERE id = ?", (_ts(now), by, oid))
            self._log_change(oid, now, by, "acknowledged", "acknowledged", notes.strip())
            self._db.execute("COMMIT")
        if order.status == "open":
            log.info("work order %s acknowledged by %s", oid, by)
        else:
            log.info("work order %s acknowledged again by %s (first by %s)", oid, by, order.acknowledged_by)
        return self.get(oid)

    def complete(self, oid: str, by: str, notes: str, at: datetime | None = None) -> WorkOrder:
        """Complete ``oid``: ``by`` did the work; ``notes`` says what was found and done.

        Completing an inspection of a pack with a report rule opens the ``inspection_report``
        order (due per :func:`stormwatch.alerts.business_days.report_deadline`).

        Args:
            at: when the work was done (default: the clock's now).

        Raises:
            WorkOrderError: no such order, it is already completed, or ``by``/``notes`` is empty.
        """
        by = _need_name(by, "the name of who completed the work (--by)")
        notes = _need_text(notes, "a completion note (--notes: what was inspected, found and done)")
        order = self.get(oid)
        if order.status == "completed":
            raise WorkOrderError(f"work order {oid} was already completed at "
                                 f"{_text(order.completed_at, order.timezone)} "
                                 f"by {order.inspector}")
        done = at or self.clock.now()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute(
                "UPDATE work_orders SET status = 'completed', completed_at = ?, inspector = ?, notes = ? WHERE id = ?",
                (_ts(done), by, notes, oid))
            self._log_change(oid, done, by, "completed", "completed", notes)
            row = self._db.execute("SELECT report_json FROM work_orders WHERE id = ?", (oid,)).fetchone()
            self._db.execute("COMMIT")
        log.info("work order %s completed by %s", oid, by)
        if row and row[0]:
            spec = json.loads(row[0])
            rule = ReportRule.model_validate(spec["rule"])
            due = report_deadline(done, rule.within_business_days, spec["timezone"], rule.holidays)
            self._insert(
                site=order.site, kind="inspection_report", rule=f"{order.rule}-report", citation=rule.citation,
                occurrence=oid, event_time=done, due_at=due,
                message=f"inspection report of {oid} to the SMO within {rule.within_business_days} business days "
                        f"of the inspection: due by {_text(due, spec['timezone'])}",
                evidence=[], report=None, parent=oid, timezone=spec["timezone"])
        return self.get(oid)

    def attach_photo(self, oid: str, by: str, filename: str, content_type: str, data: bytes) -> Photo:
        """Keep a photo with order ``oid`` (recorded in its history as ``photo attached``).

        Photos may be added to a completed order too (an inspector uploading after the fact); the
        status does not change.

        Raises:
            WorkOrderError: no such order, ``by`` is empty, or ``data`` is empty.
        """
        by = _need_name(by, "the name of who attaches the photo (--by)")
        if not data:
            raise WorkOrderError("the photo is empty")
        order = self.get(oid)
        now = self.clock.now()
        digest = hashlib.sha256(data).hexdigest()
        name = filename.strip() or "photo"
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            cur = self._db.execute(
                "INSERT INTO work_order_photos (order_id, at, by, filename, content_type, sha256, data)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)", (oid, _ts(now), by, name, content_type, digest, data))
            seq = int(cur.lastrowid or 0)
            self._log_change(oid, now, by, "photo attached", order.status,
                             f"{name} ({len(data)} bytes, sha256 {digest[:12]})")
            self._db.execute("COMMIT")
        log.info("work order %s: photo %s attached by %s", oid, name, by)
        return Photo(seq=seq, order_id=oid, at=now, by=by, filename=name, content_type=content_type,
                     sha256=digest, size=len(data))

    def photos(self, oid: str) -> builtins.list[Photo]:
        """The photos of order ``oid`` (without their bytes), oldest first."""
        with self._lock:
            rows = self._db.execute("SELECT seq, at, by, filename, content_type, sha256, length(data)"
                                    " FROM work_order_photos WHERE order_id = ? ORDER BY seq", (oid,)).fetchall()
        return [Photo(seq=seq, order_id=oid, at=_t(at), by=by, filename=fn, content_type=ct,  # type: ignore[arg-type]
                      sha256=sha, size=size) for seq, at, by, fn, ct, sha, size in rows]

    def photo(self, oid: str, seq: int) -> Photo:
        """Photo ``seq`` of order ``oid`` with its bytes.

        Raises:
            WorkOrderError: no such photo of that order.
        """
        with self._lock:
            row = self._db.execute("SELECT at, by, filename, content_type, sha256, data FROM work_order_photos"
                                   " WHERE order_id = ? AND seq = ?", (oid, seq)).fetchone()
        if row is None:
            raise WorkOrderError(f"work order {oid} has no photo {seq}")
        at, by, fn, ct, sha, data = row
        return Photo(seq=seq, order_id=oid, at=_t(at), by=by, filename=fn, content_type=ct,  # type: ignore[arg-type]
                     sha256=sha, size=len(data), data=bytes(data))

    def verify(self, oid: str, by: str, notes: str = "") -> WorkOrder:
        """Record that the SMO ``by`` verified the completed order ``oid`` (history ``verified``).

        Raises:
            WorkOrderError: no such order, it is not completed, or ``by`` is empty.
        """
        by = _need_name(by, "the name of who verifies (--by)")
        order = self.get(oid)
        if order.status != "completed":
            raise WorkOrderError(f"work order {oid} is {order.status}: only a completed order can be verified")
        now = self.clock.now()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            self._log_change(oid, now, by, "verified", "completed", notes.strip())
            self._db.execute("COMMIT")
        log.info("work order %s verified by %s", oid, by)
        return order

    def mark_overdue(self, now: datetime | None = None, *,
                     sites: Collection[str] | None = None) -> builtins.list[WorkOrder]:
        """Record as overdue the orders not completed whose ``due_at`` has passed and that were not
        recorded before; returns them (the service announces each once). The status is unchanged.

        ``sites``: only the orders of these sites (partitioned alert services sharing one book each
        announce their own sites' orders; docs/scaling.md)."""
        at = now or self.clock.now()
        stamp = _ts(at)
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            rows = [(oid, status, due, zone) for oid, site, status, due, zone in self._db.execute(
                "SELECT id, site, status, due_at, timezone FROM work_orders WHERE status != 'completed'"
                " AND overdue_at IS NULL AND due_at IS NOT NULL AND due_at < ?", (stamp,)).fetchall()
                if sites is None or site in sites]
            for oid, status, due, zone in rows:
                self._db.execute("UPDATE work_orders SET overdue_at = ? WHERE id = ?", (stamp, oid))
                self._log_change(oid, at, ENGINE, "overdue", status, f"due {_text(_t(due), zone)} passed")
            self._db.execute("COMMIT")
        return [self.get(r[0]) for r in rows]


def recorded_sites(path: Path) -> list[str]:
    """The site ids an alert service's state file ``path`` (``alerts.db``) records: sites the engine
    has watched (its progress) and sites with work orders, sorted; ``[]`` when the file does not
    exist or holds neither table. Read only: the file is never created or changed.

    Raises:
        sqlite3.Error: the file exists but cannot be read as a database.
    """
    if not path.is_file():
        return []
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        found: set[str] = set()
        for table in ("engine_progress", "work_orders"):
            if table in tables:
                found.update(str(row[0]) for row in db.execute(f"SELECT DISTINCT site FROM {table}"))
        return sorted(found)
    finally:
        db.close()


#: The file name of a SQLite store kept in a state directory (``stormwatch demo --state-dir`` keeps
#: its store there, beside ``alerts.db``).
STATE_STORE_FILE = "stormwatch.db"


def state_dir_sites(state_dir: Path, book: Path | None = None) -> list[str]:
    """The site ids a state directory records: the work-order book's (``book``, default
    ``alerts.db`` there: sites the engine watched or opened orders for) and those of a SQLite store
    kept there (``stormwatch.db``: its configured sites), sorted. Read only.

    Raises:
        sqlite3.Error: one of the files exists but cannot be read as a database.
    """
    from stormwatch.stores.sqlite import recorded_sites as store_sites

    found = set(recorded_sites(book if book is not None else state_dir / "alerts.db"))
    found.update(store_sites(state_dir / STATE_STORE_FILE))
    return sorted(found)
