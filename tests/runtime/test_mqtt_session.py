"""The MQTT session every stormwatch client shares (``stormwatch/runtime/mqttsession.py``), on a real Mosquitto.

Duplicate client ids (issue 12.1): two gateways and two ingest workers, each pair with one client
id, run for 60 s: each process connects at most ~10 times, logs one ERROR naming the client id,
counts the takeovers; the alert service reports the two gateways once.

Keep-alive while ingest holds at its in-flight limit during a store outage: the broker keeps hearing
from it (it used to time the session out after 1.5 × keepalive).

Dead link (issue 12.2): a TCP proxy between the clients and the broker stops forwarding without
closing (a NAT mapping that timed out). The gateway publisher, ingest and the alert service each
find it within 1.5 × keepalive (the broker's own limit, MQTT 3.1.1 section 3.1.2.10), reconnect
through a fresh connection and carry on: a reading made afterwards reaches a subscriber, the store
and the alert engine.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from datetime import timedelta
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from stormwatch import topics
from stormwatch.app import servers
from stormwatch.clock import ManualClock, ScenarioClock
from stormwatch.config import load_site, parse_site
from stormwatch.contract import Reading, dump_readings
from stormwatch.gateway.outbox import Outbox
from stormwatch.gateway.publisher import MqttPublisher
from stormwatch.gateway.service import Gateway
from stormwatch.ingest.consumer import Ingest
from stormwatch.ingest.metrics import serve_metrics
from stormwatch.profiles import ProfileLibrary
from stormwatch.runtime.mqtt import parse_broker_url
from stormwatch.stores.influx1 import Influx1Store
from stormwatch.stores.sqlite import SqliteStore
from tests.alerts_support import live_service, site
from tests.gateway_support import Collector, RegisterServer, TcpProxy
from tests.ingest_support import INGEST_NOW, REPO, T0, Publisher, Running, make_validator, publish_range, scrape, wire
from tests.waits import wait_until

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
    publisher = MqttPublisher(parse_broker_url(url), "s1", "gw", "boot-dead-link", outbox, ManualClock(T0),
                              keepalive_s=KEEPALIVE_S, confirm="broker")
    # Ingest, for the example site.
    store = SqliteStore(tmp_path / "store.db")
    clock = ManualClock(INGEST_NOW, on_sleep="wait")
    ingest = Ingest(make_validator(clock), store, url, client_id="dead-link-ingest", clock=clock,  # type: ignore[arg-type]
                    keepalive_s=KEEPALIVE_S)
    ingest_thread = threading.Thread(target=ingest.run, daemon=True)
    collector = Collector(own_mosquitto.port, topics.readings("s1", "gw"), "dead-link-collector")
    direct = Publisher(own_mosquitto)
    publisher.start()
    ingest_thread.start()
    try:
        with live_service(site(), url, tmp_path / "alerts", ManualClock(T0), "dead-link-alerts",
                          keepalive_s=KEEPALIVE_S) as (service, _seen, _store):
            wait_until(lambda: publisher.connected, what="the publisher to connect")
            assert ingest.wait_connected(10)
            stalled_at = time.time()
            proxy.stall()
            # The case the issue names: the gateway keeps publishing into the dead link (a reading
            # every 0.5 s; paho sends each at once, so a keep-alive PINGREQ would be postponed by it).
            # Every reading is in the outbox; none reaches the broker until the link is found dead.
            made: list[int] = []
            handed_over = publisher.published  # messages handed to paho so far
            keep_polling = threading.Event()

            def poll() -> None:
                while not keep_polling.wait(0.5):
                    seq = len(made) + 1
                    outbox.add([Reading(site="s1", device="rain", quantity="rain_tips", value=seq % 3, unit="{tip}",
                                        time=T0 + timedelta(minutes=seq), gateway="gw", boot="boot-dead-link",
                                        seq=seq)])
                    made.append(seq)
                    publisher.wake()

            poller = threading.Thread(target=poll, daemon=True)
            poller.start()
            try:
                wait_until(lambda: all(_dead_records(caplog, n) for n in LOGGERS), timeout_s=2 * KEEPALIVE_S,
                           what="every client to find the dead connection")
                for name in LOGGERS:
                    (record,) = _dead_records(caplog, name)
                    assert record.levelno == logging.WARNING
                    found_after = record.created - stalled_at
                    assert found_after <= 1.5 * KEEPALIVE_S, f"{name}: dead link found after {found_after:.1f} s"
                    assert f"(keepalive {KEEPALIVE_S} s, PINGREQ unanswered)" in record.getMessage()
                # the publisher really was publishing into the stalled socket: ~2 messages a second
                # handed to paho until it found the link dead (12.5 s: some 20 of them)
                sent_while_stalled = publisher.published - handed_over
                assert sent_while_stalled >= 2 * KEEPALIVE_S, (sent_while_stalled, made)

                # Each reconnects through a fresh connection (the proxy forwards new ones) and carries on.
                wait_until(lambda: publisher.connected, what="the publisher to reconnect")
                assert ingest.wait_connected(10), "ingest did not reconnect"
                assert service.connected.wait(10), "the alert service did not reconnect"
                stalled_made = len(made)
                wait_until(lambda: len(made) >= stalled_made + 4,
                           what="the gateway to go on publishing after the reconnect")
            finally:
                keep_polling.set()
                poller.join(5)
            # Nothing lost, nothing doubled: every reading made during and after the stall reaches a
            # subscriber once (the stalled socket swallowed the first sends; paho resends them on the
            # new connection, the outbox keeps each row until its PUBACK).
            got = collector.wait_for(len(made), timeout_s=20)
            assert sorted(r.seq for r in got) == made
            wait_until(lambda: outbox.depth() == 0, what="every reading PUBACKed and deleted from the outbox")
            direct.send(wire(1))
            wait_until(lambda: ingest.written == 1, what="ingest to store the reading sent after the reconnect")
            direct.send(dump_readings(got[:1]), topic=topics.readings("s1", "gw"))
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


# -- duplicate client ids (issue 12.1) ------------------------------------------------------------

EXAMPLE_SITE = "riverside-commons"
EXAMPLE_GW = "gw-riverside-1"
TAKEOVER_TEXT = "session taken over"


def _errors(caplog: pytest.LogCaptureFixture, name: str, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == name and r.levelno == logging.ERROR and text in r.getMessage()]


def _broker_connects(broker: servers.Mosquitto, client_id: str) -> int:
    """Connections Mosquitto accepted for ``client_id``, from its own log (log_type notice)."""
    text = (broker.data_dir / "mosquitto.log").read_text(errors="replace")
    return text.count(f" as {client_id} (")


def test_two_gateways_and_two_ingests_with_one_client_id_for_60_s(
        own_mosquitto, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Two gateways copied from one site file (one gateway id, so one MQTT client id) and two ingest
    workers started with one --client-id run side by side for 60 s on a real Mosquitto, with the
    alert service watching the site. Each process connects at most ~10 times (about once a second
    before, ~65 times), logs ONE ERROR naming its client id, and counts the takeovers; the alert
    service reports the two gateways once instead of "online" at every connect."""
    caplog.set_level(logging.INFO)
    profiles = ProfileLibrary()
    device = RegisterServer(unit_ids=(1,)).start()
    device.dynamic[1] = lambda address, n: 1000 + n if address == 0 else None  # one tip per poll
    cfg = parse_site(
        {"site": {"id": EXAMPLE_SITE, "jurisdiction": "ch133"}, "gateway_id": EXAMPLE_GW,
         "devices": [{"id": "rain-1", "profile": "tipping_bucket_modbus_counter", "poll_interval_s": 60,
                      "transport": {"kind": "modbus-tcp", "host": "127.0.0.1", "port": device.port}}]},
        "copied-site.yaml", profiles,
    )
    clock = ScenarioClock(sim_start=T0, speed=10.0, wall_start=time.time())  # a poll every 6 real s
    store = SqliteStore(tmp_path / "store.db")
    gateways = [Gateway(cfg, profiles, clock, own_mosquitto.url, tmp_path / f"gw{i}", confirm="broker")
                for i in (1, 2)]
    threads = [threading.Thread(target=gw.run, daemon=True) for gw in gateways]
    ingests: list[Running] = []
    metrics = None
    statuses: list[dict[str, object]] = []  # every status the two gateways published, as a subscriber sees them
    watcher = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="takeover-status-watcher")
    watcher.on_message = lambda _c, _u, msg: statuses.append(json.loads(msg.payload)) if msg.payload else None
    watcher.connect("127.0.0.1", own_mosquitto.port)
    watcher.subscribe(topics.status(EXAMPLE_SITE, EXAMPLE_GW), qos=1)
    watcher.loop_start()
    try:
        with live_service(load_site(REPO / "examples" / "site.yaml", profiles), own_mosquitto.url,
                          tmp_path / "alerts", ManualClock(T0), "takeover-alerts"):
            for t in threads:
                t.start()
            ingests.append(Running(own_mosquitto, store, client_id="ingest-twin"))
            metrics = serve_metrics(ingests[0].ingest, 0)
            ingests.append(Running(own_mosquitto, store, client_id="ingest-twin"))
            time.sleep(60)
            scraped = scrape(metrics.server_port)
    finally:
        if metrics is not None:
            metrics.shutdown()
        for gw in gateways:
            gw.stop()
        for run in ingests:
            run.stop()
        device.stop()
        watcher.loop_stop()
        watcher.disconnect()
        stored = store.query_readings(EXAMPLE_SITE)
        store.close()

    gateway_id = f"stormwatch-{EXAMPLE_SITE}-{EXAMPLE_GW}"
    for gw in gateways:
        session = gw.publisher.session
        assert 2 <= session.connects <= 10, f"gateway {gw.boot}: {session.connects} connects in 60 s"
        assert session.taken_over and session.takeovers >= 3
    for run in ingests:
        assert 2 <= run.ingest.session.connects <= 10, f"ingest: {run.ingest.session.connects} connects in 60 s"
        assert run.ingest.session.taken_over
    # The broker's own count agrees: ~6 connections each instead of ~65.
    assert _broker_connects(own_mosquitto, gateway_id) <= 20
    assert _broker_connects(own_mosquitto, "ingest-twin") <= 20
    # ONE ERROR per process, naming the client id and the likely cause.
    gateway_errors = _errors(caplog, "stormwatch.gateway.publisher", TAKEOVER_TEXT)
    assert len(gateway_errors) == 2
    for message in gateway_errors:
        assert f"with client id {gateway_id!r}" in message
        assert f"Are two gateways configured with site {EXAMPLE_SITE!r} and gateway id {EXAMPLE_GW!r}?" in message
    ingest_errors = _errors(caplog, "stormwatch.ingest.consumer", TAKEOVER_TEXT)
    assert len(ingest_errors) == 2 and all("with client id 'ingest-twin'" in m for m in ingest_errors)
    # Counted where each gateway reports: its retained online status carries the takeovers so far
    # (each takeover ends in a reconnect, and every connect publishes a status).
    for gw in gateways:
        reported = [d["session_takeovers"] for d in statuses if d.get("boot") == gw.boot and d["state"] == "online"]
        # a running count: every value once (a status the broker had not acknowledged when its session
        # was taken over is sent again after the next connect's, so arrival order may swap neighbours)
        assert sorted(set(reported)) == list(range(min(reported), max(reported) + 1)), reported
        # the last takeover may have come after the last status (the stop came during the backoff)
        taken = gw.publisher.session.takeovers
        assert taken - 1 <= max(reported) <= taken and max(reported) >= 2, (reported, taken)
    # Counted in the ingest metrics.
    assert scraped[("stormwatch_ingest_mqtt_session_takeovers_total", ())] >= 3
    assert 2 <= scraped[("stormwatch_ingest_mqtt_connects_total", ())] <= 10
    # The alert service: one ERROR about the two gateways, not "online" at every connect.
    alert_errors = _errors(caplog, "stormwatch.alerts.service", "two gateways publish under one gateway id")
    assert len(alert_errors) == 1 and alert_errors[0].startswith(f"{EXAMPLE_SITE}: gateway {EXAMPLE_GW}: ")
    online_lines = [r for r in caplog.records if r.name == "stormwatch.alerts.service" and r.levelno >= logging.INFO
                    and f"gateway {EXAMPLE_GW} is online" in r.getMessage()]
    assert len(online_lines) <= 2
    # Both gateways' readings arrive (under their two boots): nothing is lost by the backoff.
    assert {r.boot for r in stored} == {gw.boot for gw in gateways}


