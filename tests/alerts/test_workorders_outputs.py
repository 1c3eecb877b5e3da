"""Work-order outputs: the iCalendar feed of due dates, the webhook with retries (against a real
local HTTP server), and inspection_overdue at the deadline from the service on real Mosquitto."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import ClassVar

import paho.mqtt.client as mqtt
from icalendar import Calendar
from paho.mqtt.enums import CallbackAPIVersion
from typer.testing import CliRunner

from stormwatch import topics
from stormwatch.alerts.service import AlertService
from stormwatch.alerts.webhook import Webhook
from stormwatch.alerts.workorders import WorkOrders
from stormwatch.app.cli import app
from stormwatch.clock import ManualClock
from stormwatch.contract import Event
from stormwatch.profiles import ProfileLibrary
from tests.alerts_support import T0, site
from tests.names import run_unique
from tests.waits import wait_until

LAST_TIP = T0 + timedelta(minutes=49)


def storm_due() -> Event:
    return Event(kind="storm_inspection_due", site="s1", event_time=LAST_TIP + timedelta(hours=6), rule="R1",
                 citation="Ch. 133 §133-7A(2)", occurrence="storm:2026-06-01T12:00:00Z",
                 due_at=LAST_TIP + timedelta(hours=24), tips=50, depth_in=0.5)


def test_ical_feed_lists_due_dates(tmp_path: Path) -> None:
    book = WorkOrders(tmp_path / "state.db", ManualClock(T0 + timedelta(hours=7)))
    order, _ = book.open_for(storm_due())
    book.close()
    out = CliRunner().invoke(app, ["workorders", "ical", "--state", str(tmp_path / "state.db")])
    assert out.exit_code == 0, out.output
    cal = Calendar.from_ical(out.output)
    (entry,) = [c for c in cal.walk("VEVENT")]
    assert str(entry["uid"]) == f"{order.id}@stormwatch"
    assert entry.decoded("dtstart") == LAST_TIP + timedelta(hours=24)  # 2026-06-02 12:49 UTC
    assert "storm inspection due" in str(entry["summary"]) and "§133-7A(2)" in str(entry["description"])


class _Receiver(BaseHTTPRequestHandler):
    answers: ClassVar[list[int]] = []
    bodies: ClassVar[list[bytes]] = []

    def do_POST(self) -> None:
        self.bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
        code = self.answers.pop(0) if self.answers else 200
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def _serve(answers: list[int]) -> tuple[HTTPServer, type[_Receiver]]:
    handler = type("Receiver", (_Receiver,), {"answers": list(answers), "bodies": []})
    server = HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, handler


def test_webhook_retries_with_exponential_backoff_until_accepted() -> None:
    server, handler = _serve([503, 503, 200])
    clock = ManualClock(T0)
    try:
        hook = Webhook(f"http://127.0.0.1:{server.server_port}/hook", clock, attempts=5, base_delay_s=2.0)
        result = hook.deliver(storm_due())
    finally:
        server.shutdown()
    assert result.ok and result.attempts == 3 and result.status == 200
    assert clock.now() == T0 + timedelta(seconds=2 + 4)  # waited 2 s then 4 s (base 2 s, doubling)
    assert len(handler.bodies) == 3
    body = json.loads(handler.bodies[-1])
    assert body["kind"] == "storm_inspection_due" and body["due_at"] == "2026-06-02T12:49:00Z"


def test_webhook_does_not_retry_a_rejection_and_gives_up_on_a_dead_receiver() -> None:
    server, handler = _serve([400])
    clock = ManualClock(T0)
    try:
        result = Webhook(f"http://127.0.0.1:{server.server_port}/", clock, attempts=4).deliver(storm_due())
    finally:
        server.shutdown()
        server.server_close()
    assert not result.ok and result.attempts == 1 and result.status == 400 and len(handler.bodies) == 1
    dead = Webhook(f"http://127.0.0.1:{server.server_port}/", clock, attempts=3, base_delay_s=1.0,
                   timeout_s=1.0).deliver(storm_due())
    assert not dead.ok and dead.attempts == 3 and dead.status is None
    assert clock.now() == T0 + timedelta(seconds=1 + 2)


def test_overdue_at_the_deadline_over_mqtt_and_restart_does_not_repeat(mosquitto_server, tmp_path: Path) -> None:
    state = tmp_path / "state.db"
    clock = ManualClock(LAST_TIP + timedelta(hours=7))
    book = WorkOrders(state, clock)
    order, _ = book.open_for(storm_due())
    book.close()
    wire: list[dict] = []
    got = threading.Event()
    sub = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=run_unique("overdue-sub"), protocol=mqtt.MQTTv311)
    sub.on_message = lambda c, u, m: (wire.append(json.loads(m.payload)), got.set())
    sub.connect("127.0.0.1", mosquitto_server.port)
    sub.subscribe(topics.events("s1"), qos=1)
    sub.loop_start()
    server, handler = _serve([])

    emitted: list[Event] = []

    def run_service(name: str) -> AlertService:
        svc = AlertService([site("ch133")], ProfileLibrary(), mosquitto_server.url, None, state, clock,
                           client_id=run_unique(name), overdue_check_s=0.05, on_event=emitted.append,
                           webhook_url=f"http://127.0.0.1:{server.server_port}/")
        threading.Thread(target=svc.run, daemon=True).start()
        assert svc.connected.wait(10)
        return svc

    def two_checks(svc: AlertService) -> None:
        """Wait until the service has looked at the orders twice at the clock's present time."""
        done = svc.overdue_checks
        wait_until(lambda: svc.overdue_checks >= done + 2, what="two overdue checks")

    try:
        svc = run_service("overdue-a")
        two_checks(svc)
        assert emitted == []  # 7 h after the storm: not yet due
        clock.set(LAST_TIP + timedelta(hours=24))  # exactly the deadline: not yet overdue
        two_checks(svc)
        assert emitted == []
        clock.set(LAST_TIP + timedelta(hours=24, seconds=1))
        assert got.wait(10)
        svc.stop()
        wait_until(lambda: len(handler.bodies) >= 1, what="the webhook's delivery")
        (overdue,) = wire
        assert overdue["kind"] == "inspection_overdue" and overdue["work_order"] == order.id
        assert overdue["due_at"] == "2026-06-02T12:49:00Z"
        assert json.loads(handler.bodies[0])["kind"] == "inspection_overdue"  # the webhook got it too
        svc2 = run_service("overdue-b")  # a restart: the order is already overdue, nothing repeats
        two_checks(svc2)
        svc2.stop()
        assert [e.kind for e in emitted] == ["inspection_overdue"] and len(wire) == 1
        book = WorkOrders(state, clock)
        (only,) = book.list()
        assert only.id == order.id and only.status == "open"  # overdue is a flag, not a status
        assert only.overdue_at == LAST_TIP + timedelta(hours=24, seconds=1)
        assert [c.action for c in book.history(order.id)] == ["opened", "overdue"]
    finally:
        sub.loop_stop()
        server.shutdown()
