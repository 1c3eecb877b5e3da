"""Work-order e-mail against a real SMTP server process (aiosmtpd, started by the test): recipients,
subject, the due time in site-local time, the .ics that parses back; sent once across a restart;
retried with backoff while the server is away; STARTTLS."""

from __future__ import annotations

import logging
import mailbox
import os
import shutil
import socket
import subprocess
import sys
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
from tests.conftest import REPO
from tests.waits import wait_until
from tests.web_support import NOW, storm_event

RECIPIENTS = ["ina@contractor.example", "smo@village.example"]


class SmtpServer:
    """``python -m aiosmtpd`` delivering into a Maildir (a separate process); with ``auth``
    (user, password) :mod:`tests.smtp_auth_server`, which requires STARTTLS (``tls``) and AUTH.
    Its standard error goes to :attr:`log` (``auth USER ok|refused`` lines)."""

    def __init__(self, root: Path, port: int, tls: tuple[Path, Path] | None = None,
                 auth: tuple[str, str] | None = None) -> None:
        self.maildir = root / "Maildir"
        root.mkdir(parents=True, exist_ok=True)
        self.log = root / "smtpd.log"
        self.port = port
        env = dict(os.environ)
        if auth is not None:
            assert tls is not None, "AUTH needs TLS"
            args = [sys.executable, "-m", "tests.smtp_auth_server", str(port), str(self.maildir), str(tls[0]),
                    str(tls[1]), auth[0]]
            env["SMTP_TEST_PASSWORD"] = auth[1]  # not on the command line
        else:
            args = [sys.executable, "-m", "aiosmtpd", "-n", "-l", f"127.0.0.1:{port}", "-c",
                    "aiosmtpd.handlers.Mailbox"]
            if tls:
                args[4:4] = ["--tlscert", str(tls[0]), "--tlskey", str(tls[1])]
            args.append(str(self.maildir))
        with self.log.open("wb") as err:
            self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err, env=env,
                                         cwd=REPO)

        def listening() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"SMTP server exited: {self.log.read_text()!r}")
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return True

        wait_until(listening, 20, "the SMTP server to listen", every_s=0.1, ignore=(OSError,))

    def auth_lines(self) -> list[str]:
        return [line for line in self.log.read_text().splitlines() if line.startswith("auth ")]

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


