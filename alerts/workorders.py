"""Inspection work orders, persisted in SQLite (the alert service's state file).

Which events open an order (:data:`OPENING_KINDS`) and when it is due:

============================ ===================== ==========================================
event                        order kind            due
============================ ===================== ==========================================
``storm_inspection_due``     storm_inspection      last tip + 24 h (§133-7A(2) / §196-9B)
``routine_inspection_due``   routine_inspection    period start + 7 days (same sections)
``turbidity_contrast``       turbidity_review      + ``confirm_within_hours`` (24 h, our choice:
                                                   a possible violation for the SMO to confirm)
``basin_cleanout_due``       basin_cleanout        + ``cleanout_within_hours`` (72 h, our choice;
                                                   the codes say "whenever", §133-7A(1)/§196-9A)
============================ ===================== ==========================================

An order is unique per ``(site, rule, occurrence)``: the same condition never opens a second
order, across restarts and replays (the id is derived from that key). Status: ``open`` →
``acknowledged`` → ``completed``; ``open``/``acknowledged`` past ``due_at`` become ``overdue``
(:meth:`WorkOrders.mark_overdue`, checked against a clock). Completing an inspection order of a
pack with a report rule (Ch. 196 §196-9B) opens an ``inspection_report`` order due within two
business days of the inspection date.

Errors: :class:`WorkOrderError` (unknown id, completing a completed order, a state file that is
not an SQLite database).
"""

from __future__ import annotations

import builtins
import hashlib
import json
import logging
import sqlite3
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from stormwatch.alerts.business_days import report_deadline
from stormwatch.alerts.packs import ReportRule
from stormwatch.clock import Clock
from stormwatch.contract import Event
from stormwatch.wire import format_time

log = logging.getLogger(__name__)

Status = Literal["open", "acknowledged", "completed", "overdue"]

#: event kind → work-order kind, for the events that open an order.
OPENING_KINDS: dict[str, str] = {
    "storm_inspection_due": "storm_inspection",
    "routine_inspection_due": "routine_inspection",
    "turbidity_contrast": "turbidity_review",
    "basin_cleanout_due": "basin_cleanout",
}

