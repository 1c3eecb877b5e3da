"""Ingest observability: Prometheus metrics scraped from the real HTTP endpoint, and the periodic
counter log line (issue 6, item 6). Messages go through a real Mosquitto into SQLite."""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path

import pytest

from stormwatch.app import servers
from stormwatch.clock import ManualClock
from stormwatch.ingest.metrics import serve_metrics
from stormwatch.stores.sqlite import SqliteStore
from tests.ingest_support import T0, Publisher, Running, scrape, wire
from tests.waits import wait_until

pytestmark = pytest.mark.mosquitto


def test_metrics_endpoint_and_log_line(own_mosquitto: servers.Mosquitto, tmp_path: Path,
                                       caplog: pytest.LogCaptureFixture) -> None:
    store = SqliteStore(tmp_path / "m.db")
    now = T0 + timedelta(minutes=10)
    run = Running(own_mosquitto, store, clock=ManualClock(now, on_sleep="wait"), batch_ms=20)
    server = serve_metrics(run.ingest, 0)
    pub = Publisher(own_mosquitto)
    try:
        before = scrape(server.server_port)
        assert before[("stormwatch_ingest_received_total", ())] == 0
        assert ("stormwatch_ingest_lag_seconds", ()) not in before  # nothing written yet: no lag to report

        pub.send(wire(1, 10.0))                       # 12:01
        pub.send(wire(4, 11.0))                       # 12:04, the newest event time written
        pub.send(wire(2, 12.0, unit="FNU"))           # the Y511 profile says NTU -> unit_mismatch
        pub.send(wire(3, 13.0, time=(now + timedelta(hours=1)).isoformat()))  # 1 h ahead -> future_time
        pub.send(wire(1, 10.0))                       # the same identity again -> duplicate
        wait_until(lambda: run.ingest.acked == 5, what="5 acknowledged")
        got = scrape(server.server_port)
        with caplog.at_level(logging.INFO, logger="stormwatch.ingest.consumer"):
            run.ingest.log_stats()
    finally:
        pub.close()
        run.stop()
        server.shutdown()
        store.close()
    assert got[("stormwatch_ingest_received_total", ())] == 5
    assert got[("stormwatch_ingest_written_total", ())] == 2
    assert got[("stormwatch_ingest_acked_total", ())] == 5
    assert got[("stormwatch_ingest_unacked", ())] == 0
    assert got[("stormwatch_ingest_retries_total", ())] == 0
    # One MQTT connection, never lost, taken over or found dead.
    assert got[("stormwatch_ingest_mqtt_connects_total", ())] == 1
    for name in ("disconnects", "session_takeovers", "dead_connections"):
        assert got[(f"stormwatch_ingest_mqtt_{name}_total", ())] == 0
    dead = {labels[0][1]: v for (name, labels), v in got.items() if name == "stormwatch_ingest_dead_lettered_total"}
    assert dead == {"duplicate": 1, "future_time": 1, "unit_mismatch": 1}
    # Lag = clock now (12:10) - event time of the newest live reading written (12:04) = 6 min.
    assert got[("stormwatch_ingest_lag_seconds", ())] == 360.0
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("ingest: received="))
    assert "received=5 written=2" in line and "acked=5 unacked=0" in line and "lag_s=360.0" in line
    assert "'unit_mismatch': 1" in line and "'future_time': 1" in line and "'duplicate': 1" in line
