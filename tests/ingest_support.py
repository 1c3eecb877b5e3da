"""Helpers of the ingest tests: a steady clock, gateway-shaped payloads, a QoS 1 publisher, a
dead-letter listener and an :class:`~stormwatch.ingest.consumer.Ingest` running in a thread."""

from __future__ import annotations

import itertools
import json
import threading
import urllib.request
from datetime import UTC, datetime, timedelta

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from prometheus_client.parser import text_string_to_metric_families

from stormwatch import topics
from stormwatch.app import servers
from stormwatch.clock import ManualClock
from stormwatch.config import load_site
from stormwatch.ingest.consumer import Ingest
from stormwatch.ingest.validate import Validator
from stormwatch.profiles import ProfileLibrary
from stormwatch.stores.base import ReadingStore
from tests.conftest import REPO
from tests.names import RUN

SITE = "riverside-commons"
GW = "gw-riverside-1"
TOPIC = topics.readings(SITE, GW)
T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
#: What ingest tests' clocks read: 12:10 on the scenario day (readings at 12:00-12:05 are past); their
#: clock stands still (``ManualClock(INGEST_NOW, on_sleep="wait")``).
INGEST_NOW = T0 + timedelta(minutes=10)
#: Names unique to this run, for client ids and database names (``f"db_{next(ids)}"``): a server
#: reused by an earlier run holds none of them (tests/names.py).
ids = (f"{RUN}_{n}" for n in itertools.count())


def wire(seq: int, value: object = 12.5, **kw: object) -> bytes:
    body: dict[str, object] = {"site": SITE, "device": "turb-down", "quantity": "turbidity", "value": value,
                               "unit": "NTU", "time": (T0 + timedelta(minutes=seq)).isoformat(), "gateway": GW,
                               "boot": "boot-a", "seq": seq, "raw": [seq], "flags": []}
    body.update(kw)
    return json.dumps(body).encode()


def tip_wire(seq: int, tips: int, tip_size: str | None = "0.01 in") -> bytes:
    """A rain reading as the gateway sends it: the example site's gauge tips at 0.01 in (``tip_size``
    ``None``: a gateway of an earlier stormwatch, which did not say)."""
    extra = {} if tip_size is None else {"tip_size": tip_size}
    return wire(seq, tips, device="rain-1", quantity="rain_tips", unit="{tip}", raw=1000 + seq, **extra)


class Publisher:
    def __init__(self, broker: servers.Mosquitto) -> None:
        self.client = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, client_id=f"pub-{next(ids)}")
        self.client.connect("127.0.0.1", broker.port)
        self.client.loop_start()

    def send(self, payload: bytes, topic: str = TOPIC, retain: bool = False) -> None:
        self.client.publish(topic, payload, qos=1, retain=retain).wait_for_publish(5)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


class DeadLetterListener:
    def __init__(self, broker: servers.Mosquitto) -> None:
        self.messages: list[dict[str, object]] = []
        ready = threading.Event()
        self.client = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, client_id=f"dl-{next(ids)}")
        self.client.on_message = lambda _c, _u, msg: self.messages.append(json.loads(msg.payload))
        self.client.on_subscribe = lambda *_a: ready.set()
        self.client.connect("127.0.0.1", broker.port)
        self.client.subscribe(topics.DEADLETTER, qos=1)
        self.client.loop_start()
        assert ready.wait(5)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def make_validator(clock: object) -> Validator:
    profiles = ProfileLibrary()
    return Validator.for_sites([load_site(REPO / "examples" / "site.yaml", profiles)], profiles, clock)  # type: ignore[arg-type]


class Running:
    """An Ingest running in a thread."""

    def __init__(self, broker: servers.Mosquitto, store: ReadingStore, client_id: str | None = None,
                 clock: ManualClock | None = None, validator: Validator | None = None, **kw: object) -> None:
        """``validator``: the sites to accept (default: the example site's)."""
        clock = clock or ManualClock(INGEST_NOW, on_sleep="wait")
        self.ingest = Ingest(validator or make_validator(clock), store, broker.url,
                             client_id=client_id or f"ingest-{next(ids)}", clock=clock, **kw)  # type: ignore[arg-type]
        self.thread = threading.Thread(target=self.ingest.run, daemon=True)
        self.thread.start()
        assert self.ingest.wait_connected(10), "ingest did not subscribe"

    def stop(self) -> None:
        self.ingest.stop()
        self.thread.join(15)
        assert not self.thread.is_alive()


def influx_count(srv: servers.InfluxDB1, db: str, q: str) -> list[list[object]]:
    res = srv.query(q, db)["results"][0]
    return res["series"][0]["values"] if res.get("series") else []


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        assert resp.status == 200
        text = resp.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def publish_range(pub: Publisher, seqs: range) -> None:
    """Publish readings ``seqs`` at QoS 1 (event time T0 + seq seconds) and wait for the PUBACKs."""
    infos = [pub.client.publish(TOPIC, wire(s, s / 4, time=(T0 + timedelta(seconds=s)).isoformat()), qos=1)
             for s in seqs]
    for info in infos:
        info.wait_for_publish(30)
        assert info.is_published()


def count_and_distinct(srv: servers.InfluxDB1, db: str) -> tuple[int, int, int, int]:
    """(points, distinct seq, min seq, max seq) by InfluxQL."""
    (row,) = influx_count(srv, db, 'SELECT COUNT("value"), COUNT(DISTINCT("seq")) FROM readings')
    (minmax,) = influx_count(srv, db, 'SELECT MIN("seq"), MAX("seq") FROM readings')
    return int(row[1]), int(row[2]), int(minmax[1]), int(minmax[2])
