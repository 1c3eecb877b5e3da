"""The path's limits: a broker's packet limit (Mosquitto ``max_packet_size``), announced in the MQTT 5
CONNACK or given in the broker URL, splits the gateway's batches; a reading that can never fit is a
local dead letter with one ERROR naming its size and the limit, and the readings behind it go on; an
MQTT 3.1.1 broker that closes the connection over a packet's size is not blamed on a takeover
(docs/gateway.md, "The broker's packet limit"; failure-kinds.md)."""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from stormwatch import topics
from stormwatch.app import servers
from stormwatch.clock import ScenarioClock
from stormwatch.config import SiteConfig, parse_site
from stormwatch.contract import parse_readings
from stormwatch.gateway.outbox import Outbox
from stormwatch.gateway.service import STATE_DB, Gateway
from stormwatch.profiles import ProfileLibrary
from stormwatch.simulators.scenario import load_scenario
from stormwatch.simulators.site import SimulatedSite, isolate_site
from tests.waits import wait_until

pytestmark = pytest.mark.mosquitto  # each test starts a Mosquitto of its own (a slow test)

SCENARIO = load_scenario("default")
#: A rain gauge whose id makes each of its readings some 40 bytes longer than the turbidity probes'.
LONG_RAIN = "rain-gauge-on-the-roof-of-the-north-maintenance-shed"
PUBLISHER = "stormwatch.gateway.publisher"


def _site(tmp_path: Path, site_id: str) -> SiteConfig:
    cfg = parse_site({
        "site": {"id": site_id, "jurisdiction": "ch133"}, "gateway_id": "gw-limit",
        "devices": [
            {"id": LONG_RAIN, "profile": "tipping_bucket_modbus_counter", "poll_interval_s": 120,
             "transport": {"kind": "modbus-tcp", "host": "127.0.0.1", "port": 5020, "unit_id": 1}},
            {"id": "turb-up", "profile": "yosemitech_y511", "poll_interval_s": 120,
             "transport": {"kind": "modbus-tcp", "host": "127.0.0.1", "port": 5020, "unit_id": 2}},
            {"id": "turb-down", "profile": "yosemitech_y511", "poll_interval_s": 120,
             "transport": {"kind": "modbus-tcp", "host": "127.0.0.1", "port": 5021, "unit_id": 1}},
        ],
        "rain_gauge": LONG_RAIN, "turbidity_pair": {"upstream": "turb-up", "downstream": "turb-down"},
    }, "limit-site", ProfileLibrary())
    return isolate_site(cfg, tmp_path / "links")


def _packet(topic: str, payload: bytes, protocol: int) -> int:
    """A QoS 1 PUBLISH's bytes, counted here from MQTT 3.1.1 section 3.3 / MQTT 5 section 3.3."""
    remaining = 2 + len(topic) + 2 + len(payload) + (1 if protocol == 5 else 0)
    return 1 + (1 if remaining < 128 else 2) + remaining


class _Listener:
    """Every readings message of one topic, as raw payloads."""

    def __init__(self, port: int, topic: str) -> None:
        self.payloads: list[bytes] = []
        self._lock = threading.Lock()
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"listen-{uuid.uuid4().hex[:8]}")
        self.client.on_message = self._on_message
        self.client.connect("127.0.0.1", port)
        self.client.subscribe(topic, qos=1)
        self.client.loop_start()

    def _on_message(self, _c: mqtt.Client, _u: object, msg: mqtt.MQTTMessage) -> None:
        with self._lock:
            self.payloads.append(bytes(msg.payload))

    def messages(self) -> list[bytes]:
        with self._lock:
            return list(self.payloads)

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


def _run(tmp_path: Path, broker: servers.Mosquitto, url_options: str, cycles: int
         ) -> tuple[Gateway, list[bytes], str, list[tuple[str, int, str, bytes]]]:
    site_id = f"limit-{uuid.uuid4().hex[:8]}"
    cfg = _site(tmp_path, site_id)
    clock = ScenarioClock(sim_start=SCENARIO.start, speed=300.0, wall_start=time.time() + 1.0)
    site = SimulatedSite(cfg, ProfileLibrary(), SCENARIO, clock)
    site.start()
    topic = topics.readings(site_id, "gw-limit")
    listener = _Listener(broker.port, topic)
    url = f"{broker.url}?{url_options}" if url_options else broker.url
    gw = Gateway(cfg, ProfileLibrary(), clock, url, tmp_path / "gw", batch=True,
                 confirm="broker", drain_timeout_s=20.0)
    try:
        gw.run(until=SCENARIO.start + timedelta(minutes=2 * cycles))  # returns once the outbox is empty
        kept = Outbox(tmp_path / "gw" / STATE_DB)  # what the gateway left in its state, read after it stopped
        letters = kept.dead_letters()
        kept.close()
        wait_until(lambda: sum(len(parse_readings(p)) for p in listener.messages()) + len(letters)
                   >= gw.readings_made, 15, "every reading published or dead-lettered", fail=False)
    finally:
        gw.stop()
        listener.close()
        site.stop()
    return gw, listener.messages(), topic, letters


