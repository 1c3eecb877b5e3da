"""Ingest end to end through a real Mosquitto into real stores (failure-kinds.md #9, #10, #15, #16).

Each test runs its own broker (no retained or queued messages from other tests) and an
:class:`Ingest` in a thread; payloads are published with paho at QoS 1 like a gateway does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from stormwatch import topics
from stormwatch.app import servers
from stormwatch.clock import ManualClock, WallClock
from stormwatch.stores.influx1 import Influx1Store
from stormwatch.stores.sqlite import SqliteStore
from tests.ingest_support import (
    GW,
    SITE,
    T0,
    TOPIC,
    DeadLetterListener,
    Publisher,
    Running,
    ids,
    influx_count,
    tip_wire,
    wire,
)
from tests.names import run_unique
from tests.waits import wait_until

pytestmark = pytest.mark.mosquitto


@pytest.fixture()
def broker(own_mosquitto: servers.Mosquitto) -> servers.Mosquitto:
    return own_mosquitto


@pytest.fixture()
def sqlite_store(tmp_path: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(tmp_path / "sw.db", clock=WallClock())
    yield s
    s.close()


def test_bad_messages_dead_lettered_and_good_ones_stored_in_influx(
        broker: servers.Mosquitto, influx_server: servers.InfluxDB1, tmp_path: Path) -> None:
    db = f"e2e_{next(ids)}"
    store = Influx1Store(influx_server.url, db)
    listener = DeadLetterListener(broker)
    run = Running(broker, store, batch_ms=50)
    pub = Publisher(broker)
    try:
        pub.send(wire(1, 10.5))
        pub.send(b'{"site": "riverside-commons", "device": ')  # malformed JSON
        pub.send(wire(2, 11.0))
        pub.send(wire(3, 99.0, device="turb-7"))  # unknown device
        pub.send(wire(4, 12))  # an integer turbidity, stored as the float 12.0
        pub.send(wire(5, 0.0).replace(b'"value": 0.0', b'"value": NaN'))  # NaN value
        pub.send(wire(6, 13.25))
        wait_until(lambda: run.ingest.written == 4 and len(listener.messages) == 3, what="4 written, 3 dead")
        assert run.thread.is_alive()
        assert dict(run.ingest.dead_lettered) == {"bad_json": 1, "unknown_device": 1, "schema": 1}

        # The deadletter topic got each bad one with its reason and the original payload.
        by_reason = {m["reason"]: m for m in listener.messages}
        assert set(by_reason) == {"bad_json", "unknown_device", "schema"}
        assert by_reason["bad_json"]["payload"] == '{"site": "riverside-commons", "device": '
        assert by_reason["bad_json"]["topic"] == TOPIC
        assert str(by_reason["schema"]["detail"]).startswith("value")
        assert "turb-7" in str(by_reason["unknown_device"]["detail"])

        # InfluxDB (read with InfluxQL): the good values, in order, as floats; and the dead letters.
        rows = influx_count(influx_server, db, 'SELECT "value", "seq" FROM readings')
        assert [(r[1], r[2]) for r in rows] == [(10.5, 1), (11.0, 2), (12.0, 4), (13.25, 6)]
        dead = influx_count(influx_server, db, 'SELECT "reason", "topic" FROM deadletter')
        assert sorted(r[1] for r in dead) == ["bad_json", "schema", "unknown_device"]

        # Still running: the next good reading goes through.
        pub.send(wire(7, 14.0))
        # acknowledged just after the write: wait for both
        wait_until(lambda: run.ingest.written == 5 and run.ingest.acked == 8, what="5th reading, 8 acknowledged")
    finally:
        pub.close()
        run.stop()
        listener.close()


def test_bad_input_in_sqlite_deadletter_table(broker: servers.Mosquitto, sqlite_store: SqliteStore) -> None:
    run = Running(broker, sqlite_store, batch_ms=20)
    pub = Publisher(broker)
    try:
        pub.send(b"\xff\xfe not utf-8")
        pub.send(wire(1, 5.0, unit="FNU"))
        pub.send(wire(2, 6.0))
        wait_until(lambda: run.ingest.written == 1 and sum(run.ingest.dead_lettered.values()) == 2)
    finally:
        pub.close()
        run.stop()
    letters = sqlite_store.query_deadletters()
    assert [(d.reason, d.topic) for d in letters] == [("not_utf8", TOPIC), ("unit_mismatch", TOPIC)]
    assert letters[0].payload == b"\xff\xfe not utf-8"
    assert [(r.seq, r.value) for r in sqlite_store.query_readings(SITE)] == [(2, 6.0)]


def test_duplicate_delivered_twice_is_stored_once(broker: servers.Mosquitto, sqlite_store: SqliteStore) -> None:
    # failure-kinds.md #9: same device, same sequence number delivered twice -> one row, counted
    # once in the rain total; the second copy is a dead letter "duplicate". Two different tips
    # stamped at the same minute stay two readings (identity is not the timestamp).
    listener = DeadLetterListener(broker)
    run = Running(broker, sqlite_store, batch_ms=20)
    pub = Publisher(broker)
    try:
        pub.send(tip_wire(1, 3))
        same_minute = json.loads(tip_wire(1, 2))
        same_minute["seq"] = 2  # another tip count at the same timestamp, a different reading
        pub.send(json.dumps(same_minute).encode())
        wait_until(lambda: run.ingest.written == 2)
        pub.send(tip_wire(1, 3))  # redelivery after commit (identity memory) ...
        wait_until(lambda: run.ingest.dead_lettered["duplicate"] == 1)
        pub.client.publish(TOPIC, tip_wire(4, 1), qos=1)
        pub.send(tip_wire(4, 1))  # ... and twice within one batch
        wait_until(lambda: run.ingest.received == 5 and run.ingest.acked == 5)
        wait_until(lambda: len(listener.messages) == 2, what="2 duplicate dead letters on the topic")
    finally:
        pub.close()
        run.stop()
        listener.close()
    stored = sqlite_store.query_readings(SITE, quantity="rain_tips")
    assert [(r.seq, r.value) for r in stored] == [(1, 3), (2, 2), (4, 1)]
    assert sum(int(r.value) for r in stored) == 6  # 3 + 2 + 1 tips, the duplicates not counted
    assert run.ingest.written == 3
    assert dict(run.ingest.dead_lettered) == {"duplicate": 2}
    assert [m["reason"] for m in listener.messages] == ["duplicate", "duplicate"]
    assert "seq 1" in str(listener.messages[0]["detail"])
    letters = sqlite_store.query_deadletters()
    assert [d.reason for d in letters] == ["duplicate", "duplicate"]
    assert json.loads(letters[0].payload)["seq"] == 1


def test_retained_reading_is_stored_late(broker: servers.Mosquitto, sqlite_store: SqliteStore) -> None:
    # failure-kinds.md #10: a retained reading three hours old arrives on subscribe: it is stored
    # (it is data) but flagged late, so the alert engine never treats it as a fresh reading.
    now = T0 + timedelta(minutes=10)
    three_hours_old = now - timedelta(hours=3)
    pub = Publisher(broker)
    pub.send(wire(1, 40.0, time=three_hours_old.isoformat()), retain=True)
    run = Running(broker, sqlite_store, clock=ManualClock(now, on_sleep="wait"), batch_ms=20)
    try:
        pub.send(wire(2, 41.0))
        wait_until(lambda: run.ingest.written == 2)
    finally:
        pub.close()
        run.stop()
    late = sqlite_store.query_readings(SITE, late=True)
    assert [(r.seq, r.time, r.value) for r in late] == [(1, three_hours_old, 40.0)]
    assert [r.seq for r in sqlite_store.query_readings(SITE, late=False)] == [2]
    assert run.ingest.late == 1
    # Only the live reading moves the lag: 12:10 - 12:02 = 8 minutes (not 3 hours).
    assert run.ingest.lag_s() == 480.0


def test_stop_at_once_flushes_the_pending_point(broker: servers.Mosquitto,
                                                influx_server: servers.InfluxDB1) -> None:
    # failure-kinds.md #15: one point, then shut down at once -> it is in the database, and it was
    # acknowledged (a new consumer on the same session gets nothing redelivered).
    db = f"flush_{next(ids)}"
    run = Running(broker, Influx1Store(influx_server.url, db), client_id=run_unique("flush-consumer"), batch_ms=60_000)
    pub = Publisher(broker)
    pub.send(wire(1, 7.75))
    wait_until(lambda: run.ingest.received == 1)
    run.stop()
    # event time in ns + the store's timestamp slot (0..999 ns, stormwatch.stores.influxwrite)
    assert [[t // 1_000 * 1_000, v] for t, v in influx_count(influx_server, db, 'SELECT "value" FROM readings')] \
        == [[1_780_315_260_000_000_000, 7.75]]
    assert run.ingest.acked == 1
    again = Running(broker, Influx1Store(influx_server.url, db), client_id=run_unique("flush-consumer"), batch_ms=20)
    try:
        pub.send(wire(2, 8.0))
        pub.send(wire(3, 8.25))
        # a redelivered seq 1 would come before both new ones: with all three stored, it was not
        wait_until(lambda: len(influx_count(influx_server, db, 'SELECT "value" FROM readings')) == 3)
        assert again.ingest.received == 2  # only the new ones; seq 1 was acked, not redelivered
    finally:
        pub.close()
        again.stop()


def test_database_away_stops_acks_and_everything_is_written_when_back(
        broker: servers.Mosquitto, own_influx: servers.InfluxDB1) -> None:
    # failure-kinds.md #16 (minutes, compressed to seconds): no ack while InfluxDB is down; the
    # broker keeps the messages; all are written when it returns.
    store = Influx1Store(own_influx.url, "outage", retries=1, backoff_s=0.05)
    run = Running(broker, store, batch_ms=20, retry_backoff_s=0.1, max_backoff_s=0.3)
    pub = Publisher(broker)
    try:
        pub.send(wire(1, 1.5))
        wait_until(lambda: run.ingest.written == 1)
        own_influx.stop()
        for seq in range(2, 7):
            pub.send(wire(seq, seq + 0.5))
        wait_until(lambda: run.ingest.store_errors >= 3, what="failing writes while down")
        assert run.ingest.acked == 1 and run.ingest.written == 1
        own_influx.start()
        wait_until(lambda: run.ingest.written == 6 and run.ingest.acked == 6, timeout_s=20, what="catch-up")
    finally:
        pub.close()
        run.stop()
    rows = influx_count(own_influx, "outage", 'SELECT "value" FROM readings')
    assert [r[1] for r in rows] == [1.5, 2.5, 3.5, 4.5, 5.5, 6.5]


def test_amqtt_demo_broker_backlog_is_live_and_outside_topics_ignored(sqlite_store: SqliteStore) -> None:
    # The demo's embedded amqtt broker (MQTT 3.1.1): a reading queued for the offline persistent
    # session arrives after the restart and is stored live (amqtt flags it retained; hence
    # retained_is_late=False); a retained status message never becomes a reading.
    from stormwatch.app.broker import start_embedded_broker

    embedded = start_embedded_broker("amqtt")
    port = int(embedded.url.rsplit(":", 1)[1])
    endpoint = servers.Mosquitto("amqtt", [], port, Path("."))  # only .url/.port are used below
    try:
        pub = Publisher(endpoint)
        pub.send(b'{"state": "online"}', topic=topics.status(SITE, GW), retain=True)
        run = Running(endpoint, sqlite_store, client_id=run_unique("amqtt-ingest"), batch_ms=20, retained_is_late=False)
        pub.send(wire(1, 4.0))
        wait_until(lambda: run.ingest.written == 1)
        run.stop()
        pub.send(wire(2, 5.0))  # queued by the broker while ingest is away
        run = Running(endpoint, sqlite_store, client_id=run_unique("amqtt-ingest"), batch_ms=20, retained_is_late=False)
        wait_until(lambda: run.ingest.written == 1, what="queued reading after restart")
        run.stop()
        pub.close()
    finally:
        embedded.stop()
    assert [r.seq for r in sqlite_store.query_readings(SITE, late=False)] == [1, 2]
    assert sqlite_store.query_deadletters() == []


def test_ingest_records_each_sites_zone_for_the_dashboards(broker: servers.Mosquitto,
                                                           influx_server: servers.InfluxDB1) -> None:
    # The site dashboard's $tz is the selected site's own zone, read from the
    # ``sites`` measurement ingest writes from the site files (examples/site.yaml: America/New_York).
    db = f"sites_{next(ids)}"
    store = Influx1Store(influx_server.url, db)
    run = Running(broker, store, batch_ms=50)
    pub = Publisher(broker)
    try:
        pub.send(wire(1, 10.5))
        wait_until(lambda: influx_count(influx_server, db, 'SELECT * FROM "sites"') != [], what="the site record")
    finally:
        pub.close()
        run.stop()
        store.close()
    zone = influx_server.query("SHOW TAG VALUES FROM \"sites\" WITH KEY = \"timezone\" WHERE \"site\" = "
                               f"'{SITE}'", db)["results"][0]["series"][0]["values"]
    assert zone == [["timezone", "America/New_York"]]
    (row,) = influx_count(influx_server, db, 'SELECT "jurisdiction" FROM "sites"')
    assert row[0] == int((T0 + timedelta(minutes=10)).replace(minute=0).timestamp()) * 10**9  # the clock's hour
    assert row[1] == "ch133"
