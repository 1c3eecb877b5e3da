"""The portfolio's gateway column from the gateways' retained status on a real Mosquitto broker."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from stormwatch import topics
from stormwatch.runtime.mqtt import parse_broker_url
from stormwatch.web.gateways import GatewayWatch
from tests.waits import wait_until
from tests.web_support import A, B, build, client, login


@pytest.mark.mosquitto
def test_portfolio_shows_each_gateways_last_status(mosquitto_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    world = build(tmp_path)
    pub = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"test-{uuid.uuid4().hex[:8]}")
    pub.connect("127.0.0.1", mosquitto_server.port)
    pub.loop_start()
    for topic, doc in ((topics.status(A, "gw-riverside-1"), {"state": "online", "boot": "b1", "outbox_depth": 3,
                                                              "session_takeovers": 2, "time": "2026-06-02T15:58:00Z"}),
                       (topics.status(B, "gw-hilltop-1"), {"state": "offline"})):
        pub.publish(topic, json.dumps(doc), qos=1, retain=True).wait_for_publish(5)
    pub.publish(topics.status("elsewhere", "gw-x"), b"not json", qos=1).wait_for_publish(5)
    watch = GatewayWatch(parse_broker_url(mosquitto_server.url), client_id=f"web-{uuid.uuid4().hex[:8]}")
    watch.start()
    try:
        assert watch.connected.wait(10)
        # the broker may hold other tests' retained statuses too: wait for these two
        mine = {(A, "gw-riverside-1"), (B, "gw-hilltop-1")}
        wait_until(lambda: mine <= set(watch.statuses()), what="both sites' retained gateway statuses")
        assert watch.statuses()[(A, "gw-riverside-1")].outbox_depth == 3
        assert watch.statuses()[(A, "gw-riverside-1")].session_takeovers == 2
        desk_client = client(world)
        login(desk_client, "sam")
        # the desk built by client() has no watch; attach it the way `stormwatch web --broker` does
        app_desk = desk_client.app.state.desk
        app_desk.gateways = watch.statuses
        html = re.sub(r"\s+", " ", desk_client.get("/").text)
        rows = dict(re.findall(r'<tr class="row-\w+" data-site="([\w-]+)">(.*?)</tr>', html))
        assert "online, outbox 3" in rows[A] and "status of Tue 02 Jun 2026 11:58 EDT" in rows[A]
        assert "its MQTT session was taken over 2 times: another gateway uses its site and gateway id" in rows[A]
        assert re.search(r'class="s-alert"[^>]*>offline<', rows[B]), rows[B]
    finally:
        watch.stop()
        for topic in (topics.status(A, "gw-riverside-1"), topics.status(B, "gw-hilltop-1")):
            pub.publish(topic, b"", qos=1, retain=True).wait_for_publish(5)  # clear the retained messages
        pub.loop_stop()
        pub.disconnect()