@pytest.mark.parametrize(("protocol", "broker_limit", "url_options"), [
    (5, 300, "protocol=5"),  # announced in CONNACK
    (4, 700, "max_packet_size=700"),  # MQTT 3.1.1: configured in the broker URL
], ids=["announced-mqtt5", "configured-mqtt311"])
def test_batches_fit_the_broker_packet_limit_and_a_reading_that_never_fits_is_a_dead_letter(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, protocol: int, broker_limit: int, url_options: str) -> None:
    caplog.set_level(logging.INFO)
    broker = servers.mosquitto(tmp_path / "mosquitto", extra_conf=f"max_packet_size {broker_limit}\n")
    broker.start()
    try:
        gw, payloads, topic, letters = _run(tmp_path, broker, url_options, cycles=8)
        broker_log = (broker.data_dir / "mosquitto.log").read_text(errors="replace")
    finally:
        broker.stop()
    got = [r for p in payloads for r in parse_readings(p)]
    # every reading once: published or a local dead letter, none waiting, none twice
    assert gw.outbox_depth() == 0
    assert sorted([r.seq for r in got] + [seq for _, seq, _, _ in letters]) == list(range(gw.readings_made))
    assert all(_packet(topic, p, protocol) <= broker_limit for p in payloads)  # every message fits
    assert all(_packet(topic, p, protocol) > broker_limit for _, _, _, p in letters)  # each letter never could
    assert max(len(parse_readings(p)) for p in payloads) < 5  # a 5-reading poll cycle went as several messages
    if protocol == 5:  # at 300 bytes every rain reading is too large, every probe reading fits
        assert {json.loads(p)["device"] for _, _, _, p in letters} == {LONG_RAIN}
        assert {r.device for r in got} == {"turb-up", "turb-down"}
    else:
        assert not letters and len(got) == gw.readings_made
    errors = [r.getMessage() for r in caplog.records if r.name == PUBLISHER and r.levelno >= logging.ERROR]
    assert len(errors) == len(letters)  # one ERROR per dead letter, naming its size and the limit
    for (_, seq, reason, payload), message in zip(letters, errors, strict=True):
        size = _packet(topic, payload, protocol)
        assert f"reading seq {seq} " in message and f"a {size}-byte packet" in message
        assert f"limit of {broker_limit} bytes" in message and reason in message
    assert gw.publisher.session.losses == 0 and "too large" not in broker_log.lower()
    assert not any("session taken over" in r.getMessage() for r in caplog.records)


def test_an_mqtt311_broker_closing_over_a_packet_size_is_diagnosed_and_batches_are_split_to_pass(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Without the limit (MQTT 3.1.1, none in the URL), Mosquitto closes the connection on a batch over
    700 bytes: the ERROR names the message's size and the broker's limit as the likely cause, not a
    takeover, and the gateway splits its batches until they pass -- every reading arrives, the outbox
    empties, nothing is dead-lettered on a presumed limit."""
    caplog.set_level(logging.INFO)
    broker = servers.mosquitto(tmp_path / "mosquitto", extra_conf="max_packet_size 700\n")
    broker.start()
    try:
        gw, payloads, topic, letters = _run(tmp_path, broker, "", cycles=8)
    finally:
        broker.stop()
    got = [r for p in payloads for r in parse_readings(p)]
    assert gw.outbox_depth() == 0 and not letters
    assert sorted(r.seq for r in got) == list(range(gw.readings_made))  # every reading, once
    assert all(_packet(topic, p, 4) <= 700 for p in payloads)  # what passed fits the broker's limit
    assert 1 <= gw.publisher.session.losses <= 3  # a presumed limit is halved at most a few times
    errors = [r.getMessage() for r in caplog.records if r.name == PUBLISHER and r.levelno >= logging.ERROR]
    assert errors and all("bytes was on its way" in e and "max_packet_size" in e for e in errors)
    assert not any("session taken over" in r.getMessage() for r in caplog.records)
    assert gw.publisher.session.takeovers == 0
