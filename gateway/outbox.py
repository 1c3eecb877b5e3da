"""Durable store-and-forward outbox (SQLite, WAL) -- design-notes.md "Delivery".

read → **outbox (committed)** → publish QoS 1 → PUBACK → ingest's stored-acknowledgement → delete.
A reading is committed here before it is handed to the MQTT client and deleted only once ingest
confirmed that the store holds it (:meth:`Outbox.confirm`, :mod:`stormwatch.storedack`) -- or, with
the publisher's ``confirm="broker"``, once the broker acknowledged it (:meth:`Outbox.delete`). A
broker that crashes and forgets what it held, a broker outage or a gateway crash at any point yields
at worst a duplicate (same identity ``(gateway, boot, seq)``, removed by consumers), never a loss
(failure-kinds.md #8).

The design: docs/gateway.md ("The modules", `gateway/outbox.py`).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from stormwatch.gateway.counter import RAIN_QUANTITY, CounterState, ensure_schema, write_state
from stormwatch.wire import dump_payload

log = logging.getLogger(__name__)

__all__ = ["RAIN_QUANTITY", "Outbox", "OutboxRow", "ReadingLike"]
DEFAULT_MAX_ROWS = 2_000_000
DEFAULT_MAX_BYTES = 512 * 1024 * 1024
DEFAULT_MAX_AGE_S = 30 * 86400.0
#: Rows deleted per statement when acknowledging (keeps SQL parameter lists short).
_DELETE_CHUNK = 500


def _sort_time(value: datetime) -> str:
    """Fixed-width UTC text (always microseconds) so text order is time order."""
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


class ReadingLike(Protocol):
    """What the outbox needs of a reading: its identity, device, quantity, event time and wire
    dict -- a :class:`stormwatch.wire.WireReading` (the gateway) or a validated
    :class:`stormwatch.contract.Reading` (tests, tools)."""

    @property
    def gateway(self) -> str: ...
    @property
    def boot(self) -> str: ...
    @property
    def seq(self) -> int: ...
    @property
    def device(self) -> str: ...
    @property
    def quantity(self) -> str: ...
    @property
    def time(self) -> datetime: ...
    def to_wire(self) -> dict[str, Any]: ...


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
        max_rows, max_bytes, max_age_s: bounds (see the module docstring for the drop policy);
            ``max_age_s=None`` disables the age bound.

    Raises:
        ValueError: a bound below 1.
    """

    def __init__(
        self,
        path: Path,
        max_rows: int = DEFAULT_MAX_ROWS,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_age_s: float | None = DEFAULT_MAX_AGE_S,
    ) -> None:
        if max_rows < 1 or max_bytes < 1 or (max_age_s is not None and max_age_s <= 0):
            raise ValueError("outbox bounds must be ≥ 1")
        self.max_rows = max_rows
        self.max_bytes = max_bytes
        self.max_age_s = max_age_s
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS outbox ("
            " id INTEGER PRIMARY KEY AUTOINCREMENT,"
            " gateway TEXT NOT NULL, boot TEXT NOT NULL, seq INTEGER NOT NULL,"
            " device TEXT NOT NULL, quantity TEXT NOT NULL, event_time TEXT NOT NULL,"
            " is_rain INTEGER NOT NULL, payload BLOB NOT NULL, added_at REAL NOT NULL DEFAULT 0,"
            " UNIQUE (gateway, boot, seq))"
        )
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(outbox)")}
        if "added_at" not in columns:  # an outbox of a gateway that forgot readings on the broker's PUBACK
            self._db.execute("ALTER TABLE outbox ADD COLUMN added_at REAL NOT NULL DEFAULT 0")
        self._db.execute("CREATE INDEX IF NOT EXISTS outbox_order ON outbox (event_time, id)")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS outbox_deadletter ("
            " id INTEGER PRIMARY KEY, gateway TEXT NOT NULL, boot TEXT NOT NULL, seq INTEGER NOT NULL,"
            " reason TEXT NOT NULL, payload BLOB NOT NULL, at REAL NOT NULL)"
        )
        ensure_schema(self._db)
        self.dropped = 0
        rows, size = self._db.execute("SELECT COUNT(*), COALESCE(SUM(LENGTH(payload)), 0) FROM outbox").fetchone()
        self._rows = int(rows)
        self._bytes = int(size)

    def add(self, readings: Sequence[ReadingLike], counter_states: Mapping[str, CounterState] | None = None) -> None:
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
        now = time.time()
        rows = [
            (
                r.gateway, r.boot, r.seq, r.device, r.quantity, _sort_time(r.time),
                int(r.quantity == RAIN_QUANTITY), dump_payload([r.to_wire()]), now,
            )
            for r in readings
        ]
        newest = max((r.time for r in readings), default=None)
        with self._lock:
            rows_before, bytes_before = self._rows, self._bytes
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "INSERT INTO outbox (gateway, boot, seq, device, quantity, event_time, is_rain, payload, added_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
                self._rows += len(rows)
                self._bytes += sum(len(row[7]) for row in rows)
                for device, state in (counter_states or {}).items():
                    write_state(self._db, device, state)
                aged = self._enforce_age(newest)
                dropped = self._enforce_size()
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                self._rows, self._bytes = rows_before, bytes_before
                raise
        if aged:
            self.dropped += aged
            log.error("outbox: dropped %d non-rain readings older than %.0f s (age bound)", aged, self.max_age_s)
        if dropped[0] or dropped[1]:
            self.dropped += dropped[0] + dropped[1]
            log.error(
                "outbox full (%d rows / %d bytes): dropped %d oldest non-rain and %d oldest rain readings",
                self.max_rows, self.max_bytes, dropped[0], dropped[1],
            )

    def _delete_returning(self, sql: str, params: tuple[object, ...]) -> int:
        """Run a ``DELETE ... RETURNING LENGTH(payload)``; update the counters; rows deleted."""
        sizes = self._db.execute(sql, params).fetchall()
        self._rows -= len(sizes)
        self._bytes -= sum(int(n) for (n,) in sizes)
        return len(sizes)

    def _enforce_age(self, newest: datetime | None) -> int:
        if self.max_age_s is None or newest is None:
            return 0
        cutoff = _sort_time(newest - timedelta(seconds=self.max_age_s))
        return self._delete_returning(
            "DELETE FROM outbox WHERE is_rain = 0 AND event_time < ? RETURNING LENGTH(payload)", (cutoff,)
        )

    def _over(self) -> int:
        """Rows to drop to get under both size bounds (an estimate for the byte bound)."""
        excess = self._rows - self.max_rows
        if self._bytes > self.max_bytes and self._rows:
            mean = self._bytes / self._rows
            excess = max(excess, int((self._bytes - self.max_bytes) / mean) + 1)
        return max(0, excess)

    def _enforce_size(self) -> tuple[int, int]:
        non_rain = rain = 0
        while (excess := self._over()) > 0:
            n = self._delete_returning(
                "DELETE FROM outbox WHERE id IN (SELECT id FROM outbox WHERE is_rain = 0"
                " ORDER BY event_time, id LIMIT ?) RETURNING LENGTH(payload)",
                (excess,),
            )
            non_rain += n
            if n == 0:
                break
        while (excess := self._over()) > 0:
            n = self._delete_returning(
                "DELETE FROM outbox WHERE id IN (SELECT id FROM outbox ORDER BY event_time, id LIMIT ?)"
                " RETURNING LENGTH(payload)",
                (excess,),
            )
            rain += n
            if n == 0:
                break
        return (non_rain, rain)

    def pending(self, limit: int, exclude: set[int] | frozenset[int] = frozenset(), *,
                after: int | None = None, upto: int | None = None) -> list[OutboxRow]:
        """Up to ``limit`` rows not in ``exclude`` (rows already in flight), in replay (commit) order;
        only rows with an ``id`` above ``after`` and at most ``upto`` when given."""
        if limit <= 0:
            return []
        low = -1 if after is None else after
        high = (1 << 62) if upto is None else upto
        with self._lock:
            cur = self._db.execute(
                "SELECT id, payload, event_time, seq FROM outbox WHERE id > ? AND id <= ? ORDER BY id LIMIT ?",
                (low, high, limit + len(exclude)),
            )
            rows = [OutboxRow(int(i), bytes(p), t, int(s)) for i, p, t, s in cur.fetchall()]
        return [r for r in rows if r.id not in exclude][:limit]

    def head(self) -> tuple[int, float] | None:
        """The first row in replay order -- its ``id`` and when it was committed (Unix seconds; 0 for a
        row kept from before ``added_at`` was recorded) -- or ``None`` when the outbox is empty."""
        with self._lock:
            row = self._db.execute("SELECT id, added_at FROM outbox ORDER BY id LIMIT 1").fetchone()
        return None if row is None else (int(row[0]), float(row[1]))

    def confirm(self, gateway: str, confirmed: Sequence[tuple[str, int, int]]) -> tuple[int, int | None]:
        """Delete the rows of ``gateway`` that ingest confirmed stored (one committed transaction).

        Args:
            gateway: the gateway id of this outbox's rows.
            confirmed: ``(boot, first seq, last seq)`` runs, inclusive (:func:`stormwatch.storedack.decode`);
                rows already gone are ignored.

        Returns:
            ``(rows deleted, the highest id among them or None)``.

        Raises:
            sqlite3.Error: the commit failed (nothing is deleted).
        """
        if not confirmed:
            return 0, None
        top: int | None = None
        with self._lock:
            rows_before, bytes_before = self._rows, self._bytes
            deleted = 0
            self._begin_deleting()
            try:
                for boot, first, last in confirmed:
                    gone = self._db.execute(
                        "DELETE FROM outbox WHERE gateway = ? AND boot = ? AND seq BETWEEN ? AND ?"
                        " RETURNING LENGTH(payload), id", (gateway, boot, first, last)).fetchall()
                    for size, row_id in gone:
                        self._rows -= 1
                        self._bytes -= int(size)
                        if top is None or row_id > top:
                            top = int(row_id)
                    deleted += len(gone)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                self._rows, self._bytes = rows_before, bytes_before
                raise
            finally:
                self._db.execute("PRAGMA synchronous=FULL")
        return deleted, top

    def delete(self, ids: list[int]) -> None:
        """Delete rows the broker acknowledged (``confirm="broker"``; one committed transaction);
        unknown ids are ignored."""
        if not ids:
            return
        with self._lock:
            rows_before, bytes_before = self._rows, self._bytes
            self._begin_deleting()
            try:
                for start in range(0, len(ids), _DELETE_CHUNK):
                    chunk = tuple(ids[start : start + _DELETE_CHUNK])
                    marks = ",".join("?" * len(chunk))
                    self._delete_returning(
                        f"DELETE FROM outbox WHERE id IN ({marks}) RETURNING LENGTH(payload)", chunk
                    )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                self._rows, self._bytes = rows_before, bytes_before
                raise
            finally:
                self._db.execute("PRAGMA synchronous=FULL")

    def _begin_deleting(self) -> None:
        """Begin a transaction that only deletes rows, committed without waiting for the disk.

        A delete a power cut undoes brings a confirmed row back: it is sent again and dropped as a
        duplicate by its identity -- never a loss. The WAL keeps commits in order, so the next
        ``synchronous=FULL`` commit (:meth:`add`) makes an earlier delete durable too. Adds stay
        FULL: a reading must be on disk before it is published (a rain reading whose commit a power
        cut undid would have its tips counted again from the old counter baseline).
        """
        self._db.execute("PRAGMA synchronous=NORMAL")
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except BaseException:
            self._db.execute("PRAGMA synchronous=FULL")
            raise

    def dead_letter(self, ids: Sequence[int], reason: str) -> int:
        """Move rows that can never be sent (a reading over the broker's packet limit) to the local dead
        letters, with ``reason`` (one committed transaction); returns the rows moved."""
        if not ids:
            return 0
        with self._lock:
            rows_before, bytes_before = self._rows, self._bytes
            moved = 0
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for row_id in ids:
                    self._db.execute(
                        "INSERT INTO outbox_deadletter (gateway, boot, seq, reason, payload, at)"
                        " SELECT gateway, boot, seq, ?, payload, ? FROM outbox WHERE id = ?",
                        (reason, time.time(), row_id))
                    moved += self._delete_returning("DELETE FROM outbox WHERE id = ? RETURNING LENGTH(payload)",
                                                    (row_id,))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                self._rows, self._bytes = rows_before, bytes_before
                raise
        return moved

    def dead_letters(self) -> list[tuple[str, int, str, bytes]]:
        """The local dead letters, oldest first: ``(boot, seq, reason, payload)`` each."""
        with self._lock:
            rows = self._db.execute("SELECT boot, seq, reason, payload FROM outbox_deadletter ORDER BY id").fetchall()
        return [(str(b), int(q), str(r), bytes(p)) for b, q, r, p in rows]

    def depth(self) -> int:
        """Rows not yet confirmed (kept in memory: no table scan)."""
        with self._lock:
            return self._rows

    def size_bytes(self) -> int:
        """Payload bytes of the rows not yet confirmed."""
        with self._lock:
            return self._bytes

    def close(self) -> None:
        with self._lock:
            self._db.close()
