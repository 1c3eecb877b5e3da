"""The fleet simulator (`stormwatch simulate --fleet N`) publishes what N gateways would, on real Mosquitto.

Checked against independent sources: every message passes ingest's validator (the contract and the
site files), each gateway's identity is one boot with gap-free sequence numbers, each rain gauge's
tips add up to the scenario's tip series between its first and last poll (the design storm's own
tips, :class:`stormwatch.simulators.scenario.SiteScenario`), statuses are retained online/offline,
and a gateway whose process dies leaves its last will.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from stormwatch import topics
from stormwatch.app import servers
from stormwatch.clock import ManualClock
from stormwatch.config import device_profiles, load_site
from stormwatch.contract import Reading, parse_readings
from stormwatch.ingest.validate import Validator
from stormwatch.profiles import ProfileLibrary
from stormwatch.simulators.fleetsites import site_story
from stormwatch.simulators.scenario import SiteScenario
from tests.ingest_support import ids
from tests.waits import wait_until

START = datetime(2026, 6, 1, 4, tzinfo=UTC)


class Listener:
    """A clean-session QoS 1 subscriber to everything under stormwatch/v1 (messages kept in order)."""

    def __init__(self, broker: servers.Mosquitto) -> None:
        self.messages: list[tuple[str, bytes, bool]] = []
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"fleet-listener-{next(ids)}")
        self.client.on_message = lambda _c, _u, m: self.messages.append((m.topic, bytes(m.payload), bool(m.retain)))
        subscribed = threading.Event()
        self.client.on_subscribe = lambda *_args: subscribed.set()
        self.client.connect("127.0.0.1", broker.port)
        self.client.subscribe(f"{topics.ROOT}/#", qos=1)
        self.client.loop_start()
        assert subscribed.wait(10), "the listener's SUBACK"

    def stop(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


def _fleet(tmp: Path, broker: servers.Mosquitto, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "stormwatch", "simulate", "--fleet", "4", "--sites", str(tmp / "sites"),
         "--broker", broker.url, "--start", START.isoformat(), "--seed", "3", "--start-delay-s", "1", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("form", ["--single", "--batch"])
def test_fleet_publishes_what_gateways_would(tmp_path: Path, mosquitto_server: servers.Mosquitto, form: str) -> None:
    listener = Listener(mosquitto_server)
    hours = 1.5
    proc = _fleet(tmp_path, mosquitto_server, "--speed", "1200", "--duration-h", str(hours), form)
    out, err = proc.communicate(timeout=120)
    # each gateway's last message is its "stopped" status, after all its readings (one client, in order)
    stopped = {topics.status(f"fleet-000{i}", f"gw-fleet-000{i}") for i in range(1, 5)}
    wait_until(lambda: stopped <= {t for t, p, kept in listener.messages if t in stopped and not kept
                                   and json.loads(p) == {"state": "offline", "reason": "stopped"}},
               10, "the four gateways' stopped statuses")
    listener.stop()
    assert proc.returncode == 0, err[-3000:]
    summary = json.loads(out.strip().splitlines()[-1])

    library = ProfileLibrary()
    files = sorted((tmp_path / "sites").glob("*.yaml"))
    assert [f.name for f in files] == [f"fleet-000{i}.yaml" for i in range(1, 5)]
    sites = {cfg.site.id: cfg for cfg in (load_site(f, library) for f in files)}
    end = START + timedelta(hours=hours)

    validator = Validator.for_sites(sites.values(), library, ManualClock(end))
    readings_by_gw: dict[str, list[Reading]] = defaultdict(list)
    statuses: dict[str, list[dict[str, object]]] = defaultdict(list)
    for topic, payload, retained in listener.messages:
        if topic.endswith("/status") and not retained:  # retained: an earlier test's gateways
            statuses[topic].append(json.loads(payload))
        if not topic.endswith("/readings"):
            continue
        result = validator.validate(topic, payload)
        assert not result.dead, [d.detail for d in result.dead]
        rs = parse_readings(payload)
        if form == "--single":
            assert len(rs) == 1
        else:  # one message per poll cycle: every reading of the gateway's slot, devices of the site
            assert len({r.time for r in rs}) == 1 and len(rs) >= 5, [r.device for r in rs]
        readings_by_gw[rs[0].gateway] += rs
    assert sum(len(v) for v in readings_by_gw.values()) == summary["readings"]
    assert summary["acknowledged"] == summary["messages"] and summary["readings_acknowledged"] == summary["readings"]

    for index, (site_id, cfg) in enumerate(sorted(sites.items()), start=1):
        rs = readings_by_gw[cfg.gateway_id]
        assert len({r.boot for r in rs}) == 1
        assert sorted(r.seq for r in rs) == list(range(len(rs)))
        rain = [r for r in rs if r.quantity == "rain_tips"]
        # the gauge's first poll is its counter baseline; every later tip is counted exactly once
        story = site_story(index, START, hours, seed=3)
        tips = SiteScenario(story.scenario, cfg, device_profiles(cfg, library)).tips
        first, last = min(r.time for r in rain), max(r.time for r in rain)
        assert sum(r.value for r in rain) == tips.tips_between(first, last), (site_id, story.describe())
        # stored rain describes itself: every rain reading names its gauge's tip size (its profile's)
        assert cfg.rain_gauge is not None
        gauge = library.get(cfg.device(cfg.rain_gauge).profile).counter
        assert gauge is not None and {r.tip_size for r in rain} == {str(gauge.tip_resolution)}
        if story.silent is not None:  # nothing from the gauge while it is silent
            assert not [r for r in rain if story.silent[0] <= r.time < story.silent[1]]
        states = statuses[topics.status(site_id, cfg.gateway_id)]
        assert states[0]["state"] == "online" and states[0]["boot"] == rs[0].boot
        assert states[-1] == {"state": "offline", "reason": "stopped"}


def test_a_dead_fleet_leaves_its_gateways_last_wills(tmp_path: Path, mosquitto_server: servers.Mosquitto) -> None:
    listener = Listener(mosquitto_server)
    proc = _fleet(tmp_path, mosquitto_server, "--speed", "60", "--duration-h", "2")
    try:
        wait_until(lambda: sum(t.endswith("/readings") for t, _, _ in listener.messages) >= 4, 60, "readings")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        wills = {topics.status(f"fleet-000{i}", f"gw-fleet-000{i}") for i in range(1, 5)}
        def offline() -> set[str]:
            return {t for t, p, kept in listener.messages if not kept and json.loads(p) == {"state": "offline"}}

        wait_until(lambda: wills <= offline(), 10, "four last wills")
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
        listener.stop()


def test_an_attempt_the_broker_closes_before_accepting_it_is_retried_on_the_next_node(
        mosquitto_server: servers.Mosquitto) -> None:
    """A cluster node that accepts the TCP connection and closes it before CONNACK (NATS 2.9 does when it
    cannot restore the session's JetStream consumers in time) must not leave the gateway silent."""
    import socket
    import threading

    from stormwatch.runtime.mqtt import parse_broker_url
    from stormwatch.simulators.mqttfleet import MqttFleet

    closer = socket.create_server(("127.0.0.1", 0))
    attempts: list[int] = []

    def close_each() -> None:
        while True:
            try:
                conn, _ = closer.accept()
            except OSError:
                return
            attempts.append(1)
            conn.recv(1024)  # the CONNECT
            conn.close()

    threading.Thread(target=close_each, daemon=True).start()
    try:
        broker = parse_broker_url(f"mqtt://127.0.0.1:{closer.getsockname()[1]},127.0.0.1:{mosquitto_server.port}")
        fleet = MqttFleet(broker, 30, lambda: "2026-06-01T04:00:00Z")
        session = fleet.add(f"fleet-retry-{next(ids)}", "gw-retry", "b0")
        fleet.connect_all(timeout_s=20)
        assert session.connected and session.connects == 1 and attempts == [1]
        fleet.close(timeout_s=5)
    finally:
        closer.close()


def test_a_fleet_given_a_real_start_polls_from_it_on_that_clock(tmp_path: Path,
                                                               mosquitto_server: servers.Mosquitto) -> None:
    """--start-wall: services started earlier on a clock file of that start run on the fleet's clock."""
    listener = Listener(mosquitto_server)
    wall_start = time.time() + 8.0  # after the four gateways connect, even on a loaded machine
    proc = _fleet(tmp_path, mosquitto_server, "--speed", "60", "--duration-h", "0.1", "--start-wall",
                  f"{wall_start:.6f}", "--clock-file", str(tmp_path / "clock.json"), "--publish-log",
                  str(tmp_path / "published.csv"))
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        listener.stop()
    assert proc.returncode == 0, err
    clock = json.loads((tmp_path / "clock.json").read_text())
    assert clock["wall_start"] == pytest.approx(wall_start, abs=1e-3) and clock["speed"] == 60.0
    assert json.loads(out.splitlines()[-1])["readings"] > 0
    rows = (tmp_path / "published.csv").read_text().splitlines()[1:]
    assert rows and min(float(row.split(",")[2]) for row in rows) >= wall_start  # no poll before the start
    assert any(t.endswith("/readings") for t, _, _ in listener.messages)
