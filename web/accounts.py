"""Accounts of the web application: users with roles, per-site authorization and sessions.

Roles (issue 14, "Accounts"):

============ ================================================================================
role         may
============ ================================================================================
inspector    see the sites assigned to them; acknowledge and complete those sites' orders,
             attach photos
smo          see every site (the Stormwater Management Officer); verify completed inspections; open and
             record enforcement cases (notices of violation, stop-work orders, appeals, ...)
contractor   see their own (assigned) sites, read-only (their sites' issued notices, deadlines and
             stop-work orders included)
============ ================================================================================

Every page and every action asks :func:`can_view`, :func:`can_act` or :func:`can_verify` on the
server; the templates only hide buttons a user may not press.

Passwords are hashed with Argon2id (``argon2-cffi``, its default parameters, RFC 9106's second
recommended option); a hash made with older parameters is upgraded at the next login. Sessions are
server-side: the browser holds a random token (256 bits), the database only its SHA-256, with the
session's CSRF token, its last use and its end. A session ends after ``idle_minutes`` without a
request or ``max_hours`` after login, whichever is first; changing a password ends the user's
sessions; logging in ends the session the browser held (its token never outlives a login). Failed
logins are throttled per account and client address (:mod:`stormwatch.web.throttle`). Session
times are wall-clock time (security), never the simulated time of a demo.

The accounts live in ``web.db`` in the state directory (beside the alert service's ``alerts.db``).

Errors: :class:`AccountError` (unknown user, bad role, duplicate name, weak password).
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from stormwatch.contract import check_person_name
from stormwatch.web.throttle import LoginThrottle

Role = Literal["inspector", "smo", "contractor"]

#: The roles, as ``stormwatch users add --role`` accepts them.
ROLES: tuple[Role, ...] = ("inspector", "smo", "contractor")

#: Shortest password accepted (NIST SP 800-63B §5.1.1.2: at least 8 characters).
MIN_PASSWORD_LENGTH = 8

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS users (
    name TEXT PRIMARY KEY,
    display_name TEXT NOT NULL,
    role TEXT NOT NULL,
    email TEXT NOT NULL DEFAULT '',
    sites TEXT NOT NULL DEFAULT '[]',
    password_hash TEXT NOT NULL,
    created_at REAL NOT NULL,
    password_changed_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    token_sha256 TEXT PRIMARY KEY,
    user TEXT NOT NULL REFERENCES users (name),
    csrf TEXT NOT NULL,
    created_at REAL NOT NULL,
    last_seen REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_user ON sessions (user);
"""


class AccountError(ValueError):
    """An account operation that cannot be done (the message says why, for a person)."""


def check_account(name: str, role: str, sites: Sequence[str], *, email: str = "", display_name: str = "") -> str:
    """Check the fields of a new account (before anything is asked or stored); return the display
    name as history will record it (``""``: the login name).

    Raises:
        AccountError: a login name outside ASCII letters, digits and ``. _ @ -`` (up to 64), an
            unknown role, an inspector or contractor without a site, a malformed e-mail address or
            display name.
    """
    if not _NAME.match(name):
        raise AccountError(f"user name {name!r}: ASCII letters and digits and . _ @ - only (up to 64), starting "
                           "with an ASCII letter or digit")
    if display_name.strip():
        try:
            display_name = check_person_name(display_name, "the name history records (--name)")
        except ValueError as exc:
            raise AccountError(str(exc)) from None
    if role not in ROLES:
        raise AccountError(f"unknown role {role!r}: one of {', '.join(ROLES)}")
    if role != "smo" and not sites:
        raise AccountError(f"an account with role {role} needs at least one site (--site-id SITE_ID)")
    if email and not re.match(r"^[^@\s]+@[^@\s]+$", email):
        raise AccountError(f"{email!r} is not an e-mail address")
    return display_name


@dataclass(frozen=True)
class User:
    """One account.

    Attributes:
        name: the login name.
        display_name: the name recorded in work-order history (``--by``).
        role: see the module table.
        email: where notifications may go (may be empty).
        sites: site ids assigned (inspector, contractor); an SMO sees every site regardless.
    """

    name: str
    display_name: str
    role: Role
    email: str
    sites: tuple[str, ...]


@dataclass(frozen=True)
class Session:
    """A logged-in browser: whose it is and the CSRF token its forms must carry."""

    user: User
    csrf: str
    created_at: float


def can_view(user: User, site: str) -> bool:
    """Whether ``user`` may see ``site``'s pages and orders."""
    return user.role == "smo" or site in user.sites


def can_act(user: User, site: str) -> bool:
    """Whether ``user`` may acknowledge/complete ``site``'s orders and attach photos (inspectors of the site)."""
    return user.role == "inspector" and site in user.sites


def can_verify(user: User, site: str) -> bool:
    """Whether ``user`` may verify ``site``'s completed inspections (the SMO)."""
    return user.role == "smo"


def can_enforce(user: User, site: str) -> bool:
    """Whether ``user`` may open and record ``site``'s enforcement cases (the SMO)."""
    return user.role == "smo"


def visible_sites(user: User, sites: Sequence[str]) -> list[str]:
    """The ids among ``sites`` that ``user`` may see, in the given order."""
    return [s for s in sites if can_view(user, s)]


