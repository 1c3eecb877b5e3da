"""Work-order e-mail against a real SMTP server process (aiosmtpd, started by the test): recipients,
subject, the due time in site-local time, the .ics that parses back; sent once across a restart;
retried with backoff while the server is away; STARTTLS."""

from __future__ import annotations

import logging
import mailbox
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from email.message import Message
from pathlib import Path

import pytest
import yaml
from icalendar import Calendar

from stormwatch.alerts.workorders import WorkOrders
from stormwatch.clock import ManualClock
from stormwatch.contract import Event
from stormwatch.profiles import ProfileLibrary
from stormwatch.resources import example_site
from stormwatch.web.notify import Notifier, SmtpSettings
from stormwatch.web.overview import load_sites
from stormwatch.web.server import free_port
from tests.web_support import NOW, storm_event

RECIPIENTS = ["ina@contractor.example", "smo@village.example"]


class SmtpServer:
    """``python -m aiosmtpd`` delivering into a Maildir (a separate process)."""

    def __init__(self, root: Path, port: int, tls: tuple[Path, Path] | None = None) -> None:
        self.maildir = root / "Maildir"
        root.mkdir(parents=True, exist_ok=True)
        self.port = port
        args = [sys.executable, "-m", "aiosmtpd", "-n", "-l", f"127.0.0.1:{port}", "-c", "aiosmtpd.handlers.Mailbox"]
        if tls:
            args[4:4] = ["--tlscert", str(tls[0]), "--tlskey", str(tls[1])]
        self.proc = subprocess.Popen([*args, str(self.maildir)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    err = self.proc.stderr.read() if self.proc.stderr else b""
                    raise RuntimeError(f"aiosmtpd did not start: {err!r}") from None
                time.sleep(0.1)

    def messages(self) -> list[Message]:
        if not self.maildir.exists():
            return []
        return [m for _, m in mailbox.Maildir(self.maildir).items()]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


@pytest.fixture()
def world(tmp_path: Path) -> Iterator[dict[str, object]]:
    doc = yaml.safe_load(example_site().read_text())
    doc["notify"] = {"email": RECIPIENTS}
    sites_dir = tmp_path / "sites"
    sites_dir.mkdir()
    (sites_dir / "a.yaml").write_text(yaml.safe_dump(doc))
    doc2 = dict(doc, site={**doc["site"], "id": "quiet"}, notify={"email": []})
    (sites_dir / "quiet.yaml").write_text(yaml.safe_dump(doc2))
    sites = load_sites([sites_dir], ProfileLibrary())
    book = WorkOrders(tmp_path / "alerts.db", ManualClock(NOW - timedelta(hours=1)))
    overdue = book.open_for(storm_event("riverside-commons"), timezone="America/New_York")[0]
    soon = book.open_for(Event(kind="basin_cleanout_due", site="riverside-commons", event_time=NOW, rule="R3",
                               citation="Ch. 133 §133-7A(1)", occurrence="basin:1", due_at=NOW + timedelta(hours=3),
                               message="sediment fills 50.3% of the design volume"),
                         timezone="America/New_York")[0]
    later = book.open_for(Event(kind="turbidity_contrast", site="riverside-commons", event_time=NOW, rule="R2",
                                citation="Ch. 133 §133-6C", occurrence="turbidity:1", due_at=NOW + timedelta(hours=24),
                                message="possible turbidity violation"), timezone="America/New_York")[0]
    book.open_for(storm_event("quiet"), timezone="America/New_York")  # a site without recipients
    yield {"book": book, "sites": sites, "ledger": tmp_path / "web.db", "root": tmp_path,
           "orders": {"overdue": overdue.id, "soon": soon.id, "later": later.id}}
    book.close()


def _notifier(world: dict[str, object], port: int, clock: list[float], now: list[object],
              **kw: object) -> Notifier:
    smtp = SmtpSettings.from_url(f"smtp://127.0.0.1:{port}", "stormwatch@village.example", env={})
    return Notifier(world["book"], world["sites"], world["ledger"], smtp,  # type: ignore[arg-type]
                    lambda: now[0], wall=lambda: clock[0], retry_base_s=30, **kw)  # type: ignore[arg-type,return-value]


def _header(msg: Message, name: str) -> str:
    """A header unfolded (RFC 5322 §2.2.3: remove the CRLFs of folding)."""
    return str(msg[name]).replace("\r\n", "").replace("\n", "")


def _ics(msg: Message) -> Calendar:
    (part,) = [p for p in msg.walk() if p.get_content_type() == "text/calendar"]
    assert part.get_filename().endswith(".ics")
    return Calendar.from_ical(part.get_payload(decode=True))


def test_mail_for_each_stage_to_the_sites_recipients_sent_once(world: dict[str, object], tmp_path: Path) -> None:
    server = SmtpServer(tmp_path / "smtp", free_port())
    clock, now = [1_000.0], [NOW]
    orders = world["orders"]
    try:
        notifier = _notifier(world, server.port, clock, now)
        assert notifier.scan() == 3  # the site without recipients gets none
        assert notifier.deliver() == 3
        got = {m["Message-ID"]: m for m in server.messages()}
        assert set(got) == {f"<{orders['overdue']}.overdue@stormwatch>", f"<{orders['soon']}.due_soon@stormwatch>",
                            f"<{orders['later']}.opened@stormwatch>"}
        overdue = got[f"<{orders['overdue']}.overdue@stormwatch>"]
        # due NOW - 30 min = 15:30 UTC = 11:30 EDT, the site's zone
        assert _header(overdue, "Subject") == ("[stormwatch] OVERDUE: storm inspection at Riverside Commons, "
                                               f"Phase 2 due Tue 02 Jun 2026 11:30 EDT ({orders['overdue']})")
        assert _header(overdue, "X-RcptTo") == ", ".join(RECIPIENTS) == _header(overdue, "To")
        assert overdue["X-MailFrom"] == "stormwatch@village.example"
        body = overdue.get_payload()[0].get_payload(decode=True).decode()
        assert "Due:       Tue 02 Jun 2026 11:30 EDT (0.5 hours past due)" in body and "Ch. 133 §133-7A(2)" in body
        (entry,) = _ics(overdue).walk("VEVENT")
        assert entry.decoded("dtstart") == NOW - timedelta(minutes=30)
        assert str(entry["uid"]) == f"{orders['overdue']}@stormwatch"
        soon = got[f"<{orders['soon']}.due_soon@stormwatch>"]
        assert _header(soon, "Subject").startswith(
            "[stormwatch] Due soon: basin cleanout at Riverside Commons, Phase 2 due Tue 02 Jun 2026 15:00 EDT")
        # a restart: the same ledger, nothing sent twice
        notifier.close()
        again = _notifier(world, server.port, clock, now)
        assert again.scan() == 0 and again.deliver() == 0
        assert len(server.messages()) == 3
        # 19 h later the 24-hour order is due within 6 h: one more mail; one completed meanwhile gets none
        world["book"].complete(orders["soon"], "Ina", "basin cleaned out")  # type: ignore[attr-defined]
        now[0] = NOW + timedelta(hours=19)
        assert again.scan() == 1 and again.deliver() == 1
        assert {m["Message-ID"] for m in server.messages()} - set(got) == {f"<{orders['later']}.due_soon@stormwatch>"}
        assert {(o, k, s) for o, k, s, _, _ in again.ledger()} == {
            (orders["overdue"], "overdue", "sent"), (orders["soon"], "due_soon", "sent"),
            (orders["later"], "opened", "sent"), (orders["later"], "due_soon", "sent")}
        again.close()
    finally:
        server.stop()


def test_a_server_away_is_retried_with_backoff_and_counted(world: dict[str, object], tmp_path: Path,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()
    clock, now = [1_000.0], [NOW]
    notifier = _notifier(world, port, clock, now, max_attempts=3)
    caplog.set_level(logging.WARNING, logger="stormwatch.web.notify")
    assert notifier.scan() == 3
    assert notifier.deliver() == 0  # nothing listens on the port
    assert {(k, s, a) for _, k, s, a, _ in notifier.ledger()} == {
        ("overdue", "pending", 1), ("due_soon", "pending", 1), ("opened", "pending", 1)}
    assert "ConnectionRefusedError" in notifier.ledger()[0][4]
    assert notifier.metrics.failures.labels("overdue")._value.get() == 1
    assert sum("retrying in 30 s" in r.getMessage() for r in caplog.records) == 3
    clock[0] += 29
    assert notifier.deliver() == 0 and notifier.ledger()[0][3] == 1  # not yet: the backoff is 30 s
    server = SmtpServer(tmp_path / "smtp", port)
    try:
        clock[0] += 1
        assert notifier.deliver() == 3
        assert len(server.messages()) == 3
        assert notifier.metrics.sent.labels("overdue")._value.get() == 1
    finally:
        server.stop()
    # a server that stays away: 30 s, 60 s, then abandoned at the third attempt, with an ERROR
    book: WorkOrders = world["book"]  # type: ignore[assignment]
    book.open_for(Event(kind="storm_inspection_due", site="riverside-commons", event_time=NOW, rule="R1",
                        citation="Ch. 133 §133-7A(2)", occurrence="storm:2", due_at=NOW + timedelta(hours=30),
                        message="storm of 0.62 in"), timezone="America/New_York")
    assert notifier.scan() == 1
    for wait in (0, 30, 60):
        clock[0] += wait
        notifier.deliver()
    assert [s for _, k, s, _, _ in notifier.ledger() if k == "opened"][-1] == "abandoned"
    assert notifier.metrics.abandoned.labels("opened")._value.get() == 1
    assert any(r.levelname == "ERROR" and "abandoned after 3 attempts" in r.getMessage() for r in caplog.records)
    notifier.close()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl to make a test certificate")
def test_starttls(world: dict[str, object], tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                    "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    server = SmtpServer(tmp_path / "smtp", free_port(), tls=(cert, key))
    try:
        smtp = SmtpSettings.from_url(f"smtp+starttls://127.0.0.1:{server.port}", "stormwatch@village.example",
                                     env={}, ca_file=str(cert))
        notifier = Notifier(world["book"], world["sites"], world["ledger"], smtp,  # type: ignore[arg-type]
                            lambda: NOW)
        notifier.scan()
        assert notifier.deliver() == 3 and len(server.messages()) == 3
        notifier.close()
    finally:
        server.stop()


def test_smtp_urls() -> None:
    s = SmtpSettings.from_url("smtp+starttls://mailer%40village@mail.village.example", "a@b.c",
                              env={"STORMWATCH_SMTP_PASSWORD": "s3cret"})
    assert (s.host, s.port, s.security, s.username, s.password) == \
        ("mail.village.example", 587, "starttls", "mailer@village", "s3cret")
    assert "s3cret" not in repr(s) and s.safe_url() == "smtp+starttls://mailer@village@mail.village.example:587"
    assert SmtpSettings.from_url("smtps://h", "a@b.c", env={}).port == 465
    with pytest.raises(ValueError, match="use smtp://host"):
        SmtpSettings.from_url("http://h", "a@b.c", env={})