@pytest.mark.influxdb
def test_ingest_holding_at_its_inflight_limit_keeps_its_session_through_a_store_outage(
        own_mosquitto, own_influx: servers.InfluxDB1) -> None:
    """During a store outage ingest stops reading the socket at its in-flight limit (TCP back-pressure)
    and reads nothing more until the store is back (the broker's window is 1,000, ingest's 100);
    its PINGREQs must still reach the broker within 1.5 × keepalive although the PINGRESPs wait
    behind the backlog. An outage of 6 keep-alives: the broker never times the session out, nothing
    is redelivered, every reading is stored once, never more than 100 held."""
    keepalive = 4
    store = Influx1Store(own_influx.url, "hold", retries=1, backoff_s=0.05)
    still = ManualClock(T0 + timedelta(days=1), on_sleep="wait")
    run = Running(own_mosquitto, store, clock=still, batch_ms=50, batch_size=50, retry_backoff_s=0.2, max_backoff_s=1.0,
                  keepalive_s=keepalive, max_inflight=100)
    pub = Publisher(own_mosquitto)
    try:
        publish_range(pub, range(1, 201))
        wait_until(lambda: run.ingest.acked == 200, timeout_s=30, what="200 acknowledged")
        own_influx.stop()
        publish_range(pub, range(201, 3001))  # 2,800 wait: 100 at ingest, the rest in the broker
        time.sleep(6 * keepalive)
        assert run.ingest.acked == 200 and run.ingest.unacked == 100
        own_influx.start()
        wait_until(lambda: run.ingest.acked == 3000, timeout_s=60, what="all 3,000 acknowledged")
    finally:
        pub.close()
        run.stop()
    assert (run.ingest.session.connects, run.ingest.session.losses) == (1, 0)
    assert "exceeded timeout" not in (own_mosquitto.data_dir / "mosquitto.log").read_text()
    assert run.ingest.written == 3000 and run.ingest.duplicates == 0
    assert run.ingest.peak_unacked == 100  # also when the broker releases its backlog after the outage
