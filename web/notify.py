"""E-mail about work orders -- when one opens, when it is due soon, when it goes overdue -- and about
the deadlines of enforcement cases (the appeal window closing, the hearing, the decision, the correction).

Each order gets at most one mail of each kind, to the recipients of its site's ``notify.email``
(site file), with the order's deadline as an ``.ics`` attachment (:func:`stormwatch.alerts.ical.calendar_of`).

Which mail (stages in order ``opened`` < ``due_soon`` < ``overdue``, judged at the alert engine's
time, like the pages): an order not completed is *overdue* past its ``due_at``, *due soon* within
``due_soon`` of it, else *opened*. A mail is queued for the order's current stage unless one of that
stage or a later one was queued before: an order first seen already overdue gets only the overdue
mail, an order opened 3 h before its deadline gets the opened mail (which says so) and no separate
due-soon mail. A queued mail whose order is completed before it goes out is cancelled.

The design: docs/web.md ("The modules", `web/notify.py`).
"""

from __future__ import annotations

import logging
import os
import smtplib
import sqlite3
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from email.message import EmailMessage
from email.utils import formatdate
from pathlib import Path
from typing import Literal

from prometheus_client import CollectorRegistry, Counter, Gauge

from stormwatch.alerts.ical import calendar_of
from stormwatch.alerts.workorders import WorkOrder, WorkOrderError, WorkOrders
from stormwatch.display import local_time, plural
from stormwatch.enforcement.actions import CaseError
from stormwatch.enforcement.cases import EnforcementBook
from stormwatch.enforcement.deadlines import Deadline
from stormwatch.enforcement.view import CaseView, view_of
from stormwatch.web.overview import SiteModel

log = logging.getLogger(__name__)

