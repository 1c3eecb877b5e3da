"""stormwatch.alerts.grafana against a real HTTP peer: a local server that answers like Grafana's
``POST /api/annotations`` and records every request (headers and JSON body)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from stormwatch.alerts.grafana import GrafanaAnnotations
from stormwatch.contract import Event

TOKEN = "glsa_test_token"
T0 = datetime(2026, 6, 1, 5, 0, tzinfo=UTC)


class FakeGrafana(ThreadingHTTPServer):
    """Grafana's annotation endpoint; ``status`` 200 adds, anything else refuses."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[tuple[str, dict[str, str], dict]] = []
        self.status = 200


class _Handler(BaseHTTPRequestHandler):
    server: FakeGrafana

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append((self.path, dict(self.headers), body))
        reply = {"id": len(self.server.requests), "message": "Annotation added"}
        if self.server.status != 200:
            reply = {"message": "internal error"}
        data = json.dumps(reply).encode()
        self.send_response(self.server.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture()
def grafana() -> Iterator[FakeGrafana]:
    srv = FakeGrafana()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _url(srv: FakeGrafana) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}"


STORM = Event(kind="storm_qualified", site="riverside-commons", event_time=T0.replace(hour=16), rule="R1",
              citation="Ch. 133 §133-7A(2)", occurrence="storm-1", message="0.50 in since 05:00",
              storm_start=T0, storm_end=T0.replace(hour=17), tips=50, depth_in=0.5)
BASIN = Event(kind="basin_cleanout_due", site="riverside-commons", event_time=T0.replace(hour=9), rule="R3",
              citation="Ch. 133 §133-7A(1)", occurrence="basin-1", message="51 % of design capacity lost",
              lost_capacity=0.51, work_order="WO-2")


def test_events_become_annotations(grafana: FakeGrafana) -> None:
    sink = GrafanaAnnotations(_url(grafana), TOKEN)
    assert sink.write_events([STORM, BASIN]) == 2
    assert [path for path, _, _ in grafana.requests] == ["/api/annotations"] * 2
    (_, headers, storm), (_, _, basin) = grafana.requests
    assert headers["Authorization"] == f"Bearer {TOKEN}"
    # storm: a region from the first tip (05:00Z) to the last (17:00Z), in ms since the epoch
    assert storm["time"] == 1780290000000 and storm["timeEnd"] == 1780290000000 + 12 * 3600 * 1000
    assert storm["tags"] == ["stormwatch", "riverside-commons", "storm_qualified", "R1"]
    assert storm["text"] == "storm_qualified (R1): 0.50 in since 05:00 [Ch. 133 §133-7A(2)]"
    # basin: a point at the event time (09:00Z)
    assert basin["time"] == basin["timeEnd"] == 1780290000000 + 4 * 3600 * 1000
    assert sink.written == 2 and sink.failed == 0


def test_repeats_are_skipped(grafana: FakeGrafana) -> None:
    sink = GrafanaAnnotations(_url(grafana), TOKEN)
    sink.write_event(STORM)
    assert sink.write_events([STORM]) == 0
    assert len(grafana.requests) == 1


def test_refusal_is_counted_and_logged_not_raised(grafana: FakeGrafana, caplog: pytest.LogCaptureFixture) -> None:
    grafana.status = 500
    sink = GrafanaAnnotations(_url(grafana), TOKEN)
    assert sink.write_events([BASIN]) == 0
    assert sink.failed == 1
    assert "basin_cleanout_due" in caplog.text and TOKEN not in caplog.text
    grafana.status = 200  # not remembered as pushed: the next attempt goes through
    assert sink.write_events([BASIN]) == 1


def test_grafana_down_is_counted() -> None:
    srv = FakeGrafana()
    url = _url(srv)
    srv.server_close()  # nothing listens there any more
    sink = GrafanaAnnotations(url, TOKEN, timeout_s=1.0)
    assert sink.write_events([STORM]) == 0 and sink.failed == 1


def test_from_env_needs_url_and_token() -> None:
    assert GrafanaAnnotations.from_env({}) is None
    assert GrafanaAnnotations.from_env({"STORMWATCH_GRAFANA_URL": "http://g:3000"}) is None
    sink = GrafanaAnnotations.from_env({"STORMWATCH_GRAFANA_URL": "http://g:3000", "STORMWATCH_GRAFANA_TOKEN": TOKEN})
    assert sink is not None and TOKEN not in repr(sink)
