"""The MQTT session every stormwatch client shares (``stormwatch/mqttsession.py``), on a real Mosquitto.

Dead link (issue 12.2): a TCP proxy between the clients and the broker stops forwarding without
closing (a NAT mapping that timed out). The gateway publisher, ingest and the alert service each
find it within 1.5 × keepalive (the broker's own limit, MQTT 3.1.1 section 3.1.2.10), reconnect
through a fresh connection and carry on: a reading made afterwards reaches a subscriber, the store
and the alert engine.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest
from ingest_support import Publisher, SteadyClock, make_validator, wait_until, wire
from test_alerts_support import T0, FixedClock, live_service, site
from test_gateway_support import Collector, TcpProxy

from stormwatch import topics
from stormwatch.contract import Reading, dump_readings
from stormwatch.gateway.outbox import Outbox
from stormwatch.gateway.publisher import MqttPublisher
from stormwatch.ingest.consumer import Ingest
from stormwatch.ingest.sqlite_store import SqliteStore
from stormwatch.mqtt import parse_broker_url

pytestmark = pytest.mark.mosquitto

#: Keep-alive of the three clients in the dead-link test (seconds).
KEEPALIVE_S = 10
DEAD_TEXT = "connection presumed dead"
LOGGERS = ("stormwatch.gateway.publisher", "stormwatch.ingest.consumer", "stormwatch.alerts.service")


def _dead_records(caplog: pytest.LogCaptureFixture, name: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == name and DEAD_TEXT in r.getMessage()]


def test_dead_link_is_found_within_one_and_a_half_keepalive_and_every_client_carries_on(
        own_mosquitto, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    proxy = TcpProxy(own_mosquitto.port).start()
    url = f"mqtt://127.0.0.1:{proxy.port}"
    (tmp_path / "alerts").mkdir()
    # The gateway's publisher, for site s1 / gateway gw (the alert test site).
    outbox = Outbox(tmp_path / "outbox.db")
    publisher = MqttPublisher(parse_broker_url(url), "s1", "gw", "boot-dead-link", outbox, FixedClock(),
                              keepalive_s=KEEPALIVE_S)
    # Ingest, for the example site.
    store = SqliteStore(tmp_path / "store.db")
    clock = SteadyClock()
    ingest = Ingest(make_validator(clock), store, url, client_id="dead-link-ingest", clock=clock,  # type: ignore[arg-type]
                    keepalive_s=KEEPALIVE_S)
    ingest_thread = threading.Thread(target=ingest.run, daemon=True)
    collector = Collector(own_mosquitto.port, topics.readings("s1", "gw"), "dead-link-collector")
    direct = Publisher(own_mosquitto)
    publisher.start()
    ingest_thread.start()
    try:
        with live_service(site(), url, tmp_path / "alerts", FixedClock(), "dead-link-alerts",
                          keepalive_s=KEEPALIVE_S) as (service, _seen, _store):
            wait_until(lambda: publisher.connected, what="the publisher to connect")
            assert ingest.wait_connected(10)
            stalled_at = time.time()
            proxy.stall()

            wait_until(lambda: all(_dead_records(caplog, n) for n in LOGGERS), timeout_s=2 * KEEPALIVE_S,
                       what="every client to find the dead connection")
            for name in LOGGERS:
                (record,) = _dead_records(caplog, name)
                assert record.levelno == logging.WARNING
                found_after = record.created - stalled_at
                assert found_after <= 1.5 * KEEPALIVE_S, f"{name}: dead link found after {found_after:.1f} s"
                assert f"(keepalive {KEEPALIVE_S} s" in record.getMessage()

            # Each reconnects through a fresh connection (the proxy forwards new ones) and carries on.
            wait_until(lambda: publisher.connected, what="the publisher to reconnect")
            assert ingest.wait_connected(10), "ingest did not reconnect"
            assert service.connected.wait(10), "the alert service did not reconnect"
            outbox.add([Reading(site="s1", device="rain", quantity="rain_tips", value=2, unit="{tip}", time=T0,
                                gateway="gw", boot="boot-dead-link", seq=1)])
            publisher.wake()
            got = collector.wait_for(1)
            assert [(r.boot, r.seq, r.value) for r in got] == [("boot-dead-link", 1, 2)]
            direct.send(wire(1))
            wait_until(lambda: ingest.written == 1, what="ingest to store the reading sent after the reconnect")
            direct.send(dump_readings(got), topic=topics.readings("s1", "gw"))
            wait_until(lambda: service.readings_seen >= 1, what="the alert service to receive a reading")
    finally:
        publisher.close()
        ingest.stop()
        ingest_thread.join(10)
        direct.close()
        collector.close()
        store.close()
        outbox.close()
        proxy.cut()
