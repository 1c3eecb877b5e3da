"""A gateway's deliberate stop (retained ``offline`` with ``reason: stopped``) is not announced as an
outage, but the silence it leaves is still a data gap once readings resume (never "dry")."""

from __future__ import annotations

import json
from pathlib import Path

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from stormwatch import topics
from stormwatch.clock import ManualClock
from stormwatch.contract import dump_readings
from tests.alerts_support import BACK_AT, MIN, SILENT_FROM, Feeder, live_service, minute, site
from tests.names import run_unique
from tests.waits import wait_until


def test_clean_stop_opens_no_outage_but_the_silence_is_a_gap(mosquitto_server, tmp_path: Path) -> None:
    cfg = site("ch133", rules={})
    feed = Feeder()
    before = [r for i in range(60) for r in minute(feed, i)]
    after = [r for i in range(240, 300) for r in minute(feed, i)]
    clock = ManualClock(SILENT_FROM + MIN)
    gw = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=run_unique("stop-gw"), protocol=mqtt.MQTTv311)
    gw.connect("127.0.0.1", mosquitto_server.port)
    gw.loop_start()
    with live_service(cfg, mosquitto_server.url, tmp_path, clock, "stop-svc") as (service, seen, _store):
        for r in before:
            gw.publish(topics.readings("s1", "gw"), dump_readings([r]), qos=1).wait_for_publish(5)
        wait_until(lambda: service.readings_seen >= len(before), what="the readings before the stop")
        stopped = json.dumps({"state": "offline", "reason": "stopped"})
        handled = service.messages_handled
        gw.publish(topics.status("s1", "gw"), stopped, qos=1, retain=True).wait_for_publish(5)
        wait_until(lambda: service.messages_handled > handled, what="the stop status handled")
        assert [e for e in seen if e.kind == "data_gap"] == []  # a deliberate stop is not an outage
        clock.set(BACK_AT)
        for r in after:
            gw.publish(topics.readings("s1", "gw"), dump_readings([r]), qos=1).wait_for_publish(5)
        wait_until(lambda: service.readings_seen >= len(before) + len(after), what="every reading")
        wait_until(lambda: any(e.kind == "data_gap" for e in seen), what="a data_gap")
        gw.publish(topics.status("s1", "gw"), b"", qos=1, retain=True).wait_for_publish(5)
        gw.loop_stop()
    gaps = [(e.gap_start, e.gap_end) for e in seen if e.kind == "data_gap" and e.gap_end is not None]
    assert gaps == [(SILENT_FROM, BACK_AT)]
