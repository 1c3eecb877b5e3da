"""Durable store-and-forward outbox (SQLite, WAL) -- design-notes.md "Delivery".

read → **outbox (committed)** → publish QoS 1 → PUBACK → delete. A reading is committed here
before it is handed to the MQTT client, and deleted only after the broker acknowledged it, so a
broker outage or a gateway crash at any point yields at worst a duplicate (same identity
``(gateway, boot, seq)``, removed by consumers), never a loss (failure-kinds.md #8).

fsync policy: ``journal_mode=WAL`` with ``synchronous=FULL``. In WAL mode ``NORMAL`` survives an
application crash but may lose the last committed transactions on power loss or an OS crash;
field gateways lose power (solar/battery, generator swaps), and an acknowledged-as-stored reading
that vanishes is exactly the loss the outbox exists to prevent. The cost is one WAL fsync per
commit: one per poll and one per batch of acknowledgements -- negligible at sensor rates.

Bounded: at most ``max_rows`` rows. When full, new readings still go in and the oldest
*non-rain* rows (event-time order) are dropped first; only when nothing but rain is left are the
oldest rain rows dropped. Every drop is logged at ERROR with its count (rain tips are the
compliance-critical record: a storm's total decides inspections).

Replay order: event time, then insertion order (which is ``seq`` order within a boot).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from gateway.counter import CounterState, ensure_schema, write_state
from stormwatch.contract import Reading, dump_readings

log = logging.getLogger(__name__)

RAIN_QUANTITY = "rain_tips"


def _sort_time(value: datetime) -> str:
    """Fixed-width UTC text (always microseconds) so text order is time order."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class OutboxRow:
    """One stored reading: ``id`` (outbox key), ``payload`` (the MQTT message bytes)."""

    id: int
    payload: bytes
    event_time: str
    seq: int


class Outbox:
    """SQLite outbox at ``path``; thread-safe (one connection, one lock).

    Args:
        path: database file (created with its table if missing).
        max_rows: bound on stored rows (see the module docstring for the drop policy).
    """

    def __init__(self, path: Path, max_rows: int = 200_000) -> None:
        if max_rows < 1:
            raise ValueError("max_rows must be ≥ 1")
        self.max_rows = max_rows
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS outbox ("
            " id INTEGER PRIMARY KEY AUTOINCREMENT,"
            " gateway TEXT NOT NULL, boot TEXT NOT NULL, seq INTEGER NOT NULL,"
            " device TEXT NOT NULL, quantity TEXT NOT NULL, event_time TEXT NOT NULL,"
            " is_rain INTEGER NOT NULL, payload BLOB NOT NULL,"
            " UNIQUE (gateway, boot, seq))"
        )
        self._db.execute("CREATE INDEX IF NOT EXISTS outbox_order ON outbox (event_time, id)")
        ensure_schema(self._db)
        self.dropped = 0

    def add(self, readings: list[Reading], counter_states: Mapping[str, CounterState] | None = None) -> None:
        """Commit ``readings`` (one row and one future message each) in one transaction.

        Args:
            readings: readings to store.
            counter_states: device → new counter state, committed in the same transaction (so a
                rain reading and the baseline it advanced are never split by a crash).

        Applies the drop policy when the bound is exceeded. Raises ``sqlite3.Error`` if the
        commit fails (the caller must not publish then).
        """
        if not readings and not counter_states:
            return
        rows = [
            (
                r.gateway, r.boot, r.seq, r.device, r.quantity, _sort_time(r.time),
                int(r.quantity == RAIN_QUANTITY), dump_readings([r]),
            )
            for r in readings
        ]
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "INSERT INTO outbox (gateway, boot, seq, device, quantity, event_time, is_rain, payload)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
                for device, state in (counter_states or {}).items():
                    write_state(self._db, device, state)
                dropped = self._enforce_bound()
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        if dropped[0] or dropped[1]:
            self.dropped += dropped[0] + dropped[1]
            log.error(
                "outbox full (%d rows): dropped %d oldest non-rain and %d oldest rain readings",
                self.max_rows, dropped[0], dropped[1],
            )

    def _enforce_bound(self) -> tuple[int, int]:
        (count,) = self._db.execute("SELECT COUNT(*) FROM outbox").fetchone()
        excess = count - self.max_rows
        if excess <= 0:
            return (0, 0)
        cur = self._db.execute(
            "DELETE FROM outbox WHERE id IN (SELECT id FROM outbox WHERE is_rain = 0"
            " ORDER BY event_time, id LIMIT ?)",
            (excess,),
        )
        non_rain = cur.rowcount
        rain = 0
        if non_rain < excess:
            cur = self._db.execute(
                "DELETE FROM outbox WHERE id IN (SELECT id FROM outbox ORDER BY event_time, id LIMIT ?)",
                (excess - non_rain,),
            )
            rain = cur.rowcount
        return (non_rain, rain)

    def pending(self, limit: int, exclude: set[int] | frozenset[int] = frozenset()) -> list[OutboxRow]:
        """Up to ``limit`` rows not in ``exclude`` (rows already in flight), in replay order."""
        if limit <= 0:
            return []
        with self._lock:
            cur = self._db.execute(
                "SELECT id, payload, event_time, seq FROM outbox ORDER BY event_time, id LIMIT ?",
                (limit + len(exclude),),
            )
            rows = [OutboxRow(int(i), bytes(p), t, int(s)) for i, p, t, s in cur.fetchall()]
        return [r for r in rows if r.id not in exclude][:limit]

    def delete(self, ids: list[int]) -> None:
        """Delete acknowledged rows (one committed transaction); unknown ids are ignored."""
        if not ids:
            return
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany("DELETE FROM outbox WHERE id = ?", [(i,) for i in ids])
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def depth(self) -> int:
        """Rows waiting for a PUBACK."""
        with self._lock:
            (count,) = self._db.execute("SELECT COUNT(*) FROM outbox").fetchone()
        return int(count)

    def close(self) -> None:
        with self._lock:
            self._db.close()
