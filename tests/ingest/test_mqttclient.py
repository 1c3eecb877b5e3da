"""The chunked-read paho client of ingest (``ingest/mqttclient.py``) against a real Mosquitto:
every byte of a burst is handled (none stranded in the chunk), packets straddling chunks and a
packet larger than a chunk arrive intact, and a reconnect starts from a clean buffer."""

from __future__ import annotations

import logging
import os
import signal
import threading

import pytest

from stormwatch.app import servers
from stormwatch.ingest.mqttclient import CHUNK_BYTES, MAX_PACKETS_PER_WAKE, ChunkedReadClient, make_client
from stormwatch.runtime.mqtt import parse_broker_url
from stormwatch.runtime.mqttsession import SessionOptions
from tests.ingest_support import Publisher, ids
from tests.waits import wait_until

pytestmark = pytest.mark.mosquitto


class Subscriber:
    def __init__(self, broker: servers.Mosquitto, topic: str) -> None:
        self.got: list[bytes] = []
        self.subscribed = threading.Event()
        # A long keep-alive: a PINGRESP must not be what rescues stranded bytes.
        self.client = make_client(parse_broker_url(broker.url), SessionOptions(
            client_id=f"chunk-{next(ids)}", keepalive_s=120, reconnect_min_s=1, reconnect_max_s=1),
            logging.getLogger(__name__))
        assert isinstance(self.client, ChunkedReadClient)
        self.client.on_message = lambda _c, _u, msg: self.got.append(msg.payload)
        self.client.on_connect = lambda c, *_a: c.subscribe(topic, qos=1)
        self.client.on_subscribe = lambda *_a: self.subscribed.set()
        self.client.start()
        assert self.subscribed.wait(5)

    def close(self) -> None:
        self.client.stop()


def test_queued_backlog_arrives_at_once_and_all_of_it_is_handled(own_mosquitto: servers.Mosquitto) -> None:
    # The backlog of an offline persistent session arrives in a few large TCP reads holding far
    # more than MAX_PACKETS_PER_WAKE packets each; bytes left in the chunk must still be handled
    # at once (not when the next keep-alive packet happens to arrive).
    topic = "chunk/burst"
    sub = Subscriber(own_mosquitto, topic)
    sub.client.disconnect()
    sub.client.loop_stop()
    # Small payloads (many packets per chunk) cycling 1..29 bytes so packets straddle chunk
    # boundaries, and one payload larger than a chunk.
    payloads = [bytes([65 + i % 26]) * (1 + i % 29) for i in range(3 * MAX_PACKETS_PER_WAKE)]
    payloads.insert(450, b"L" * (CHUNK_BYTES * 3 + 17))
    pub = Publisher(own_mosquitto)
    try:
        infos = [pub.client.publish(topic, p, qos=1) for p in payloads]
        for info in infos:
            info.wait_for_publish(10)
        sub.client.reconnect()
        sub.client.loop_start()
        # Stranded bytes would wait for the next packet from the broker: the PINGRESP a keep-alive
        # (120 s) after connecting. Half of that tells the two apart however loaded the machine is.
        wait_until(lambda: len(sub.got) >= len(payloads), timeout_s=60, what="the whole backlog, before a keep-alive")
        # a last message after it: anything extra (a packet handled twice) arrives before it, in order
        pub.client.publish(topic, b"end", qos=1).wait_for_publish(10)
        wait_until(lambda: b"end" in sub.got, timeout_s=10, what="the message after the backlog")
        assert sub.got == [*payloads, b"end"]  # same bytes, same order, nothing extra
    finally:
        pub.close()
        sub.close()


def broker_saved_after_acks(broker: servers.Mosquitto, sub: Subscriber) -> None:
    """Return once ``broker``'s persistence file holds the PUBACKs ``sub`` has sent so far.

    Mosquitto restores a SIGKILLed session from its last save (``autosave_interval 1``): a message
    it had in flight to ``sub`` at that save is redelivered after the restart -- at-least-once, as
    QoS 1 allows, and more likely the slower a loaded machine answers. Two QoS 1 round trips from
    ``sub`` come back only after the broker handled every PUBACK queued before them (one
    connection's packets are handled in order; the first trip also outlasts the PUBACK paho queues
    just after ``on_message``); then a save forced by SIGUSR1 (mosquitto(8)) replaces the file.
    """
    for _ in range(2):
        info = sub.client.publish("chunk/ordering", b"", qos=1)
        info.wait_for_publish(10)
        assert info.is_published()
    db = broker.data_dir / "mosquitto.db"

    def identity() -> tuple[int, int] | None:
        try:
            st = db.stat()
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_mtime_ns

    before = identity()
    os.kill(broker.pid, signal.SIGUSR1)  # Mosquitto saves in its one thread: a rename now is a save begun now
    wait_until(lambda: identity() not in (None, before), what="the broker's save after the PUBACKs")


def test_reconnect_after_broker_restart_starts_clean(own_mosquitto: servers.Mosquitto) -> None:
    topic = "chunk/reconnect"
    sub = Subscriber(own_mosquitto, topic)
    pub = Publisher(own_mosquitto)
    try:
        for i in range(300):
            pub.send(f"before-{i}".encode(), topic=topic)
        wait_until(lambda: len(sub.got) == 300, what="300 before the restart")
        broker_saved_after_acks(own_mosquitto, sub)  # the restart redelivers nothing already acknowledged
        pub.close()
        sub.subscribed.clear()
        own_mosquitto.kill()  # abrupt: the connection dies, possibly mid-chunk
        own_mosquitto.start()
        assert sub.subscribed.wait(15), "did not reconnect and resubscribe"
        pub = Publisher(own_mosquitto)
        for i in range(300):
            pub.send(f"after-{i}".encode(), topic=topic)
        wait_until(lambda: len(sub.got) == 600, what="300 after the restart")
        assert sub.got == [f"before-{i}".encode() for i in range(300)] + [f"after-{i}".encode() for i in range(300)]
    finally:
        pub.close()
        sub.close()


