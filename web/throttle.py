"""Failed logins throttled per account and per client address, so the desk resists guessing.

Each typed account name and each client address has a count of failed logins. After
:attr:`ThrottlePolicy.account_free` failures of one name (or :attr:`ThrottlePolicy.address_free`
from one address) the next login of that name (or from that address) is refused for a lockout
window -- even with the right password, saying when to retry -- and each failure after a window
doubles the next one (1 min, 2, 4, 8, at most 15). A quiet spell of
:attr:`ThrottlePolicy.quiet_s` forgets the count; a login that succeeds forgets its account's (not
its address's: one right guess among many must not clear a sprayer's record). An SMO unlocks an
account or an address (``stormwatch users unlock``, the desk's Accounts page). The counts live in
``web.db`` beside the accounts, so the command line and the desk see the same locks. Unknown names
are counted like real ones: a lockout says nothing about which accounts exist. Design and the OWASP
ASVS requirements followed: docs/web.md, "Guessing passwords".
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

log = logging.getLogger(__name__)

Kind = Literal["account", "address"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS login_throttle (
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    failures INTEGER NOT NULL,
    last_failure REAL NOT NULL,
    locked_until REAL NOT NULL,
    lock_s REAL NOT NULL,
    PRIMARY KEY (kind, name)
);
"""


@dataclass(frozen=True)
class ThrottlePolicy:
    """How many failures are free, how long a lockout lasts and grows, when a count is forgotten.

    With the defaults an account takes at most 5 failures, then one per window (1, 2, 4, 8, 15, 15 ...
    min): 12 in an hour -- OWASP ASVS 4.0.3 2.2.1 allows at most 100.
    """

    account_free: int = 5
    address_free: int = 20
    first_lock_s: float = 60.0
    max_lock_s: float = 900.0
    quiet_s: float = 900.0


@dataclass(frozen=True)
class Lock:
    """A lockout in force: of an account name or a client address, until ``until`` (epoch seconds)."""

    kind: Kind
    name: str
    until: float
    failures: int


class LoginThrottle:
    """The failed-login counts of one ``web.db`` (thread-safe; shares the accounts' connection).

    Args:
        db: the open SQLite connection (autocommit) of ``web.db``.
        lock: the lock guarding ``db``.
        now: wall-clock seconds (security: never a demo's simulated time).
        policy: the numbers.
    """

    def __init__(self, db: sqlite3.Connection, lock: threading.Lock, now: Callable[[], float],
                 policy: ThrottlePolicy | None = None) -> None:
        self._db, self._lock, self.now = db, lock, now
        self.policy = policy or ThrottlePolicy()
        with self._lock:
            self._db.executescript(SCHEMA)

    def locked(self, account: str, address: str) -> Lock | None:
        """The lockout that refuses a login of ``account`` from ``address`` now (the later-ending
        one when both are locked), or ``None``."""
        now = self.now()
        with self._lock:
            rows = self._db.execute(
                "SELECT kind, name, locked_until, failures FROM login_throttle WHERE locked_until > ? AND "
                "((kind = 'account' AND name = ?) OR (kind = 'address' AND name = ?)) ORDER BY locked_until DESC",
                (now, account, address)).fetchall()
        return Lock(rows[0][0], rows[0][1], rows[0][2], rows[0][3]) if rows else None

    def failed(self, account: str, address: str) -> Lock | None:
        """Count a failed login; the lockout it starts, if it starts one (logged at WARNING)."""
        started = [lock for kind, name in (("account", account), ("address", address))
                   if (lock := self._count(kind, name)) is not None]  # type: ignore[arg-type]
        for lock in started:
            log.warning("login throttled: %s %r locked for %.0f s after %d failed logins (the last for %r from %s)",
                        lock.kind, lock.name, lock.until - self.now(), lock.failures, account, address)
        return max(started, key=lambda lk: lk.until) if started else None

    def _count(self, kind: Kind, name: str) -> Lock | None:
        free = self.policy.account_free if kind == "account" else self.policy.address_free
        now = self.now()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                row = self._db.execute("SELECT failures, last_failure, lock_s FROM login_throttle "
                                       "WHERE kind = ? AND name = ?", (kind, name)).fetchone()
                failures, lock_s = (0, 0.0) if row is None or now - row[1] > self.policy.quiet_s else (row[0], row[2])
                failures += 1
                until = 0.0
                if failures >= free:
                    lock_s = self.policy.first_lock_s if not lock_s else min(self.policy.max_lock_s, 2 * lock_s)
                    until = now + lock_s
                self._db.execute("INSERT OR REPLACE INTO login_throttle VALUES (?, ?, ?, ?, ?, ?)",
                                 (kind, name, failures, now, until, lock_s))
                # the counts of names and addresses quiet for long are forgotten (a table of guesses stays small)
                self._db.execute("DELETE FROM login_throttle WHERE last_failure < ? AND locked_until < ?",
                                 (now - self.policy.quiet_s, now))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return Lock(kind, name, until, failures) if until else None

    def succeeded(self, account: str) -> None:
        """A login of ``account`` succeeded: its count is forgotten."""
        with self._lock:
            self._db.execute("DELETE FROM login_throttle WHERE kind = 'account' AND name = ?", (account,))

    def unlock(self, kind: Kind, name: str, by: str) -> bool:
        """Lift the lockout and forget the count of account (or address) ``name``; whether there was
        one in force. Logged at WARNING with who did it."""
        now = self.now()
        with self._lock:
            held = self._db.execute("SELECT locked_until FROM login_throttle WHERE kind = ? AND name = ?",
                                    (kind, name)).fetchone()
            self._db.execute("DELETE FROM login_throttle WHERE kind = ? AND name = ?", (kind, name))
        was_locked = held is not None and held[0] > now
        log.warning("login throttle: %s %r unlocked by %s%s", kind, name, by, "" if was_locked else " (was not locked)")
        return was_locked

    def locks(self) -> list[Lock]:
        """The lockouts in force, accounts first, by name."""
        with self._lock:
            rows = self._db.execute("SELECT kind, name, locked_until, failures FROM login_throttle "
                                    "WHERE locked_until > ? ORDER BY kind, name", (self.now(),)).fetchall()
        return [Lock(kind, name, until, failures) for kind, name, until, failures in rows]