def _sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Accounts:
    """The users and sessions of one web application (thread-safe; one SQLite file).

    Args:
        path: the SQLite file (``<state-dir>/web.db``), created if absent.
        idle_minutes: a session unused this long has ended.
        max_hours: a session this old has ended, used or not.
        now: wall-clock seconds (tests pass a controllable clock).

    Raises:
        AccountError: ``path`` exists but is not an SQLite database.
    """

    def __init__(self, path: str | Path, *, idle_minutes: float = 480.0, max_hours: float = 24.0 * 7,
                 now: Callable[[], float] = time.time) -> None:
        self.path = Path(path)
        self.idle_s = idle_minutes * 60.0
        self.max_s = max_hours * 3600.0
        self.now = now
        self._hasher = PasswordHasher()
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA busy_timeout=5000")
            self._db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise AccountError(f"{self.path}: not a stormwatch web state file (SQLite): {exc}") from exc
        # verifying against this when the user is unknown costs the same time as a real check
        self._dummy_hash = self._hasher.hash(secrets.token_hex(16))
        #: failed logins per account name and client address (docs/web.md, "Guessing passwords")
        self.throttle = LoginThrottle(self._db, self._lock, now)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- users -----------------------------------------------------------------------------

    def _check_password(self, password: str) -> None:
        if len(password) < MIN_PASSWORD_LENGTH:
            raise AccountError(f"the password must have at least {MIN_PASSWORD_LENGTH} characters")

    def add(self, name: str, role: str, password: str, *, sites: Sequence[str] = (), email: str = "",
            display_name: str = "") -> User:
        """Create a user.

        Raises:
            AccountError: bad name or role, a name already taken, a short password, an inspector or
                contractor without a site.
        """
        display_name = check_account(name, role, sites, email=email, display_name=display_name)
        self._check_password(password)
        stamp = self.now()
        digest = self._hasher.hash(password)
        with self._lock:
            try:
                self._db.execute(
                    "INSERT INTO users (name, display_name, role, email, sites, password_hash, created_at,"
                    " password_changed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (name, display_name.strip() or name, role, email, json.dumps(sorted(set(sites))), digest,
                     stamp, stamp))
            except sqlite3.IntegrityError:
                raise AccountError(f"a user named {name!r} already exists") from None
        return self.get(name)

    def get(self, name: str) -> User:
        """The user ``name``.

        Raises:
            AccountError: no such user.
        """
        with self._lock:
            row = self._db.execute("SELECT name, display_name, role, email, sites FROM users WHERE name = ?",
                                   (name,)).fetchone()
        if row is None:
            raise AccountError(f"no user named {name!r}")
        return self._user(row)

    @staticmethod
    def _user(row: tuple[str, str, str, str, str]) -> User:
        name, display, role, email, sites = row
        return User(name=name, display_name=display, role=cast(Role, role), email=email,
                    sites=tuple(json.loads(sites)))

    def list(self) -> list[User]:
        """Every user, by name."""
        with self._lock:
            rows = self._db.execute("SELECT name, display_name, role, email, sites FROM users ORDER BY name").fetchall()
        return [self._user(r) for r in rows]

    def set_password(self, name: str, password: str) -> None:
        """Change ``name``'s password and end their sessions.

        Raises:
            AccountError: no such user, or a short password.
        """
        self.get(name)
        self._check_password(password)
        digest = self._hasher.hash(password)
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("UPDATE users SET password_hash = ?, password_changed_at = ? WHERE name = ?",
                             (digest, self.now(), name))
            self._db.execute("DELETE FROM sessions WHERE user = ?", (name,))
            self._db.execute("COMMIT")

    def authenticate(self, name: str, password: str) -> User | None:
        """The user if ``password`` is theirs, else ``None`` (unknown name and wrong password alike)."""
        with self._lock:
            row = self._db.execute("SELECT password_hash FROM users WHERE name = ?", (name,)).fetchone()
        digest = row[0] if row else self._dummy_hash
        try:
            self._hasher.verify(digest, password)
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            return None
        if row is None:
            return None
        if self._hasher.check_needs_rehash(digest):
            with self._lock:
                self._db.execute("UPDATE users SET password_hash = ? WHERE name = ?",
                                 (self._hasher.hash(password), name))
        return self.get(name)

    # -- sessions --------------------------------------------------------------------------

    def start_session(self, user: User) -> str:
        """A new session for ``user``; returns the token for the browser's cookie."""
        token = secrets.token_urlsafe(32)
        stamp = self.now()
        with self._lock:
            self._db.execute("INSERT INTO sessions (token_sha256, user, csrf, created_at, last_seen)"
                             " VALUES (?, ?, ?, ?, ?)", (_sha(token), user.name, secrets.token_urlsafe(32),
                                                         stamp, stamp))
        return token

    def session(self, token: str) -> Session | None:
        """The live session of ``token`` (its last use is updated), or ``None`` if there is none
        or it has ended (ended sessions are deleted)."""
        key = _sha(token)
        stamp = self.now()
        with self._lock:
            row = self._db.execute("SELECT user, csrf, created_at, last_seen FROM sessions WHERE token_sha256 = ?",
                                   (key,)).fetchone()
            if row is None:
                return None
            user, csrf, created, last = row
            if stamp - last > self.idle_s or stamp - created > self.max_s:
                self._db.execute("DELETE FROM sessions WHERE token_sha256 = ?", (key,))
                return None
            self._db.execute("UPDATE sessions SET last_seen = ? WHERE token_sha256 = ?", (stamp, key))
        try:
            return Session(user=self.get(user), csrf=csrf, created_at=created)
        except AccountError:
            return None

    def end_session(self, token: str) -> None:
        """Log out: forget the session of ``token`` (no error if there is none)."""
        with self._lock:
            self._db.execute("DELETE FROM sessions WHERE token_sha256 = ?", (_sha(token),))
