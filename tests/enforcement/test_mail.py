"""E-mail and iCalendar for each enforcement deadline, through a real SMTP server (aiosmtpd on a TCP
port): opened when the deadline is set, due soon the day before, cancelled when met first; the .ics
holds the last day as an all-day entry."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime
from email import message_from_bytes
from email.message import Message
from pathlib import Path
from typing import Any

import pytest
import yaml
from icalendar import Calendar

from stormwatch.alerts.workorders import WorkOrders
from stormwatch.clock import ManualClock
from stormwatch.enforcement.cases import EnforcementBook
from stormwatch.profiles import ProfileLibrary
from stormwatch.resources import example_site
from stormwatch.web.notify import Notifier, SmtpSettings
from stormwatch.web.overview import load_sites
from stormwatch.web.server import free_port
from tests.enforcement.support import draft, served
from tests.waits import wait_until

pytestmark = pytest.mark.slow  # an SMTP server

RECIPIENTS = ["carl@contractor.example", "smo@village.example"]


class _Inbox:
    """aiosmtpd's handler: every message received, as parsed bytes."""

    def __init__(self) -> None:
        self.messages: list[Message] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # aiosmtpd calls it by this name
        self.messages.append(message_from_bytes(envelope.content))
        return "250 OK"


@pytest.fixture()
def smtp() -> Iterator[tuple[int, _Inbox]]:
    from aiosmtpd.controller import Controller

    inbox = _Inbox()
    port = free_port()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    yield port, inbox
    controller.stop()


def _noon(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, 16, tzinfo=UTC)  # 12:00 EDT


def test_each_deadline_is_mailed_with_its_citation_and_an_ics(tmp_path: Path, smtp: tuple[int, _Inbox]) -> None:
    port, inbox = smtp
    doc = yaml.safe_load(example_site().read_text(encoding="utf-8"))
    doc["notify"] = {"email": RECIPIENTS}
    (tmp_path / "site.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    sites = load_sites([tmp_path / "site.yaml"], ProfileLibrary())
    clock = ManualClock(_noon(date(2026, 6, 30)))
    cases = EnforcementBook(tmp_path / "enforcement.db", clock)
    case = draft(cases, "ch133", date(2026, 6, 29), correct_by=date(2026, 7, 20))
    served(cases, case, date(2026, 6, 30))
    notifier = Notifier(WorkOrders(tmp_path / "alerts.db", clock), sites, tmp_path / "web.db",
                        SmtpSettings.from_url(f"smtp://127.0.0.1:{port}", "stormwatch@village.example", env={}),
                        clock.now, cases=cases, base_url="https://desk.village.example")
    assert notifier.scan() == 2 and notifier.deliver() == 2  # the appeal window and the correction, set
    wait_until(lambda: len(inbox.messages) == 2, 10, "two mails")
    mails = {str(m["Message-ID"]): m for m in inbox.messages}
    appeal = mails["<EC-2026-001.appeal.opened@stormwatch>"]
    assert str(appeal["Subject"]).replace("\n", "").replace("\r", "") == (
        "[stormwatch] New: appeal window closes Tue 2026-07-07 -- EC-2026-001 at Riverside Commons, Phase 2")
    assert str(appeal["To"]) == ", ".join(RECIPIENTS)
    body = next(p for p in appeal.walk() if p.get_content_type() == "text/plain").get_payload(decode=True).decode()
    assert "Last day:  Tue 2026-07-07 (7 days left; site-local)" in body
    assert "Set by:    Ch. 133 §133-10A(6); Ch. 133 §133-11" in body and "within seven calendar days" in body
    assert "https://desk.village.example/enforcement/EC-2026-001" in body
    ics = next(p for p in appeal.walk() if p.get_content_type() == "text/calendar")
    (entry,) = Calendar.from_ical(ics.get_payload(decode=True)).walk("VEVENT")
    assert entry.decoded("dtstart") == date(2026, 7, 7) and str(entry["uid"]) == "EC-2026-001-appeal@stormwatch"
    # the day before the last day: due soon; nothing twice
    clock.set(_noon(date(2026, 7, 6)))
    assert notifier.scan() == 1
    # the appeal filed before the mail went out: cancelled, and the hearing's clock starts (15 days: 21 July)
    cases.record(case.id, "appeal_filed", date(2026, 7, 6), "Sam SMO")
    assert notifier.deliver() == 0
    assert ("EC-2026-001/appeal", "due_soon", "cancelled") in {(o, k, s) for o, k, s, _, _ in notifier.ledger()}
    assert notifier.scan() == 1 and notifier.deliver() == 1
    wait_until(lambda: len(inbox.messages) == 3, 10, "the hearing's mail")
    assert "appeal to be heard by Tue 2026-07-21" in str(inbox.messages[-1]["Subject"]).replace("\n", "")
    notifier.close()