#: order kinds that are inspections (their completion is "an inspection" for reports and cadence).
INSPECTION_KINDS = ("storm_inspection", "routine_inspection")

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
    UNIQUE (site, rule, occurrence)
);
CREATE INDEX IF NOT EXISTS work_orders_site ON work_orders (site, rule, completed_at);
"""


class WorkOrderError(ValueError):
    """Unknown work order or a transition that is not allowed."""


@dataclass(frozen=True)
class WorkOrder:
    """One work order. Times are UTC; ``evidence`` is the opening event's evidence."""

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

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (times RFC 3339 UTC)."""
        out: dict[str, Any] = {}
        for key, value in self.__dict__.items():
            out[key] = format_time(value) if isinstance(value, datetime) else value
        return out


def order_id(site: str, rule: str, occurrence: str) -> str:
    """Stable id of the order for ``(site, rule, occurrence)``: ``WO-`` + 10 hex digits."""
    return "WO-" + hashlib.sha256(f"{site}\x00{rule}\x00{occurrence}".encode()).hexdigest()[:10]


def _ts(value: datetime) -> str:
    """Fixed-width UTC text, so SQL string order is time order."""
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def _t(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


class WorkOrders:
    """The work-order book of one alert service (thread-safe; one SQLite file).

    Args:
        path: SQLite file (created if absent).
        clock: stamps ``opened_at``, acknowledgements and completions; checks overdue.

    Raises:
        WorkOrderError: ``path`` exists but is not an SQLite database.
    """

    def __init__(self, path: str | Path, clock: Clock) -> None:
        self.path = Path(path)
        self.clock = clock
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA busy_timeout=5000")
            self._db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise WorkOrderError(f"{self.path}: not a work-order state file (SQLite): {exc}") from exc

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- reading ---------------------------------------------------------------------------

    def _row(self, row: sqlite3.Row | tuple[Any, ...]) -> WorkOrder:
        (oid, site, kind, rule, citation, occurrence, event_time, opened_at, due_at, status, message, evidence,
         inspector, notes, ack_at, ack_by, completed_at, _report, parent) = row
        return WorkOrder(
            id=oid, site=site, kind=kind, rule=rule, citation=citation, occurrence=occurrence,
            event_time=_t(event_time), opened_at=_t(opened_at), due_at=_t(due_at), status=status,  # type: ignore[arg-type]
            message=message, evidence=json.loads(evidence), inspector=inspector, notes=notes,
            acknowledged_at=_t(ack_at), acknowledged_by=ack_by, completed_at=_t(completed_at), parent=parent,
        )

    def get(self, oid: str) -> WorkOrder:
        """The order ``oid``.

        Raises:
            WorkOrderError: no such order.
        """
        with self._lock:
            row = self._db.execute("SELECT * FROM work_orders WHERE id = ?", (oid,)).fetchone()
        if row is None:
            raise WorkOrderError(f"no work order {oid!r} in {self.path}")
        return self._row(row)

    def find(self, site: str, rule: str, occurrence: str) -> WorkOrder | None:
        """The order of ``(site, rule, occurrence)``, if one was opened."""
        with self._lock:
            row = self._db.execute("SELECT * FROM work_orders WHERE site = ? AND rule = ? AND occurrence = ?",
                                   (site, rule, occurrence)).fetchone()
        return None if row is None else self._row(row)

    def list(self, site: str | None = None, status: str | None = None) -> builtins.list[WorkOrder]:
        """Orders, oldest event first, optionally of one site and/or status."""
        sql, args = "SELECT * FROM work_orders WHERE 1=1", []
        if site is not None:
            sql += " AND site = ?"
            args.append(site)
        if status is not None:
            sql += " AND status = ?"
            args.append(status)
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY event_time, id", args).fetchall()
        return [self._row(r) for r in rows]

    def last_completed(self, site: str, kinds: tuple[str, ...]) -> datetime | None:
        """Completion time of the site's latest completed order of one of ``kinds``."""
        marks = ",".join("?" * len(kinds))
        with self._lock:
            row = self._db.execute(
                f"SELECT MAX(completed_at) FROM work_orders WHERE site = ? AND kind IN ({marks})",
                (site, *kinds)).fetchone()
        return _t(row[0]) if row and row[0] else None

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

    # -- writing ---------------------------------------------------------------------------

    def open_for(self, event: Event, *, report: ReportRule | None = None, timezone: str = "UTC",
                 ) -> tuple[WorkOrder, bool]:
        """Open the order an event calls for, or return the existing one for its occurrence.

        Args:
            event: an event whose kind is in :data:`OPENING_KINDS`.
            report: the pack's report rule (Ch. 196), remembered so that completing this
                inspection opens the report order.
            timezone: the site's IANA zone (business days are local).

        Returns:
            ``(order, created)``; ``created`` is False when the occurrence already had an order.

        Raises:
            WorkOrderError: the event kind opens no order.
        """
        kind = OPENING_KINDS.get(event.kind)
        if kind is None:
            raise WorkOrderError(f"event kind {event.kind!r} opens no work order")
        return self._insert(
            site=event.site, kind=kind, rule=event.rule, citation=event.citation, occurrence=event.occurrence,
            event_time=event.event_time, due_at=event.due_at, message=event.message, evidence=event.evidence,
            report=({"rule": report.model_dump(), "timezone": timezone}
                    if report is not None and kind in INSPECTION_KINDS else None),
            parent=None,
        )

    def _insert(self, *, site: str, kind: str, rule: str, citation: str, occurrence: str, event_time: datetime,
                due_at: datetime | None, message: str, evidence: builtins.list[dict[str, Any]],
                report: dict[str, Any] | None, parent: str | None) -> tuple[WorkOrder, bool]:
        oid = order_id(site, rule, occurrence)
        now = self.clock.now()
        with self._lock:
            cur = self._db.execute(
                "INSERT OR IGNORE INTO work_orders (id, site, kind, rule, citation, occurrence, event_time, opened_at,"
                " due_at, status, message, evidence, report_json, parent)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'open', ?, ?, ?, ?)",
                (oid, site, kind, rule, citation, occurrence, _ts(event_time), _ts(now),
                 _ts(due_at) if due_at else None, message, json.dumps(evidence),
                 json.dumps(report) if report else None, parent))
            created = cur.rowcount == 1
        if created:
            log.info("work order %s opened: %s %s (%s) due %s", oid, site, kind, citation,
                     format_time(due_at) if due_at else "-")
        return self.get(oid), created

    def acknowledge(self, oid: str, by: str) -> WorkOrder:
        """Mark ``oid`` acknowledged by ``by`` (no-op on a completed order).

        Raises:
            WorkOrderError: no such order.
        """
        order = self.get(oid)
        if order.status == "completed":
            return order
        with self._lock:
            self._db.execute(
                "UPDATE work_orders SET status = CASE WHEN status = 'overdue' THEN 'overdue' ELSE 'acknowledged' END,"
                " acknowledged_at = ?, acknowledged_by = ?, inspector = COALESCE(inspector, ?) WHERE id = ?",
                (_ts(self.clock.now()), by, by, oid))
        log.info("work order %s acknowledged by %s", oid, by)
        return self.get(oid)

    def complete(self, oid: str, by: str, notes: str = "", at: datetime | None = None) -> WorkOrder:
        """Mark ``oid`` completed by ``by`` at ``at`` (default: the clock's now).

        Completing an inspection of a pack with a report rule opens the ``inspection_report``
        order (due per :func:`stormwatch.alerts.business_days.report_deadline`).

        Raises:
            WorkOrderError: no such order, or it is already completed.
        """
        order = self.get(oid)
        if order.status == "completed":
            done_at = format_time(order.completed_at) if order.completed_at else "an unknown time"
            raise WorkOrderError(f"work order {oid} was already completed at {done_at}")
        done = at or self.clock.now()
        with self._lock:
            self._db.execute(
                "UPDATE work_orders SET status = 'completed', completed_at = ?, inspector = ?, notes = ? WHERE id = ?",
                (_ts(done), by, notes, oid))
            row = self._db.execute("SELECT report_json FROM work_orders WHERE id = ?", (oid,)).fetchone()
        log.info("work order %s completed by %s", oid, by)
        if row and row[0]:
            spec = json.loads(row[0])
            rule = ReportRule.model_validate(spec["rule"])
            due = report_deadline(done, rule.within_business_days, spec["timezone"], rule.holidays)
            self._insert(
                site=order.site, kind="inspection_report", rule=f"{order.rule}-report", citation=rule.citation,
                occurrence=oid, event_time=done, due_at=due,
                message=f"inspection report of {oid} to the SMO within {rule.within_business_days} business days "
                        f"of the inspection: due by {format_time(due)}",
                evidence=[], report=None, parent=oid)
        return self.get(oid)

    def mark_overdue(self, now: datetime | None = None) -> builtins.list[WorkOrder]:
        """Mark open/acknowledged orders whose ``due_at`` has passed as ``overdue``; returns them."""
        stamp = _ts(now or self.clock.now())
        with self._lock:
            ids = [r[0] for r in self._db.execute(
                "SELECT id FROM work_orders WHERE status IN ('open', 'acknowledged') AND due_at IS NOT NULL"
                " AND due_at < ?", (stamp,)).fetchall()]
            if ids:
                self._db.execute(f"UPDATE work_orders SET status = 'overdue' WHERE id IN ({','.join('?' * len(ids))})",
                                 ids)
        return [self.get(i) for i in ids]
