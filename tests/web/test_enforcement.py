"""The enforcement desk over HTTP (Starlette's test client, the real application, store, books and
accounts): the SMO opens a case from a work order, completes and issues the notice; the site's
contractor then sees it, its deadlines and its stop-work order; everyone else is refused; every action
is the SMO's, with the session's CSRF token; a refused action records nothing."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from starlette.testclient import TestClient

from stormwatch.clock import ManualClock
from stormwatch.enforcement.cases import EnforcementBook
from stormwatch.web.accounts import Accounts
from tests.web_support import NOW, PASSWORD, A, B, build, client, login


def _world(tmp_path: Path) -> dict[str, object]:
    world = build(tmp_path)
    accounts = Accounts(Path(str(world["state"])) / "web.db")
    accounts.add("otto", "contractor", PASSWORD, sites=[B], display_name="Otto Other")
    accounts.close()
    return world


def _as(world: dict[str, object], user: str) -> tuple[TestClient, str]:
    c = client(world)
    return c, login(c, user)


def _history(world: dict[str, object], case: str) -> list[str]:
    book = EnforcementBook(Path(str(world["state"])) / "enforcement.db", ManualClock(NOW))
    try:
        return [f"{e.kind} {e.on}" for e in book.history(case)]
    finally:
        book.close()


def test_the_smo_drafts_issues_and_serves_and_the_site_sees_it(tmp_path: Path) -> None:
    world = _world(tmp_path)
    oid = world["orders"][A]  # type: ignore[index]
    sam, token = _as(world, "sam")
    assert "Open an enforcement case" in sam.get(f"/orders/{oid}").text
    r = sam.post(f"/orders/{oid}/enforcement", data={"csrf_token": token})
    assert r.status_code == 303 and r.headers["location"] == "/enforcement/EC-2026-001?done=opened"
    page = sam.get("/enforcement/EC-2026-001").text
    assert "Not ready to issue" in page and "storm of 0.50 in" in page and "Ch. 133 §133-7A(2)" in page
    assert "EC-2026-001" in sam.get(f"/orders/{oid}").text  # the order links its case
    carl, carl_token = _as(world, "carl")
    assert carl.get("/enforcement/EC-2026-001").status_code == 403  # a draft is the SMO's
    assert "EC-2026-001" not in carl.get("/").text
    r = sam.post("/enforcement/EC-2026-001/edit", data={
        "csrf_token": token, "party": "Riverside Builders LLC", "address": "12 Mill Road", "location": "Lot 4",
        "nature": "No inspection within 24 hours of the storm.", "violated": "Ch. 133 §133-7A(2)",
        "remedy": "Inspect the controls and keep the log book.", "correct_by": "2026-06-05"})
    assert r.status_code == 303
    for form in ({"action": "nov-issued", "on": "2026-06-02"},
                 {"action": "nov-served", "on": "2026-06-02", "method": "hand"}):
        assert sam.post("/enforcement/EC-2026-001/record", data={"csrf_token": token, **form}).status_code == 303
    page = carl.get("/enforcement/EC-2026-001")
    assert page.status_code == 200
    row = re.search(r'<tr data-deadline="appeal".*?</tr>', page.text, re.S)
    assert row and "Tue 2026-06-09" in row.group(0)  # 2 June + 7 days, by both sections
    assert "Ch. 133 §133-10A(6); Ch. 133 §133-11" in row.group(0)
    assert "record-form" not in page.text  # the contractor reads, the SMO records
    assert "EC-2026-001" in carl.get("/").text and "EC-2026-001" in carl.get(f"/sites/{A}").text
    # the contractor may not record; another site's contractor may not see; a POST without the token is refused
    r = carl.post("/enforcement/EC-2026-001/record", data={"csrf_token": carl_token, "action": "resolved",
                                                            "on": "2026-06-02"})
    assert r.status_code == 403 and "only the SMO" in r.text
    otto, _ = _as(world, "otto")
    assert otto.get("/enforcement/EC-2026-001").status_code == 403
    assert otto.get("/enforcement/EC-2026-001/letter.pdf").status_code == 403
    assert "EC-2026-001" not in otto.get("/enforcement").text
    before = _history(world, "EC-2026-001")
    assert sam.post("/enforcement/EC-2026-001/record", data={"action": "resolved", "on": "2026-06-02"}
                    ).status_code == 403
    r = sam.post("/enforcement/EC-2026-001/record", data={"csrf_token": token, "action": "decision",
                                                           "on": "2026-06-02", "outcome": "upheld"})
    assert r.status_code == 409 and "Not recorded: no appeal filed is recorded" in r.text
    assert _history(world, "EC-2026-001") == before
    # a stop-work order: a banner on the site page and the portfolio
    for form in ({"action": "stop-work-issued", "on": "2026-06-02"},
                 {"action": "stop-work-served", "on": "2026-06-02", "method": "hand"}):
        assert sam.post("/enforcement/EC-2026-001/record", data={"csrf_token": token, **form}).status_code == 303
    for path in ("/", f"/sites/{A}"):
        assert "STOP-WORK ORDER in effect" in carl.get(path).text
    letter = carl.get("/enforcement/EC-2026-001/letter.pdf")
    assert letter.status_code == 200 and letter.headers["content-type"] == "application/pdf"
    assert carl.get("/enforcement/register.csv").status_code == 403
    rows = list(csv.DictReader(io.StringIO(sam.get("/enforcement/register.csv").text)))
    assert [(r["case"], r["enforcement_type"]) for r in rows] == [("EC-2026-001", "notice of violation"),
                                                                  ("EC-2026-001", "stop-work order")]
    ics = carl.get("/enforcement/calendar.ics").text
    assert "appeal window closes -- EC-2026-001" in ics and "DTSTART;VALUE=DATE:20260609" in ics


def test_the_smo_adds_another_orders_evidence_to_a_draft(tmp_path: Path) -> None:
    from datetime import timedelta

    from stormwatch.alerts.workorders import WorkOrders
    from stormwatch.contract import Event

    world = _world(tmp_path)
    book = WorkOrders(Path(str(world["state"])) / "alerts.db", ManualClock(NOW))
    basin = book.open_for(Event(kind="basin_cleanout_due", site=A, event_time=NOW - timedelta(hours=2), rule="R3",
                                citation="Ch. 133 §133-7A(1)", occurrence="basin:2026-06-02T14:00:00Z",
                                due_at=NOW + timedelta(hours=70), message="50.4 % of design storage lost",
                                evidence=[{"time": "2026-06-02T14:00:00Z", "sediment_depth_ft": 2.57}]),
                          timezone="America/New_York")[0]
    book.close()
    sam, token = _as(world, "sam")
    assert sam.post(f"/orders/{world['orders'][A]}/enforcement",  # type: ignore[index]
                    data={"csrf_token": token}).status_code == 303
    assert "Add this order's evidence to the draft EC-2026-001" in sam.get(f"/orders/{basin.id}").text
    carl, carl_token = _as(world, "carl")
    assert carl.post("/enforcement/EC-2026-001/evidence", data={"csrf_token": carl_token, "order": basin.id}
                     ).status_code == 403
    r = sam.post("/enforcement/EC-2026-001/evidence", data={"csrf_token": token, "order": basin.id})
    assert r.status_code == 303
    page = sam.get("/enforcement/EC-2026-001").text
    assert f'href="/orders/{basin.id}"' in page and "sediment depth (settled)" in page and "2.57 ft" in page
    assert "holding this order's evidence" in sam.get(f"/orders/{basin.id}").text
