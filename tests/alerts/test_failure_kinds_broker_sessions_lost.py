"""Failure kind #22 (docs/reference/failure-kinds.md), "Subscriptions lost after a broker restart":
restart the broker and ingest and the alert service still receive every reading afterwards --
here the hard case: the broker comes back having LOST every session (its persistence file wiped,
as a broker redeployed without its volume), so no subscription survives and a client that
subscribed only when ``session present`` was false the first time would hear nothing again.

Every stormwatch client subscribes again on every connect, whatever the session flag
(stormwatch/runtime/mqttsession.py ``on_session``). On a real Mosquitto: 50 readings before, the broker
stopped, ``mosquitto.db`` deleted, the broker started on the same port; both services reconnect
by themselves (reporting ``session present: False``); 50 readings after. Ingest stores all 100,
once each (its own store, its own counter), and the alert service hands all 100 to its engine
(its own counter) -- no test callback in between.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path

import pytest

from stormwatch.app import servers
from stormwatch.clock import ManualClock
from stormwatch.config import load_site
from stormwatch.profiles import ProfileLibrary
from stormwatch.stores.sqlite import SqliteStore
from tests.alerts_support import live_service
from tests.ingest_support import REPO, SITE, T0, Publisher, Running, wire
from tests.waits import wait_until

pytestmark = pytest.mark.mosquitto

BEFORE = range(1, 51)
AFTER = range(51, 101)


def _session_flags(caplog: pytest.LogCaptureFixture, logger: str) -> list[bool]:
    """``session present`` of every connect ``logger`` logged, in order."""
    out = []
    for r in caplog.records:
        text = r.getMessage()
        if r.name == logger and text.startswith("connected to ") and "(session present: " in text:
            out.append("(session present: True" in text)
    return out


def test_ingest_and_alerts_hear_every_reading_after_a_broker_restart_that_lost_its_sessions(
        own_mosquitto: servers.Mosquitto, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    store = SqliteStore(tmp_path / "ingest.db")
    # ingest's clock stands after the readings' event times (T0 + 1..100 min)
    ingest = Running(own_mosquitto, store, client_id="sessions-lost-ingest",
                     clock=ManualClock(T0 + timedelta(hours=2), on_sleep="wait"))
    cfg = load_site(REPO / "examples" / "site.yaml", ProfileLibrary())
    (tmp_path / "alerts").mkdir()
    try:
        with live_service(cfg, own_mosquitto.url, tmp_path / "alerts", ManualClock(T0), "sessions-lost-alerts") \
                as (service, _events, _alert_store):
            pub = Publisher(own_mosquitto)
            try:
                for seq in BEFORE:
                    pub.send(wire(seq))
            finally:
                pub.close()
            wait_until(lambda: ingest.ingest.written == 50 and service.readings_seen == 50,
                       what="50 readings stored by ingest and seen by the alert service before the restart")

            # The broker goes away and comes back without any session: its persistence is wiped.
            own_mosquitto.stop()
            persisted = own_mosquitto.data_dir / "mosquitto.db"
            assert persisted.is_file(), "the broker had saved its sessions (else nothing would be lost)"
            persisted.unlink()
            wait_until(lambda: ingest.ingest.session.losses >= 1 and service.session.losses >= 1,
                       what="both services to notice the broker is gone")
            own_mosquitto.start()

            def resubscribed() -> bool:
                return (ingest.ingest.session.connects >= 2 and ingest.ingest.wait_connected(0)
                        and service.session.connects >= 2 and service.connected.is_set())

            wait_until(resubscribed, timeout_s=60, what="ingest and the alert service to reconnect by themselves")
            # both were told the broker had no session for them -- and subscribed anyway
            assert _session_flags(caplog, "stormwatch.ingest.consumer")[-1] is False
            assert _session_flags(caplog, "stormwatch.alerts.service")[-1] is False

            pub = Publisher(own_mosquitto)
            try:
                for seq in AFTER:
                    pub.send(wire(seq))
            finally:
                pub.close()
            wait_until(lambda: ingest.ingest.written == 100 and service.readings_seen == 100, timeout_s=30,
                       what="every reading after the restart stored by ingest and seen by the alert service")
    finally:
        ingest.stop()
    stored = store.query_readings(SITE)
    store.close()
    assert sorted(r.seq for r in stored) == [*BEFORE, *AFTER]  # every reading, once
    assert ingest.ingest.duplicates == 0
