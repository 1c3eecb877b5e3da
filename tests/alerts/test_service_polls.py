"""AlertService against a real Mosquitto: three sites' polls sent one reading a message, the broker
interleaving the sites, give the same events -- kinds, times, work orders, messages, in each site's
order -- when the service feeds a site's messages of one poll as one cycle (the messages of a socket
read at once, alerts/mqttbatch.py) as when it feeds each message on its own (paho's path)."""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from stormwatch import topics
from stormwatch.alerts.mqttbatch import BatchReadClient
from stormwatch.alerts.service import AlertService
from stormwatch.clock import ManualClock
from stormwatch.config import parse_site
from stormwatch.contract import Event, dump_readings
from stormwatch.profiles import ProfileLibrary
from tests.alerts_support import T0, Feeder, scenario, site_doc
from tests.names import run_unique
from tests.waits import wait_until

SITES = ("sa", "sb", "sc")
HOURS = 3


def _service(tmp_path: Path, name: str, broker_url: str, seen: list[Event]) -> AlertService:
    cfgs = []
    for sid in SITES:
        doc = site_doc("ch133")
        doc["site"]["id"] = sid
        cfgs.append(parse_site(doc, f"{sid}.yaml"))
    return AlertService(cfgs, ProfileLibrary(), broker_url, None, tmp_path / f"{name}.db",
                        ManualClock(T0 + timedelta(hours=HOURS + 1)),  # past the last reading
                        client_id=run_unique(f"alerts-polls-{name}"), lateness_s=120, on_event=seen.append)


def _key(e: Event) -> tuple[Any, ...]:
    return (e.site, e.kind, e.rule, e.occurrence, e.event_time, e.work_order, e.due_at, e.message)


def test_a_poll_fed_whole_gives_the_events_of_its_messages(mosquitto_server: Any, tmp_path: Path) -> None:
    polls = {sid: scenario(Feeder(site=sid, gateway="gw"), HOURS) for sid in SITES}
    whole: list[Event] = []
    each: list[Event] = []
    joined = _service(tmp_path, "joined", mosquitto_server.url, whole)
    apart = _service(tmp_path, "apart", mosquitto_server.url, each)
    assert isinstance(joined.session, BatchReadClient) and isinstance(apart.session, BatchReadClient)
    apart.session.on_deliveries = None  # the reference: each message on its own, as paho hands it over
    runners = [threading.Thread(target=s.run, daemon=True) for s in (joined, apart)]
    for r in runners:
        r.start()
    pub = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=run_unique("alerts-polls-pub"), protocol=mqtt.MQTTv311)
    pub.connect("127.0.0.1", mosquitto_server.port)
    pub.loop_start()
    try:
        assert joined.connected.wait(10) and apart.connected.wait(10)
        sent = 0
        infos = []
        for k in range(0, len(polls[SITES[0]]), 4):  # a minute's poll of each site, the sites interleaved
            for i in range(4):
                for sid in SITES:
                    infos.append(pub.publish(topics.readings(sid, "gw"), dump_readings([polls[sid][k + i]]), qos=1))
                    sent += 1
        for info in infos:
            info.wait_for_publish(10)
        wait_until(lambda: joined.messages_handled == sent and apart.messages_handled == sent, timeout_s=60,
                   what="every message handled by both services")
    finally:
        for s in (joined, apart):
            s.stop()
        for r in runners:
            r.join(10)
        pub.loop_stop()
    for sid in SITES:
        assert [_key(e) for e in whole if e.site == sid] == [_key(e) for e in each if e.site == sid]
    assert joined.readings_seen == apart.readings_seen == sent
    kinds = {e.kind for e in whole}
    assert {"storm_started", "storm_qualified", "basin_capacity_warning", "turbidity_cleared"} <= kinds, kinds