def _parts_client(broker: servers.Mosquitto, subscribed: threading.Event) -> ChunkedReadClient:
    client = make_client(parse_broker_url(broker.url), SessionOptions(
        client_id=f"chunk-{next(ids)}", keepalive_s=120, reconnect_min_s=1, reconnect_max_s=1),
        logging.getLogger(__name__))
    assert isinstance(client, ChunkedReadClient)
    client.on_connect = lambda c, *_a: c.subscribe("chunk/parts/#", qos=1)
    client.on_subscribe = lambda *_a: subscribed.set()
    return client


def test_on_delivery_gets_what_paho_puts_in_a_message(own_mosquitto: servers.Mosquitto) -> None:
    # ingest's receive path parses a PUBLISH itself (on_delivery); paho's own parse (on_message,
    # MQTTMessage) is the reference: same topics, payloads, QoS, retain flags, in the same order.
    pub = Publisher(own_mosquitto)
    pub.client.publish("chunk/parts/kept", b"retained", qos=1, retain=True).wait_for_publish(5)
    fast: list[tuple[str, bytes, int, int, bool]] = []
    seen: list[tuple[str, bytes, int, bool]] = []
    ready = [threading.Event(), threading.Event()]
    client, reference = _parts_client(own_mosquitto, ready[0]), _parts_client(own_mosquitto, ready[1])
    client.on_delivery = lambda *parts: fast.append(parts)
    reference.on_message = lambda _c, _u, m: seen.append((m.topic, bytes(m.payload), m.qos, m.retain))
    client.start()
    reference.start()
    try:
        assert ready[0].wait(5) and ready[1].wait(5)
        sent = [("chunk/parts/a", b'{"x":1}', 1), ("chunk/parts/é/ü", "ünï".encode(), 1), ("chunk/parts/q0", b"q0", 0),
                ("chunk/parts/empty", b"", 1), ("chunk/parts/big", b"B" * (CHUNK_BYTES + 5), 1)]
        for topic, payload, qos in sent:
            pub.client.publish(topic, payload, qos=qos).wait_for_publish(5)
        wait_until(lambda: len(fast) == len(sent) + 1, what="every message on the fast path")
        wait_until(lambda: len(seen) == len(sent) + 1, what="every message on paho's path")
        assert [(t, p, q, r) for t, p, _mid, q, r in fast] == seen
        assert seen[0] == ("chunk/parts/kept", b"retained", 1, True)
        assert [(t, p) for t, p, _q, _r in seen[1:]] == [(t, p) for t, p, _q in sent]
        assert all((mid > 0) == (q == 1) for _t, _p, mid, q, _r in fast)
    finally:
        client.stop()
        reference.stop()
        pub.client.publish("chunk/parts/kept", b"", qos=1, retain=True).wait_for_publish(5)
        pub.close()


def test_pubacks_deferred_to_the_end_of_a_wake_up_all_reach_the_broker(own_mosquitto: servers.Mosquitto) -> None:
    # The alert service acknowledges with ack_later: a wake-up's PUBACKs leave as one buffer. Every
    # one must reach the broker: the persistent session, back after a clean disconnect, gets nothing
    # again -- only what was published while it was away.
    subscribed = threading.Event()
    got: list[bytes] = []
    client = make_client(parse_broker_url(own_mosquitto.url), SessionOptions(
        client_id=f"chunk-{next(ids)}", keepalive_s=120, manual_ack=True, reconnect_min_s=1, reconnect_max_s=1),
        logging.getLogger(__name__))
    assert isinstance(client, ChunkedReadClient)

    def deliver(_topic: str, payload: bytes, mid: int, qos: int, _retain: bool) -> None:
        got.append(payload)
        if qos == 1:
            client.ack_later(mid)

    client.on_delivery = deliver
    client.on_connect = lambda c, *_a: c.subscribe("chunk/acks", qos=1)
    client.on_subscribe = lambda *_a: subscribed.set()
    client.start()
    pub = Publisher(own_mosquitto)
    try:
        assert subscribed.wait(10)
        sent = [f"m-{i}".encode() for i in range(2 * MAX_PACKETS_PER_WAKE + 7)]
        for info in [pub.client.publish("chunk/acks", p, qos=1) for p in sent]:
            info.wait_for_publish(10)
        wait_until(lambda: len(got) == len(sent), what="every message delivered")
        # a QoS 1 round trip on the same connection: the broker has handled every PUBACK before it
        info = client.publish("chunk/ordering", b"", qos=1)
        info.wait_for_publish(10)
        client.disconnect()
        client.loop_stop()
        pub.send(b"while-away", topic="chunk/acks")
        subscribed.clear()
        client.reconnect()
        client.loop_start()
        wait_until(lambda: len(got) > len(sent), what="the message published while away")
        pub.send(b"marker", topic="chunk/acks")  # anything redelivered would have come before it
        wait_until(lambda: got[-1:] == [b"marker"], what="the marker")
        assert got == [*sent, b"while-away", b"marker"]
    finally:
        pub.close()
        client.stop()
