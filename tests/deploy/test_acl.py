"""The compose stack's broker security on a real Mosquitto: deploy/mosquitto/mosquitto.conf (with
listener, paths and logging moved to a temp dir), the committed ACL (deploy/mosquitto/acl) and a
password file made by deploy/mosquitto/make-passwd.sh from .env.example's dev passwords.

MQTT v5 makes a refusal visible: Mosquitto 2.0 answers an ACL-denied QoS 1 PUBLISH with PUBACK
reason code 0x87 (Not authorized) instead of silently dropping it.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.reasoncodes import ReasonCode

from stormwatch import topics
from stormwatch.app import servers
from tests.conftest import REPO

pytestmark = [pytest.mark.slow, pytest.mark.mosquitto]  # slow: starts Mosquitto processes

DEPLOY = REPO / "deploy" / "mosquitto"
NOT_AUTHORIZED = 0x87
#: Accepted: 0x00 Success, or 0x10 No matching subscribers (accepted, nobody listening).
ACCEPTED = (0x00, 0x10)
SITE_A, GW_A = "riverside-commons", "gw-riverside-1"
SITE_B = "hilltop"


def _need(binary: str) -> str:
    found = servers.find_binary(binary)
    if found is None:
        msg = f"{binary} not installed (Debian: apt-get install mosquitto)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {msg}")
        pytest.skip(msg)
    return found


def env_example() -> dict[str, str]:
    out = {}
    for line in (REPO / ".env.example").read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            out[key] = value
    return out


def compose_conf(port: int, data: Path) -> str:
    """deploy/mosquitto/mosquitto.conf with only host-specific directives replaced."""
    replace = {
        "listener": f"listener {port} 127.0.0.1",
        "password_file": f"password_file {data / 'passwd'}",
        "acl_file": f"acl_file {DEPLOY / 'acl'}",
        "persistence_location": f"persistence_location {data}/",
        "log_dest": f"log_dest file {data / 'mosquitto.log'}",
    }
    lines = []
    for line in (DEPLOY / "mosquitto.conf").read_text().splitlines():
        key = line.split(" ", 1)[0]
        lines.append(replace.pop(key, line))
    assert not replace, f"mosquitto.conf lacks {sorted(replace)}"
    # Started as root, mosquitto would drop to user "mosquitto", who cannot read pytest's 0700 dirs.
    lines.append(f"user {pwd.getpwuid(os.getuid()).pw_name}")
    return "\n".join(lines) + "\n"


@pytest.fixture()
def broker(tmp_path: Path) -> Iterator[servers.Mosquitto]:
    binary = _need("mosquitto")
    _need("mosquitto_passwd")
    data = tmp_path / "mosquitto"
    data.mkdir()
    env = {**os.environ, **env_example()}
    subprocess.run(["sh", str(DEPLOY / "make-passwd.sh"), str(data / "passwd")], env=env, check=True,
                   capture_output=True, timeout=30)
    port = servers.free_port()
    (data / "mosquitto.conf").write_text(compose_conf(port, data))
    srv = servers.Mosquitto("mosquitto", [binary, "-c", str(data / "mosquitto.conf")], port, data)
    srv.start()
    yield srv
    srv.stop()


class Client:
    """A paho MQTT v5 client that records CONNACK and PUBACK reason codes and received topics."""

    def __init__(self, port: int, user: str | None, password: str | None) -> None:
        self.connack: ReasonCode | None = None
        self.connected = threading.Event()
        self.pubacks: dict[int, ReasonCode] = {}
        self.acked = threading.Condition()
        self.received: list[str] = []
        self.subscribed = threading.Event()
        self.suback: list[ReasonCode] = []
        self.c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"acl-{uuid.uuid4().hex[:8]}",
                             protocol=mqtt.MQTTv5)
        if user is not None:
            self.c.username_pw_set(user, password)
        self.c.on_connect = self._on_connect
        self.c.on_publish = self._on_publish
        self.c.on_message = lambda _c, _u, msg: self.received.append(msg.topic)
        self.c.on_subscribe = self._on_subscribe
        self.c.connect("127.0.0.1", port, keepalive=10)
        self.c.loop_start()
        assert self.connected.wait(10), "no CONNACK"

    def _on_connect(self, _c: mqtt.Client, _u: object, _f: object, rc: ReasonCode, _p: object) -> None:
        self.connack = rc
        self.connected.set()

    def _on_subscribe(self, _c: mqtt.Client, _u: object, _mid: int, codes: list[ReasonCode], _p: object) -> None:
        self.suback = list(codes)
        self.subscribed.set()

    def _on_publish(self, _c: mqtt.Client, _u: object, mid: int, rc: ReasonCode, _p: object) -> None:
        with self.acked:
            self.pubacks[mid] = rc
            self.acked.notify_all()

    def publish(self, topic: str) -> int:
        """Publish at QoS 1 and return the PUBACK reason code (0 = accepted)."""
        info = self.c.publish(topic, b'{"state":"online"}', qos=1)
        with self.acked:
            assert self.acked.wait_for(lambda: info.mid in self.pubacks, 10), f"no PUBACK for {topic}"
            return self.pubacks[info.mid].value

    def close(self) -> None:
        self.c.disconnect()
        self.c.loop_stop()


def test_gateway_publishes_only_under_its_own_site(broker: servers.Mosquitto) -> None:
    env = env_example()
    assert env["MQTT_GATEWAY_USER"] == GW_A
    ingest = Client(broker.port, "ingest", env["MQTT_INGEST_PASSWORD"])
    gw = Client(broker.port, GW_A, env["MQTT_GATEWAY_PASSWORD"])
    try:
        assert ingest.connack is not None and ingest.connack.value == 0
        assert gw.connack is not None and gw.connack.value == 0
        ingest.c.subscribe(topics.READINGS_FILTER, qos=1)
        assert ingest.subscribed.wait(10)
        own = topics.readings(SITE_A, GW_A)
        # refused: another site, another gateway id at its own site, the events topic
        assert gw.publish(topics.readings(SITE_B, GW_A)) == NOT_AUTHORIZED
        assert gw.publish(topics.readings(SITE_A, "gw-other")) == NOT_AUTHORIZED
        assert gw.publish(topics.events(SITE_A)) == NOT_AUTHORIZED
        # accepted: its own readings and status
        assert gw.publish(own) == 0  # ingest subscribes to it
        assert gw.publish(topics.status(SITE_A, GW_A)) in ACCEPTED
        assert ingest.publish(topics.DEADLETTER) in ACCEPTED
        assert ingest.publish(own) == NOT_AUTHORIZED  # the consumer cannot forge readings
        deadline = threading.Event()
        for _ in range(50):
            if own in ingest.received:
                break
            deadline.wait(0.1)
        assert ingest.received == [own]  # nothing refused was delivered
    finally:
        gw.close()
        ingest.close()


def test_a_gateway_hears_ingests_confirmations_of_its_own_readings_and_cannot_forge_them(
        broker: servers.Mosquitto) -> None:
    """Ingest publishes stored-acknowledgements on stormwatch/v1/<site>/<gateway>/stored; the
    gateway may subscribe to its own (else its outbox would never empty), to no other, and may not
    publish there (a confirmation it wrote itself would make it forget readings nobody stored)."""
    env = env_example()
    ingest = Client(broker.port, "ingest", env["MQTT_INGEST_PASSWORD"])
    gw = Client(broker.port, GW_A, env["MQTT_GATEWAY_PASSWORD"])
    web = Client(broker.port, "web", env["MQTT_WEB_PASSWORD"])
    own, other = topics.stored(SITE_A, GW_A), topics.stored(SITE_B, "gw-hilltop-1")
    try:
        gw.c.subscribe([(own, 1), (other, 1)])
        assert gw.subscribed.wait(10)
        # Mosquitto 2.0 grants both and applies the ACL to what it delivers (below)
        assert not gw.suback[0].is_failure
        assert ingest.publish(own) in ACCEPTED
        assert ingest.publish(other) in ACCEPTED
        assert gw.publish(own) == NOT_AUTHORIZED
        assert web.publish(own) == NOT_AUTHORIZED
        wait = threading.Event()
        for _ in range(50):
            if gw.received:
                break
            wait.wait(0.1)
        assert gw.received == [own]
    finally:
        web.close()
        gw.close()
        ingest.close()


def test_the_web_desk_reads_gateway_status_and_nothing_else(broker: servers.Mosquitto) -> None:
    env = env_example()
    web = Client(broker.port, "web", env["MQTT_WEB_PASSWORD"])
    gw = Client(broker.port, GW_A, env["MQTT_GATEWAY_PASSWORD"])
    try:
        assert web.connack is not None and web.connack.value == 0
        web.c.subscribe([(topics.STATUS_FILTER, 1), (topics.READINGS_FILTER, 1)])
        assert web.subscribed.wait(10)
        for topic in (topics.status(SITE_A, GW_A), topics.events(SITE_A), topics.DEADLETTER):
            assert web.publish(topic) == NOT_AUTHORIZED  # it cannot forge a status, an event or a dead letter
        # readings first, then the status: were the readings delivered, they would arrive before it
        # (a broker keeps one publisher's QoS 1 messages in order)
        assert gw.publish(topics.readings(SITE_A, GW_A)) in ACCEPTED
        assert gw.publish(topics.status(SITE_A, GW_A)) in ACCEPTED
        wait = threading.Event()
        for _ in range(100):
            if web.received:
                break
            wait.wait(0.1)
        assert web.received == [topics.status(SITE_A, GW_A)]
    finally:
        gw.close()
        web.close()


def test_wrong_password_and_anonymous_are_refused(broker: servers.Mosquitto) -> None:
    for user, password in ((GW_A, "not-the-password"), (None, None)):
        c = Client(broker.port, user, password)
        try:
            assert c.connack is not None and c.connack.is_failure, (user, c.connack)
        finally:
            c.close()


def test_acl_users_match_the_password_file() -> None:
    """Every ACL user gets a password from make-passwd.sh and vice versa."""
    acl_users = set(re.findall(r"^user (\S+)$", (DEPLOY / "acl").read_text(), re.M))
    script = (DEPLOY / "make-passwd.sh").read_text()
    fixed = set(re.findall(r'mosquitto_passwd (?:-c )?-b "\$tmp" (\w+) ', script))
    assert fixed == {"ingest", "alerts", "healthcheck", "web"}
    assert acl_users == fixed | {env_example()["MQTT_GATEWAY_USER"]}
    assert shutil.which("sh")


def test_the_simulated_sites_lockstep_clock_each_user_its_own_part(broker: servers.Mosquitto) -> None:
    """The compose site's simulator (the gateway's user) conducts the lockstep clock; ingest and
    alerts follow it and say done, each under its own name only; the web desk has no part."""
    from stormwatch.runtime.mqttclock import clock_topic, done_topic

    env = env_example()
    gw = Client(broker.port, GW_A, env["MQTT_GATEWAY_PASSWORD"])
    ingest = Client(broker.port, "ingest", env["MQTT_INGEST_PASSWORD"])
    alerts = Client(broker.port, "alerts", env["MQTT_ALERTS_PASSWORD"])
    web = Client(broker.port, "web", env["MQTT_WEB_PASSWORD"])
    try:
        assert gw.publish(clock_topic(SITE_A)) in ACCEPTED
        assert gw.publish(done_topic(SITE_A, "gateway")) in ACCEPTED
        assert gw.publish(clock_topic(SITE_B)) == NOT_AUTHORIZED  # another site's clock
        assert ingest.publish(done_topic(SITE_A, "ingest")) in ACCEPTED
        assert alerts.publish(done_topic(SITE_A, "alerts")) in ACCEPTED
        for client, name in ((ingest, "alerts"), (alerts, "ingest"), (ingest, "gateway")):
            assert client.publish(done_topic(SITE_A, name)) == NOT_AUTHORIZED  # nobody says done for another
        for client in (ingest, alerts, web):
            assert client.publish(clock_topic(SITE_A)) == NOT_AUTHORIZED  # only the simulator moves time
        ingest.c.subscribe(clock_topic(SITE_A), qos=1)
        assert ingest.subscribed.wait(10)
        assert gw.publish(clock_topic(SITE_A)) == 0  # a subscriber: delivered
        wait = threading.Event()
        for _ in range(50):
            if ingest.received:
                break
            wait.wait(0.1)
        assert ingest.received == [clock_topic(SITE_A)]
    finally:
        for c in (web, alerts, ingest, gw):
            c.close()