def _certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (openssl), as (cert, key). Without openssl the test is
    skipped, except under ``CI=true`` (``.ci/run`` installs it), where it fails."""
    if shutil.which("openssl") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but openssl is not installed (Debian: apt-get install openssl)")
        pytest.skip("needs openssl to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                    "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key


def test_starttls(world: dict[str, object], tmp_path: Path) -> None:
    cert, key = _certificate(tmp_path)
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


USER, SECRET = "mailer@village.example", "tr0ub4dor&3 horse"


def test_smtp_auth_wrong_password_keeps_mail_queued_and_the_right_one_delivers(
        world: dict[str, object], tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cert, key = _certificate(tmp_path)
    server = SmtpServer(tmp_path / "smtp", free_port(), tls=(cert, key), auth=(USER, SECRET))
    secret = tmp_path / "smtp_password"
    secret.write_text("not the password\n")
    url = f"smtp+starttls://{USER.replace('@', '%40')}@127.0.0.1:{server.port}"
    clock = [1_000.0]
    caplog.set_level(logging.INFO, logger="stormwatch.web.notify")
    try:
        smtp = SmtpSettings.from_url(url, "stormwatch@village.example", env={}, ca_file=str(cert),
                                     password_file=secret)
        notifier = Notifier(world["book"], world["sites"], world["ledger"], smtp,  # type: ignore[arg-type]
                            lambda: NOW, wall=lambda: clock[0], retry_base_s=30, max_attempts=2)
        assert notifier.scan() == 3
        assert notifier.deliver() == 0 and server.messages() == []
        # one login refused (smtplib tries each mechanism the server offers): the round stops there, no
        # second login with the same credentials
        refused = [f"auth {USER} refused (PLAIN, tls=True)", f"auth {USER} refused (LOGIN, tls=True)"]
        assert server.auth_lines() == refused
        assert notifier.metrics.auth_failures._value.get() == 1
        assert sum(notifier.metrics.failures.labels(k)._value.get() for k in ("opened", "due_soon", "overdue")) == 1
        assert {(s, a) for _, _, s, a, _ in notifier.ledger()} == {("pending", 0)}
        errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
        assert len(errors) == 1 and f"refused the login of '{USER}': 535" in errors[0]
        assert "every mail stays queued, next login in 30 s" in errors[0]
        assert any("535" in e for *_, e in notifier.ledger())
        # within the backoff nothing is tried; refused logins never abandon a mail (max_attempts=2)
        clock[0] += 29
        assert notifier.deliver() == 0 and server.auth_lines() == refused
        for wait in (1, 60, 120):
            clock[0] += wait
            assert notifier.deliver() == 0
        assert server.auth_lines() == refused * 4 and notifier.metrics.auth_failures._value.get() == 4
        assert "next login in 240 s" in caplog.records[-1].getMessage()
        assert {s for _, _, s, _, _ in notifier.ledger()} == {"pending"}
        assert notifier.metrics.abandoned.labels("overdue")._value.get() == 0
        notifier.close()
        # the operator fixes the secret and restarts: every queued mail goes out, once
        secret.write_text(SECRET + "\n")
        smtp = SmtpSettings.from_url(url, "stormwatch@village.example", env={}, ca_file=str(cert),
                                     password_file=secret)
        fixed = Notifier(world["book"], world["sites"], world["ledger"], smtp,  # type: ignore[arg-type]
                         lambda: NOW, wall=lambda: clock[0])
        assert fixed.scan() == 0 and fixed.deliver() == 3
        assert len(server.messages()) == 3 and {s for _, _, s, _, _ in fixed.ledger()} == {"sent"}
        assert server.auth_lines()[8:] == [f"auth {USER} ok (PLAIN, tls=True)"] * 3
        assert all(SECRET not in r.getMessage() and "not the password" not in r.getMessage()
                   for r in caplog.records)
        fixed.close()
    finally:
        server.stop()


def test_smtp_password_never_on_the_command_line(tmp_path: Path) -> None:
    url = "smtp+starttls://mailer@mail.village.example"
    secret = tmp_path / "pw"
    secret.write_text("s3cret\r\n")
    s = SmtpSettings.from_url(url, "a@b.c", env={"STORMWATCH_SMTP_PASSWORD": "from-env"}, password_file=secret)
    assert (s.username, s.password) == ("mailer", "s3cret")  # the file wins; its line break is not the password
    assert SmtpSettings.from_url(url, "a@b.c", env={"STORMWATCH_SMTP_PASSWORD": "from-env"}).password == "from-env"
    with pytest.raises(ValueError, match=r"no password in the URL .*--smtp-password-file") as exc:
        SmtpSettings.from_url("smtps://mailer:s3cret@mail.village.example", "a@b.c", env={})
    assert "s3cret" not in str(exc.value)
    with pytest.raises(ValueError, match="unencrypted connection would send the password in clear"):
        SmtpSettings.from_url("smtp://mailer@mail.village.example", "a@b.c", env={"STORMWATCH_SMTP_PASSWORD": "x"})
    with pytest.raises(ValueError, match="user 'mailer' but no password"):
        SmtpSettings.from_url(url, "a@b.c", env={})
    with pytest.raises(ValueError, match=r"--smtp-password-file .*/missing: cannot read it"):
        SmtpSettings.from_url(url, "a@b.c", env={}, password_file=tmp_path / "missing")
    with pytest.raises(ValueError, match="no user in the URL"):
        SmtpSettings.from_url("smtps://mail.village.example", "a@b.c", env={}, password_file=secret)