Kind = Literal["opened", "due_soon", "overdue"]
KINDS: tuple[Kind, ...] = ("opened", "due_soon", "overdue")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS notifications (
    order_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    site TEXT NOT NULL,
    recipients TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at REAL NOT NULL,
    queued_at REAL NOT NULL,
    sent_at REAL,
    last_error TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (order_id, kind)
);
"""


class SmtpUrlError(ValueError):
    """An ``--smtp`` URL that cannot be used (the message never shows the password)."""


@dataclass(frozen=True)
class SmtpSettings:
    """How to reach the mail server. ``password`` is kept out of ``repr``."""

    host: str
    port: int
    security: Literal["plain", "starttls", "tls"]
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    sender: str = "stormwatch@localhost"
    timeout_s: float = 30.0
    ca_file: str | None = None

    @classmethod
    def from_url(cls, url: str, sender: str, env: Mapping[str, str] | None = None,
                 ca_file: str | None = None, password_file: Path | None = None) -> SmtpSettings:
        """Parse an ``--smtp`` URL (module docstring); the password of its user comes from
        ``password_file`` or else ``STORMWATCH_SMTP_PASSWORD`` of ``env`` (default: the process's).

        Raises:
            SmtpUrlError: unknown scheme, no host, a bad port, a password in the URL, a user on a
                plain (unencrypted) URL, a user without a password, or an unreadable password file.
        """
        parts = urllib.parse.urlsplit(url)
        schemes = {"smtp": ("plain", 25), "smtp+starttls": ("starttls", 587), "smtps": ("tls", 465)}
        if parts.scheme not in schemes or not parts.hostname:
            raise SmtpUrlError(f"--smtp {parts.scheme}://{parts.hostname or ''}...: use smtp://host[:port], "
                               "smtp+starttls://[user@]host[:587] or smtps://[user@]host[:465]")
        security, default_port = schemes[parts.scheme]
        try:
            port = parts.port or default_port
        except ValueError as exc:
            raise SmtpUrlError(f"--smtp: bad port ({exc})") from None
        username = urllib.parse.unquote(parts.username) if parts.username else None
        where = f"{parts.scheme}://{parts.username + '@' if parts.username else ''}{parts.hostname}:{port}"
        if parts.password is not None:
            raise SmtpUrlError(f"--smtp {where}: no password in the URL (the command line is visible to every user "
                               "of the machine); give it with --smtp-password-file FILE or STORMWATCH_SMTP_PASSWORD")
        password = None
        if password_file is not None:
            try:
                password = password_file.read_text(encoding="utf-8").rstrip("\r\n")
            except (OSError, UnicodeDecodeError) as exc:
                raise SmtpUrlError(f"--smtp-password-file {password_file}: cannot read it ({exc})") from None
        if password is None:
            password = (env if env is not None else os.environ).get("STORMWATCH_SMTP_PASSWORD")
        if username is not None and security == "plain":
            raise SmtpUrlError(f"--smtp {where}: authentication over an unencrypted connection would send the "
                               "password in clear; use smtp+starttls:// (port 587) or smtps:// (port 465)")
        if username is not None and not password:
            raise SmtpUrlError(f"--smtp {where}: user {username!r} but no password (--smtp-password-file FILE or "
                               "STORMWATCH_SMTP_PASSWORD)")
        if username is None and password_file is not None:
            raise SmtpUrlError(f"--smtp {where}: --smtp-password-file given but no user in the URL "
                               "(smtp+starttls://USER@host)")
        return cls(host=parts.hostname, port=port, security=security,  # type: ignore[arg-type]
                   username=username, password=password if username else None, sender=sender, ca_file=ca_file)

    def safe_url(self) -> str:
        scheme = {"plain": "smtp", "starttls": "smtp+starttls", "tls": "smtps"}[self.security]
        user = f"{self.username}@" if self.username else ""
        return f"{scheme}://{user}{self.host}:{self.port}"


class SmtpAuthError(Exception):
    """The mail server refused our login, or offers no AUTH (a configuration fault: the message
    names the server and user, never the password)."""


def send_mail(settings: SmtpSettings, message: EmailMessage) -> None:
    """Hand ``message`` to the server (logging in first when ``settings`` has a user).

    Raises:
        SmtpAuthError: the login was refused or the server offers no AUTH.
        smtplib.SMTPException, OSError: the server refused the message or could not be reached.
    """
    context = ssl.create_default_context(cafile=settings.ca_file)
    client: smtplib.SMTP
    if settings.security == "tls":
        client = smtplib.SMTP_SSL(settings.host, settings.port, timeout=settings.timeout_s, context=context)
    else:
        client = smtplib.SMTP(settings.host, settings.port, timeout=settings.timeout_s)
    with client:
        client.ehlo()
        if settings.security == "starttls":
            client.starttls(context=context)
            client.ehlo()
        if settings.username:
            try:
                client.login(settings.username, settings.password or "")
            except smtplib.SMTPAuthenticationError as exc:
                reply = exc.smtp_error.decode("utf-8", "replace") if isinstance(exc.smtp_error, bytes) \
                    else str(exc.smtp_error)
                raise SmtpAuthError(f"{settings.safe_url()} refused the login of {settings.username!r}: "
                                    f"{exc.smtp_code} {reply}") from exc
            except smtplib.SMTPNotSupportedError as exc:
                raise SmtpAuthError(f"{settings.safe_url()} offers no AUTH to log in as {settings.username!r}: "
                                    f"{exc}") from exc
        client.send_message(message)


@dataclass
class NotifyMetrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        self.sent = Counter("stormwatch_notifications_sent_total", "Work-order e-mails the server accepted",
                            ["kind"], registry=self.registry)
        self.failures = Counter("stormwatch_notification_failures_total", "Failed attempts to send a work-order "
                                "e-mail (each is retried with backoff)", ["kind"], registry=self.registry)
        self.abandoned = Counter("stormwatch_notifications_abandoned_total",
                                 "Work-order e-mails given up after the last attempt", ["kind"],
                                 registry=self.registry)
        self.pending = Gauge("stormwatch_notifications_pending", "Work-order e-mails waiting to be sent",
                             registry=self.registry)
        self.auth_failures = Counter("stormwatch_smtp_auth_failures_total", "Logins the mail server refused "
                                     "(wrong user or password, or no AUTH offered); the mails stay queued",
                                     registry=self.registry)


_TITLES: dict[Kind, str] = {"opened": "New", "due_soon": "Due soon", "overdue": "OVERDUE"}


def compose(order: WorkOrder, kind: Kind, site: SiteModel, recipients: list[str], sender: str, now: datetime,
            base_url: str = "") -> EmailMessage:
    """The e-mail for ``order`` at stage ``kind``: subject with the site and the site-local due time,
    a plain-text body, and the order's ``.ics``."""
    tz = order.timezone or site.cfg.site.timezone
    due = local_time(order.due_at, tz)
    what = order.kind.replace("_", " ")
    msg = EmailMessage()
    msg["Subject"] = f"[stormwatch] {_TITLES[kind]}: {what} at {site.name} due {due} ({order.id})"
    msg["From"] = sender
    msg["To"] = ", ".join(recipients)
    msg["Date"] = formatdate(localtime=False)
    msg["Message-ID"] = f"<{order.id}.{kind}@stormwatch>"
    left = ""
    if order.due_at is not None:
        hours = (order.due_at - now).total_seconds() / 3600
        left = f"{hours:.1f} hours left" if hours >= 0 else f"{-hours:.1f} hours past due"
    lines = [
        {"opened": f"A work order was opened for {site.name} ({site.id}).",
         "due_soon": f"A work order for {site.name} ({site.id}) is due soon.",
         "overdue": f"A work order for {site.name} ({site.id}) is OVERDUE."}[kind],
        "",
        f"Order:     {order.id} ({what})",
        f"Due:       {due}" + (f" ({left})" if left else ""),
        f"Enforces:  {order.citation}",
        f"Why:       {order.message}",
        f"Status:    {order.status}",
    ]
    return _finish_mail(msg, lines, f"{base_url.rstrip('/')}/orders/{order.id}" if base_url else "",
                        calendar_of([order], now), f"{order.id}.ics")


def _finish_mail(msg: EmailMessage, lines: list[str], link: str, ics: bytes, filename: str) -> EmailMessage:
    """``msg`` with its body (``lines``, the desk's ``link``, the closing) and the ``.ics`` attached."""
    if link:
        lines += ["", f"Open it: {link}"]
    lines += ["", "The deadline is attached as a calendar entry (.ics).", "-- stormwatch"]
    msg.set_content("\n".join(lines))
    msg.add_attachment(ics, maintype="text", subtype="calendar", filename=filename, params={"method": "PUBLISH"})
    return msg


def compose_deadline(view: CaseView, deadline: Deadline, kind: Kind, site: SiteModel, recipients: list[str],
                     sender: str, now: datetime, base_url: str = "") -> EmailMessage:
    """The e-mail for an enforcement deadline at stage ``kind``: subject with the site, the case and
    the last day, a plain-text body citing and quoting the sections that set it, and its ``.ics``."""
    from stormwatch.enforcement.ical import calendar_of as deadlines_calendar

    case = view.case
    day = deadline.due.strftime("%a %Y-%m-%d")
    msg = EmailMessage()
    msg["Subject"] = f"[stormwatch] {_TITLES[kind]}: {deadline.label} {day} -- {case.id} at {site.name}"
    msg["From"] = sender
    msg["To"] = ", ".join(recipients)
    msg["Date"] = formatdate(localtime=False)
    msg["Message-ID"] = f"<{case.id}.{deadline.name}.{kind}@stormwatch>"
    left = (deadline.due - view.today).days
    when = (f"{plural(left, 'day')} left" if left > 0 else "today is the last day" if left == 0
            else f"{plural(-left, 'day')} past")
    lines = [f"An enforcement case at {site.name} ({site.id}) has a deadline: {deadline.label}.", "",
             f"Case:      {case.id} ({view.stage})",
             f"Last day:  {day} ({when}; site-local)",
             f"Basis:     {deadline.basis}",
             f"Set by:    {'; '.join(deadline.citations)}",
             *(f'           "{q}"' for q in deadline.quotes),
             *([f"Note:      {deadline.note}"] if deadline.note else [])]
    return _finish_mail(msg, lines, f"{base_url.rstrip('/')}/enforcement/{case.id}" if base_url else "",
                        deadlines_calendar([view], now, only=deadline.name), f"{case.id}-{deadline.name}.ics")


def deadline_stage(deadline: Deadline, today: date) -> Kind | None:
    """The stage of an enforcement deadline on ``today`` (``None``: nothing to mail: met, moot, or a
    right no longer open)."""
    if deadline.state == "overdue":
        return "overdue"
    if deadline.state != "open":
        return None
    return "due_soon" if (deadline.due - today).days <= 1 else "opened"


class Notifier:
    """Queues and sends the e-mails of a work-order book (and of enforcement cases).

    Args:
        book: the work orders (read).
        sites: the site models (recipients, zone, name); orders of other sites are not mailed.
        ledger: the SQLite file of the queue (``web.db``).
        smtp: the mail server.
        engine_now: the alert engine's time (stages are judged on it).
        cases: the enforcement cases whose deadlines are mailed too (``None``: none).
        due_soon: the "due soon" window.
        base_url: the desk's address, for a link in the mail (optional).
        wall: wall-clock seconds for retry timing (tests pass a controllable one).
    """

    def __init__(self, book: WorkOrders, sites: Mapping[str, SiteModel], ledger: Path, smtp: SmtpSettings,
                 engine_now: Callable[[], datetime], *, due_soon: timedelta = timedelta(hours=6),
                 base_url: str = "", retry_base_s: float = 30.0, retry_max_s: float = 3600.0,
                 max_attempts: int = 10, metrics: NotifyMetrics | None = None,
                 wall: Callable[[], float] = time.time, cases: EnforcementBook | None = None) -> None:
        self.book = book
        self.cases = cases
        self.sites = sites
        self.smtp = smtp
        self.engine_now = engine_now
        self.due_soon = due_soon
        self.base_url = base_url
        self.retry_base_s = retry_base_s
        self.retry_max_s = retry_max_s
        self.max_attempts = max_attempts
        self.metrics = metrics or NotifyMetrics()
        self.wall = wall
        self._db = sqlite3.connect(str(ledger), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(_SCHEMA)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        #: Consecutive refused logins, and the wall time before which no login is tried again.
        self._auth_refusals = 0
        self._auth_retry_at = 0.0

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def stage(self, order: WorkOrder, now: datetime) -> Kind | None:
        """The order's stage at ``now`` (``None``: completed)."""
        if order.status == "completed":
            return None
        if order.due_at is not None and now > order.due_at:
            return "overdue"
        if order.due_at is not None and order.due_at - now <= self.due_soon:
            return "due_soon"
        return "opened"

    def scan(self) -> int:
        """Queue the mails the book calls for now; returns how many were queued."""
        now = self.engine_now()
        queued = 0
        with self._lock:
            known: dict[str, set[str]] = {}
            for oid, kind in self._db.execute("SELECT order_id, kind FROM notifications"):
                known.setdefault(oid, set()).add(kind)
        for order in self.book.current(list(self.sites)):  # the orders not completed (index-backed)
            kind = self.stage(order, now)
            site = self.sites.get(order.site)
            if kind is None or site is None:
                continue
            later = KINDS[KINDS.index(kind):]
            if known.get(order.id, set()) & set(later):
                continue
            recipients = list(site.cfg.notify.email)
            if not recipients:
                continue
            queued += self._queue(order.id, kind, order.site, recipients)
        return queued + self._scan_cases(known)

    def _queue(self, key: str, kind: str, site: str, recipients: list[str]) -> int:
        """Queue mail ``(key, kind)`` unless it was queued before; 1 when queued now."""
        with self._lock:
            cur = self._db.execute(
                "INSERT OR IGNORE INTO notifications (order_id, kind, site, recipients, status, next_attempt_at,"
                " queued_at) VALUES (?, ?, ?, ?, 'pending', ?, ?)",
                (key, kind, site, ",".join(recipients), self.wall(), self.wall()))
        if cur.rowcount:
            log.info("mail queued: %s %s (%s) to %s", kind, key, site, ", ".join(recipients))
        return 1 if cur.rowcount else 0

    def _views(self) -> list[CaseView]:
        if self.cases is None:
            return []
        out = []
        for case in self.cases.list(sites=list(self.sites)):
            try:
                out.append(view_of(self.cases, case))
            except CaseError as exc:  # a pack gone: the other cases are still mailed
                log.error("enforcement case %s: %s; its deadlines are not mailed", case.id, exc)
        return out

    def _scan_cases(self, known: dict[str, set[str]]) -> int:
        """Queue the mails the enforcement deadlines call for now (module docstring)."""
        queued = 0
        for view in self._views():
            if not view.open:
                continue
            recipients = list(self.sites[view.case.site].cfg.notify.email)
            for d in view.deadlines:
                kind = deadline_stage(d, view.today)
                key = f"{view.case.id}/{d.name}"
                if kind is None or not recipients or known.get(key, set()) & set(KINDS[KINDS.index(kind):]):
                    continue
                queued += self._queue(key, kind, view.case.site, recipients)
        return queued

    def _case_message(self, key: str, kind: str, recipients: str, now: datetime) -> EmailMessage | str:
        """The mail of enforcement deadline ``key`` (``<case>/<deadline>``), or why it is cancelled."""
        case_id, _, name = key.partition("/")
        if self.cases is None:
            return "no enforcement cases on this desk"
        try:
            view = view_of(self.cases, self.cases.get(case_id))
        except CaseError as exc:
            return str(exc)
        deadline = next((d for d in view.deadlines if d.name == name), None)
        if not view.open or deadline is None or deadline.state not in ("open", "overdue"):
            return "met, moot or resolved before the mail went out"
        site = self.sites.get(view.case.site)
        if site is None:
            return f"site {view.case.site} is no longer on the desk"
        return compose_deadline(view, deadline, kind, site, recipients.split(","), self.smtp.sender,  # type: ignore[arg-type]
                                now, self.base_url)

    def deliver(self) -> int:
        """Send the queued mails whose time has come; returns how many the server accepted.

        After a refused login nothing is tried until the login backoff has passed (module docstring)."""
        wall = self.wall()
        if wall < self._auth_retry_at:
            self._update_pending()
            return 0
        with self._lock:
            rows = self._db.execute("SELECT order_id, kind, recipients, attempts FROM notifications"
                                    " WHERE status = 'pending' AND next_attempt_at <= ? ORDER BY queued_at",
                                    (wall,)).fetchall()
        sent = 0
        now = self.engine_now()
        for oid, kind, recipients, attempts in rows:
            message = self._message(oid, kind, recipients, now)
            if isinstance(message, str):
                self._finish(oid, kind, "cancelled", message)
                continue
            try:
                send_mail(self.smtp, message)
            except SmtpAuthError as exc:
                self._login_refused(oid, kind, str(exc))
                break
            except (smtplib.SMTPException, OSError) as exc:
                self._failed(oid, kind, attempts + 1, f"{type(exc).__name__}: {exc}")
                continue
            self._auth_refusals = 0
            self._finish(oid, kind, "sent", "")
            self.metrics.sent.labels(kind).inc()
            log.info("mail sent: %s %s to %s via %s", kind, oid, recipients, self.smtp.safe_url())
            sent += 1
        self._update_pending()
        return sent

    def _message(self, oid: str, kind: str, recipients: str, now: datetime) -> EmailMessage | str:
        """The mail of queue entry ``(oid, kind)``, or why it is cancelled."""
        if "/" in oid:
            return self._case_message(oid, kind, recipients, now)
        try:
            order = self.book.get(oid)
        except WorkOrderError:
            return "the order is no longer in the book"
        if order.status == "completed":
            return "completed before the mail went out"
        return compose(order, kind, self.sites[order.site], recipients.split(","), self.smtp.sender,  # type: ignore[arg-type]
                       now, self.base_url)

    def _finish(self, oid: str, kind: str, status: str, note: str) -> None:
        with self._lock:
            self._db.execute("UPDATE notifications SET status = ?, sent_at = ?, last_error = ? WHERE order_id = ?"
                             " AND kind = ?", (status, self.wall() if status == "sent" else None, note, oid, kind))

    def _failed(self, oid: str, kind: str, attempts: int, reason: str) -> None:
        self.metrics.failures.labels(kind).inc()
        if attempts >= self.max_attempts:
            with self._lock:
                self._db.execute("UPDATE notifications SET status = 'abandoned', attempts = ?, last_error = ?"
                                 " WHERE order_id = ? AND kind = ?", (attempts, reason, oid, kind))
            self.metrics.abandoned.labels(kind).inc()
            log.error("mail %s %s abandoned after %d attempts via %s: %s", kind, oid, attempts, self.smtp.safe_url(),
                      reason)
            return
        delay = min(self.retry_base_s * 2 ** (attempts - 1), self.retry_max_s)
        with self._lock:
            self._db.execute("UPDATE notifications SET attempts = ?, next_attempt_at = ?, last_error = ?"
                             " WHERE order_id = ? AND kind = ?", (attempts, self.wall() + delay, reason, oid, kind))
        log.warning("mail %s %s not sent (attempt %d of %d) via %s: %s; retrying in %.0f s", kind, oid, attempts,
                    self.max_attempts, self.smtp.safe_url(), reason, delay)

    def _login_refused(self, oid: str, kind: str, reason: str) -> None:
        """A refused login: counted and logged at ERROR; the mail stays pending with its attempts
        unchanged (the mail is not at fault) and logins wait a doubling backoff."""
        self._auth_refusals += 1
        delay = min(self.retry_base_s * 2 ** (self._auth_refusals - 1), self.retry_max_s)
        self._auth_retry_at = self.wall() + delay
        self.metrics.auth_failures.inc()
        self.metrics.failures.labels(kind).inc()
        with self._lock:
            self._db.execute("UPDATE notifications SET last_error = ? WHERE order_id = ? AND kind = ?",
                             (f"SmtpAuthError: {reason}", oid, kind))
        log.error("mail %s %s not sent: %s; every mail stays queued, next login in %.0f s (check the SMTP user "
                  "and password)", kind, oid, reason, delay)

    def _update_pending(self) -> None:
        with self._lock:
            (n,) = self._db.execute("SELECT COUNT(*) FROM notifications WHERE status = 'pending'").fetchone()
        self.metrics.pending.set(n)

    def ledger(self) -> list[tuple[str, str, str, int, str]]:
        """``(order, kind, status, attempts, last error)`` of every queued mail (for tests and status)."""
        with self._lock:
            return [tuple(r) for r in self._db.execute(
                "SELECT order_id, kind, status, attempts, last_error FROM notifications ORDER BY queued_at, kind")]

    def run(self, interval_s: float = 30.0) -> None:
        """Scan and deliver every ``interval_s`` real seconds until :meth:`stop`. Errors of one round
        are logged and the next round runs."""
        log.info("notifications by e-mail via %s (due soon: %s before the deadline)", self.smtp.safe_url(),
                 self.due_soon)
        while not self._stop.is_set():
            try:
                self.scan()
                self.deliver()
            except (sqlite3.Error, WorkOrderError, CaseError) as exc:
                log.error("notification round failed: %s", exc)
            self._stop.wait(interval_s)

    def stop(self) -> None:
        self._stop.set()
