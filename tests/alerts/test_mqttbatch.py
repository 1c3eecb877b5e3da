"""The alert service's session client (``alerts/mqttbatch.py``) against a real Mosquitto: the messages
of one socket read come as lists, with what paho's own parse gives (topics, payloads, QoS, retain
flags) in the same order -- a backlog cut at every chunk boundary and a message larger than a chunk
included -- and every PUBACK of them reaches the broker."""

from __future__ import annotations

import logging
import threading

import pytest

from stormwatch.alerts.mqttbatch import BatchReadClient, Delivered, make_batch_client
from stormwatch.app import servers
from stormwatch.ingest.mqttclient import CHUNK_BYTES
from stormwatch.runtime.mqtt import parse_broker_url
from stormwatch.runtime.mqttsession import SessionOptions
from tests.ingest_support import Publisher, ids
from tests.waits import wait_until

pytestmark = pytest.mark.mosquitto


def _client(broker: servers.Mosquitto, topic: str, subscribed: threading.Event, *,
            client_id: str | None = None, manual_ack: bool = False) -> BatchReadClient:
    client = make_batch_client(parse_broker_url(broker.url), SessionOptions(
        client_id=client_id or f"batch-{next(ids)}", keepalive_s=120, manual_ack=manual_ack, reconnect_min_s=1,
        reconnect_max_s=1), logging.getLogger(__name__))
    assert isinstance(client, BatchReadClient)
    client.on_connect = lambda c, *_a: c.subscribe(topic, qos=1)
    client.on_subscribe = lambda *_a: subscribed.set()
    return client


def test_lists_hold_what_paho_parses_in_order(own_mosquitto: servers.Mosquitto) -> None:
    pub = Publisher(own_mosquitto)
    pub.client.publish("batch/parts/kept", b"retained", qos=1, retain=True).wait_for_publish(5)
    got: list[tuple[str, bytes, int, bool]] = []
    sizes: list[int] = []
    seen: list[tuple[str, bytes, int, bool]] = []
    ready = [threading.Event(), threading.Event()]
    client = _client(own_mosquitto, "batch/parts/#", ready[0])
    reference = _client(own_mosquitto, "batch/parts/#", ready[1])

    def deliveries(batch: list[Delivered]) -> None:
        sizes.append(len(batch))
        got.extend((t, p, q, r) for t, p, _mid, q, r in batch)

    client.on_deliveries = deliveries
    client.on_delivery = lambda t, p, _mid, q, r: got.append((t, p, q, r))
    client.linger_s = 0.005  # what comes within it joins the list: cut where the chunk was
    reference.on_deliveries = None  # paho's own parse: the reference
    reference.on_message = lambda _c, _u, m: seen.append((m.topic, bytes(m.payload), m.qos, m.retain))
    client.start()
    reference.start()
    try:
        assert ready[0].wait(5) and ready[1].wait(5)
        # a burst: many packets a chunk, packets cut by a chunk's end, one larger than a chunk
        sent = [(f"batch/parts/{i % 7}/é", bytes([65 + i % 26]) * (1 + i % 29), i % 3 % 2) for i in range(1500)]
        sent.insert(300, ("batch/parts/big", b"B" * (CHUNK_BYTES * 2 + 11), 1))
        sent.insert(5, ("batch/parts/empty", b"", 1))
        for info in [pub.client.publish(t, p, qos=q) for t, p, q in sent]:
            info.wait_for_publish(10)
        wait_until(lambda: len(seen) == len(sent) + 1, what="every message on paho's path")
        wait_until(lambda: len(got) == len(sent) + 1, what="every message on the batch path")
        assert got == seen
        assert seen[0] == ("batch/parts/kept", b"retained", 1, True)
        assert sorted((t, p, q) for t, p, q, _r in seen[1:]) == sorted(sent)  # the broker may put QoS 0 first
        assert max(sizes) > 1  # the burst came as lists
    finally:
        client.stop()
        reference.stop()
        pub.client.publish("batch/parts/kept", b"", qos=1, retain=True).wait_for_publish(5)
        pub.close()


def test_every_puback_of_a_list_reaches_the_broker(own_mosquitto: servers.Mosquitto) -> None:
    # The alert service acknowledges a list's messages with ack_later once it has fed them. The
    # persistent session, back after a clean disconnect, gets nothing again -- only what was
    # published while it was away.
    subscribed = threading.Event()
    got: list[bytes] = []
    client = _client(own_mosquitto, "batch/acks", subscribed, manual_ack=True)

    def deliveries(batch: list[Delivered]) -> None:
        for _t, payload, mid, qos, _r in batch:
            got.append(payload)
            if qos == 1:
                client.ack_later(mid)

    client.on_deliveries = deliveries
    client.on_delivery = lambda t, p, mid, q, r: deliveries([(t, p, mid, q, r)])
    client.start()
    pub = Publisher(own_mosquitto)
    try:
        assert subscribed.wait(10)
        client.disconnect()  # away: the messages wait as a backlog that arrives in full chunks
        client.loop_stop()
        sent = [f"m-{i}".encode() for i in range(1200)]
        for info in [pub.client.publish("batch/acks", p, qos=1) for p in sent]:
            info.wait_for_publish(10)
        subscribed.clear()
        client.reconnect()
        client.loop_start()
        wait_until(lambda: len(got) == len(sent), what="the backlog delivered")
        # a QoS 1 round trip on the same connection: the broker has handled every PUBACK before it
        info = client.publish("batch/ordering", b"", qos=1)
        info.wait_for_publish(10)
        client.disconnect()
        client.loop_stop()
        pub.send(b"while-away", topic="batch/acks")
        subscribed.clear()
        client.reconnect()
        client.loop_start()
        wait_until(lambda: len(got) == len(sent) + 1, what="the message published while away")
        info = client.publish("batch/ordering", b"", qos=1)  # anything redelivered came before its PUBACK
        info.wait_for_publish(10)
        assert got == [*sent, b"while-away"]
    finally:
        client.stop()
        pub.close()
