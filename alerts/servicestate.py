"""The alert service's own durable state beside the work-order book (the same SQLite state file):
what a restart or an outage must not lose -- the watermark it recorded per site, and the events the
store has not taken yet.

The design: docs/alerts.md ("The modules", `alerts/servicestate.py`).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path

from stormwatch.contract import Event
from stormwatch.wire import format_time

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS engine_progress (site TEXT PRIMARY KEY, watermark TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS kept_events (seq INTEGER PRIMARY KEY AUTOINCREMENT, site TEXT NOT NULL,"
    " kept_at TEXT NOT NULL, event TEXT NOT NULL)",
)


#: How long a connection to the state file (``alerts.db``) waits for another one's write lock: both are
#: this service's, and a commit's disk sync on a busy machine can take seconds.
STATE_BUSY_TIMEOUT_MS = 60_000


class ServiceState:
    """Progress and kept events in the alert service's state file ``path``.

    Raises:
        sqlite3.Error: the file cannot be opened or its tables made.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA busy_timeout={STATE_BUSY_TIMEOUT_MS}")
        self._db.execute("PRAGMA synchronous=FULL")
        for stmt in _SCHEMA:
            self._db.execute(stmt)
        self._kept = int(self._db.execute("SELECT COUNT(*) FROM kept_events").fetchone()[0])
        self._recorded: dict[str, datetime] = dict(
            (site, datetime.fromisoformat(w.replace("Z", "+00:00")))
            for site, w in self._db.execute("SELECT site, watermark FROM engine_progress"))

    def progress(self, site: str) -> datetime | None:
        """The watermark up to which ``site``'s events were all emitted, or ``None`` (never recorded)."""
        with self._lock:
            return self._recorded.get(site)

    def record_progress(self, watermarks: Mapping[str, datetime | None]) -> None:
        """Record each site's watermark (``None`` and unchanged ones are skipped; one transaction)."""
        with self._lock:
            changed = [(site, w) for site, w in watermarks.items() if w is not None and self._recorded.get(site) != w]
            if not changed:
                return
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "INSERT INTO engine_progress (site, watermark) VALUES (?, ?)"
                    " ON CONFLICT (site) DO UPDATE SET watermark = excluded.watermark",
                    [(site, format_time(w)) for site, w in changed])
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._recorded.update(changed)

    @property
    def kept_count(self) -> int:
        """Events kept for the store (kept in memory: no query)."""
        with self._lock:
            return self._kept

    def keep(self, events: Sequence[Event], kept_at: datetime) -> None:
        """Keep ``events`` (in order, after those already kept) until the store takes them."""
        if not events:
            return
        rows = [(e.site, format_time(kept_at), json.dumps(e.to_wire(), separators=(",", ":"), ensure_ascii=False))
                for e in events]
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany("INSERT INTO kept_events (site, kept_at, event) VALUES (?, ?, ?)", rows)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._kept += len(rows)

    def kept(self, limit: int) -> tuple[list[Event], int, str | None]:
        """The oldest kept events (at most ``limit``), the ``seq`` of the last of them (for
        :meth:`drop_kept`; 0 when none) and when the oldest was kept (RFC 3339, or ``None``)."""
        with self._lock:
            rows = self._db.execute("SELECT seq, kept_at, event FROM kept_events ORDER BY seq LIMIT ?",
                                    (limit,)).fetchall()
        events = [Event.model_validate(json.loads(text)) for _, _, text in rows]
        return events, (int(rows[-1][0]) if rows else 0), (str(rows[0][1]) if rows else None)

    def drop_kept(self, upto: int) -> None:
        """Forget the kept events up to ``seq`` ``upto`` (the store has them now)."""
        with self._lock:
            cur = self._db.execute("DELETE FROM kept_events WHERE seq <= ?", (upto,))
            self._kept = max(0, self._kept - cur.rowcount)

    def close(self) -> None:
        with self._lock:
            self._db.close()
