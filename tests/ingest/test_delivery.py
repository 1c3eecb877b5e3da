"""Nothing lost, nothing doubled: database outage, a worker killed on a shared subscription, broker
queue limits (failure-kinds.md #16, #17).

Real Mosquitto (``own_mosquitto``, the project's configuration from ``stormwatch.app.servers``) and
real InfluxDB 1.x; the database is checked with InfluxQL, independently of the store's own code.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from stormwatch.app import servers
from stormwatch.clock import ManualClock, WallClock
from stormwatch.stores.influx1 import Influx1Store
from tests.ingest_support import (
    REPO,
    T0,
    TOPIC,
    Publisher,
    Running,
    count_and_distinct,
    ids,
    influx_count,
    publish_range,
    wire,
)
from tests.waits import wait_until

pytestmark = [pytest.mark.mosquitto, pytest.mark.influxdb]

#: How long InfluxDB stays down. failure-kinds.md #16 speaks of minutes; 20 s keeps the suite
#: fast. Nothing in the mechanism depends on the duration (no ack, so the broker holds the
#: messages; the retry backoff is capped at ``max_backoff_s``) -- what a longer outage adds is
#: more queued messages, and 6,000 of them already exceed Mosquitto's default queue of 1,000.
OUTAGE_S = 20.0
#: The broker's in-flight window (``max_inflight_messages`` in stormwatch.app.servers.MOSQUITTO_CONF)
#: and ingest's own bound (``Ingest(max_inflight=4000)``, the default).
INFLIGHT_WINDOW = 4000


def test_influx_down_while_10000_readings_flow_all_stored_exactly_once(
        own_mosquitto: servers.Mosquitto, own_influx: servers.InfluxDB1, caplog: pytest.LogCaptureFixture) -> None:
    # failure-kinds.md #16: InfluxDB away -> ingest stops acknowledging, the broker keeps the
    # messages (persistent session; at most the in-flight window is outstanding at ingest), and
    # everything is written when it returns: 10,000 readings, each stored exactly once.
    # The operator reads one ERROR when it goes, one INFO within seconds of its return,
    # the retries only at DEBUG (ingest's own retry backoff and the store's, at their defaults).
    caplog.set_level(logging.INFO)
    store = Influx1Store(own_influx.url, "outage10k")
    clock = ManualClock(T0 + timedelta(days=1), on_sleep="wait")  # every event time (T0 + up to 10,000 s) is past
    run = Running(own_mosquitto, store, clock=clock, batch_ms=50)
    pub = Publisher(own_mosquitto)
    try:
        publish_range(pub, range(1, 2001))
        wait_until(lambda: run.ingest.acked == 2000, timeout_s=30, what="first 2,000 acknowledged")
        assert run.ingest.written == 2000

        own_influx.stop()
        down_at = time.monotonic()
        during = threading.Thread(target=publish_range, args=(pub, range(2001, 8001)))
        during.start()
        during.join(60)
        wait_until(lambda: run.ingest.store_errors >= 2, 30, "failing writes while InfluxDB is down")
        time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - down_at)))
        # Nothing acknowledged while down; the consumer holds at most the broker's window.
        assert run.ingest.acked == 2000 and run.ingest.written == 2000
        assert 0 < run.ingest.unacked <= INFLIGHT_WINDOW
        assert run.ingest.received - 2000 <= INFLIGHT_WINDOW  # the other ~2,000 wait in the broker

        own_influx.start()
        back_at = time.time()
        publish_range(pub, range(8001, 10001))
        wait_until(lambda: run.ingest.acked == 10_000, timeout_s=60, what="all 10,000 acknowledged")
    finally:
        pub.close()
        run.stop()
    # Bounded also after the outage, when Mosquitto 2.0.11 releases the whole backlog at once
    # (its own window is not enforced for queued messages; ingest's hold is).
    assert run.ingest.peak_unacked <= INFLIGHT_WINDOW
    assert run.ingest.store_retries >= run.ingest.store_errors >= 2
    assert count_and_distinct(own_influx, "outage10k") == (10_000, 10_000, 1, 10_000)
    assert dict(run.ingest.dead_lettered) == {}
    lines = [r for r in caplog.records if r.levelno >= logging.INFO and r.name.startswith("stormwatch.")]
    errors = [r for r in lines if r.levelno >= logging.ERROR]
    assert [r.name for r in errors] == ["stormwatch.ingest.consumer"], [r.getMessage() for r in errors]
    assert "store unavailable" in errors[0].getMessage()
    back = [r for r in lines if "store is writable again" in r.getMessage()]
    assert len(back) == 1 and back[0].levelno == logging.INFO and back[0].name == "stormwatch.ingest.consumer"
    # ingest's backoff is capped at 2 s and the store's own retries take under 4 s: back within 10 s
    assert back[0].created - back_at < 10, back[0].created - back_at
    assert not [r for r in lines if r.levelno < logging.ERROR and ("retrying" in r.getMessage()
                                                                   or "still failing" in r.getMessage())]


def _worker(broker: servers.Mosquitto, store_url: str, client_id: str, group: str,
            log: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "stormwatch", "ingest", "--site", str(REPO / "examples" / "site.yaml"),
            "--broker", broker.url, "--store", store_url, "--client-id", client_id, "--share-group", group,
            "--batch-ms", "50", "--stats-interval-s", "2"]
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
    wait_until(lambda: "subscribed to $share/" in log.read_text(errors="replace") or proc.poll() is not None,
               timeout_s=30, what=f"{client_id} subscribed")
    assert proc.poll() is None, log.read_text()
    return proc


def test_two_workers_on_a_shared_subscription_one_sigkilled_every_reading_once(
        own_mosquitto: servers.Mosquitto, influx_server: servers.InfluxDB1, tmp_path: Path) -> None:
    # Two `stormwatch ingest --share-group` processes; one is SIGKILLed mid-stream and
    # restarted with the same client id (as a supervisor does). Mosquitto 2.0 keeps the killed
    # worker's unacknowledged messages -- and its round-robin share of new ones -- in that
    # worker's persistent session until the same client id reconnects (docs/ingest.md).
    db = f"shared_{next(ids)}"
    group = f"g{next(ids)}"
    store_url = influx_server.store_url(db)
    base = WallClock().now() - timedelta(days=1)  # the CLI runs on the wall clock: event times in the past
    total = 6000
    a = _worker(own_mosquitto, store_url, "worker-a", group, tmp_path / "a.log")
    b = _worker(own_mosquitto, store_url, "worker-b", group, tmp_path / "b.log")
    published = 0
    pub = Publisher(own_mosquitto)
    try:
        infos = []
        for seq in range(1, total + 1):
            infos.append(pub.client.publish(TOPIC, wire(seq, 1.0 + seq / 8, time=(base + timedelta(seconds=seq))
                                                         .isoformat()), qos=1))
            published = seq
            if seq % 200 == 0:
                time.sleep(0.02)  # a stream, not one burst
            if seq == total // 3:
                for info in infos:
                    info.wait_for_publish(30)
                os.kill(a.pid, signal.SIGKILL)  # mid-stream: its current batch is written or not, never acked
                a.wait(10)
        for info in infos:
            info.wait_for_publish(30)
        assert published == total
        a = _worker(own_mosquitto, store_url, "worker-a", group, tmp_path / "a.log")  # same client id
        wait_until(lambda: influx_count(influx_server, db, 'SELECT COUNT("value") FROM readings') == [[0, total]],
                   timeout_s=60, what=f"{total} points in InfluxDB")
        time.sleep(1.0)  # nothing else trickles in afterwards
    finally:
        pub.close()
        for proc in (a, b):
            if proc.poll() is None:
                proc.terminate()
                proc.wait(20)
    assert count_and_distinct(influx_server, db) == (total, total, 1, total)
    assert "ERROR" not in (tmp_path / "b.log").read_text()
    assert "dead letter" not in (tmp_path / "a.log").read_text() + (tmp_path / "b.log").read_text()


def _queued_for_offline_session(broker: servers.Mosquitto, n: int) -> int:
    """Subscribe with a persistent session, go away, publish ``n`` QoS 1 messages, come back: how many arrive."""
    got: set[bytes] = set()
    subscribed = threading.Event()

    def session() -> mqtt.Client:
        c = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, client_id="queued-consumer",
                        clean_session=False)
        c.on_message = lambda _c, _u, msg: got.add(msg.payload)
        c.on_subscribe = lambda *_a: subscribed.set()
        c.connect("127.0.0.1", broker.port)
        c.loop_start()
        return c

    c = session()
    c.subscribe("queue-test/t", qos=1)
    assert subscribed.wait(5)
    c.disconnect()
    c.loop_stop()
    pub = Publisher(broker)
    for info in [pub.client.publish("queue-test/t", str(i), qos=1) for i in range(n)]:
        info.wait_for_publish(10)
    pub.close()
    c = session()
    try:
        wait_until(lambda: len(got) >= n, timeout_s=5, what=f"{n} queued messages")
    except AssertionError:
        pass
    time.sleep(0.5)
    c.disconnect()
    c.loop_stop()
    return len(got)


def test_project_broker_config_keeps_more_than_1000_queued_messages(own_mosquitto: servers.Mosquitto,
                                                                    tmp_path: Path) -> None:
    # failure-kinds.md #17: with Mosquitto's default max_queued_messages (1,000) a persistent
    # session that is away loses QoS 1 messages beyond 1,000; the project's configuration keeps
    # them all.
    assert _queued_for_offline_session(own_mosquitto, 1500) == 1500
    stock = servers.mosquitto(tmp_path / "stock-limits", extra_conf="max_queued_messages 1000\n")  # the default
    stock.start()
    try:
        assert _queued_for_offline_session(stock, 1500) == 1000
    finally:
        stock.stop()


def test_project_broker_configs_set_both_limits_on_purpose() -> None:
    # failure-kinds.md #17: the test/demo broker and the CI broker set both limits, and say why.
    ci = (REPO / ".ci" / "mosquitto.conf").read_text()
    for conf in (servers.MOSQUITTO_CONF, ci):
        settings = dict(line.split(None, 1) for line in conf.splitlines() if line and not line.startswith("#"))
        assert int(settings["max_queued_messages"]) >= 1_000_000
        assert int(settings["max_inflight_messages"]) == INFLIGHT_WINDOW
