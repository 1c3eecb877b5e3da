"""Failure kind #11 (docs/reference/failure-kinds.md), "Dead device looks alive": a retained
"online" status without a matching last-will "offline" makes a dead gateway look healthy; a data
gap during rain is "unknown", not "no rain".

On a real Mosquitto with the real AlertService: gateway ``gw`` (the rain gauge's) publishes its
retained online status, rain and turbidity readings, then hangs -- its MQTT connection stays up,
so the broker never fires its last will and the retained status keeps saying "online". A second
gateway ``gw2`` of the same site keeps reporting turbidity, so the site's event time advances. The
engine's gauge-silence rule (alerts/rules/storm.py: silent for more than two poll intervals of
event time) must open a data_gap starting at the gauge's last reading, and a restarted service,
which receives the retained "online" on subscribe, must neither close nor forget it.
"""

from __future__ import annotations

import json
import logging
import threading
from datetime import timedelta
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from stormwatch import topics
from stormwatch.alerts.rules.storm import GapSummary
from stormwatch.alerts.service import AlertService
from stormwatch.app import servers
from stormwatch.clock import ManualClock
from stormwatch.contract import Event, Reading, dump_readings
from stormwatch.profiles import ProfileLibrary
from stormwatch.stores.sqlite import SqliteStore
from tests.alerts_support import T0, Feeder, site
from tests.waits import wait_until

MIN = timedelta(minutes=1)
RAIN_TIPS = [3, 5, 4, 6]  # at T0, +10, +20, +30 min (the gauge is polled every 600 s): 18 tips, 0.18 in
LAST_RAIN = T0 + 30 * MIN
ALLOWANCE = timedelta(seconds=2 * 600)  # two rain-gauge poll intervals (alerts/engine.py)


def _client(broker: servers.Mosquitto, client_id: str, will: bool = False) -> mqtt.Client:
    c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv311)
    if will:
        c.will_set(topics.status("s1", client_id), json.dumps({"state": "offline"}), qos=1, retain=True)
    c.connect("127.0.0.1", broker.port)
    c.loop_start()
    return c


def _publish(client: mqtt.Client, gateway: str, readings: list[Reading]) -> None:
    for r in readings:
        client.publish(topics.readings("s1", gateway), dump_readings([r]), qos=1).wait_for_publish(5)


class _Service:
    def __init__(self, broker: servers.Mosquitto, store: SqliteStore, tmp_path: Path, at: Reading | None,
                 caplog: pytest.LogCaptureFixture) -> None:
        self.seen: list[Event] = []
        self.clock = ManualClock(at.time if at else T0)
        self.svc = AlertService([site("ch133")], ProfileLibrary(), broker.url, store, tmp_path / "state.db",
                                self.clock, client_id="alive-svc", lateness_s=120, on_event=self.seen.append,
                                overdue_check_s=0.1)
        self.thread = threading.Thread(target=self.svc.run, daemon=True)
        self.thread.start()
        assert self.svc.connected.wait(10)  # subscribed; gw's retained status comes on subscribe
        wait_until(lambda: any("gateway gw status" in r.getMessage() for r in caplog.records), 10,
                   "the retained status of gw")

    def stop(self) -> None:
        self.svc.stop()
        self.thread.join(10)
        assert not self.thread.is_alive()


def test_hung_gateway_with_retained_online_still_gives_a_data_gap_from_its_last_rain_reading(
        own_mosquitto: servers.Mosquitto, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="stormwatch.alerts.service")
    store = SqliteStore(tmp_path / "store.db")  # what ingest writes; the restarted service warms up from it
    feed, other = Feeder(gateway="gw", boot="b1"), Feeder(gateway="gw2", boot="b2")
    before = [feed.tips(n, T0 + 10 * k * MIN) for k, n in enumerate(RAIN_TIPS)]
    before += [feed("up", "turbidity", 12.0, "NTU", T0 + i * MIN) for i in range(31)]
    after = [other(dev, "turbidity", 14.0, "NTU", T0 + i * MIN) for i in range(31, 81) for dev in ("up", "down")]
    later = [other(dev, "turbidity", 15.0, "NTU", T0 + i * MIN) for i in range(81, 101) for dev in ("up", "down")]

    gw = _client(own_mosquitto, "gw", will=True)
    gw2 = _client(own_mosquitto, "gw2")
    first: _Service | None = None
    second: _Service | None = None
    try:
        gw.publish(topics.status("s1", "gw"), json.dumps({"state": "online", "boot": "b1"}), qos=1,
                   retain=True).wait_for_publish(5)
        first = _Service(own_mosquitto, store, tmp_path, None, caplog)
        first.clock.set(LAST_RAIN)  # the clock runs with the readings (the engine ignores readings from its future)
        store.write_readings(before)
        _publish(gw, "gw", before)
        # gw hangs now: connection alive (no last will), nothing published. gw2 keeps the site's time going.
        first.clock.set(T0 + 80 * MIN)
        store.write_readings(after)
        _publish(gw2, "gw2", after)
        wait_until(lambda: first.svc.readings_seen == len(before) + len(after), what="every reading")
        wait_until(lambda: any(e.kind == "data_gap" for e in first.seen), what="a data_gap")
        first.stop()
        engine1 = first.svc.engines["s1"]
        gaps1 = [e for e in first.seen if e.kind == "data_gap"]

        # Restart: the new service gets the retained "online" on subscribe, then gw2's next readings.
        caplog.clear()
        second = _Service(own_mosquitto, store, tmp_path, after[-1], caplog)
        retained = [r.getMessage() for r in caplog.records if "gateway gw status" in r.getMessage()]
        second.clock.set(T0 + 100 * MIN)
        store.write_readings(later)
        _publish(gw2, "gw2", later)
        wait_until(lambda: second.svc.readings_seen == len(later), what="the later readings")
        second.stop()
        stored = store.query_events("s1")
    finally:
        for c in (gw, gw2):
            c.publish(topics.status("s1", c._client_id.decode()), b"", qos=1, retain=True).wait_for_publish(5)
            c.disconnect()
            c.loop_stop()
        for s in (first, second):
            if s is not None and s.thread.is_alive():
                s.stop()
        store.close()

    # First service: one gap, opened by silence alone, from the last rain reading; the storm stays open.
    assert [(g.gap_start, g.gap_end, g.event_time) for g in gaps1] == [(LAST_RAIN, None, LAST_RAIN + ALLOWANCE)]
    assert gaps1[0].occurrence == "gap:rain:2026-06-01T12:30:00Z"
    assert [e.kind for e in first.seen if e.rule == gaps1[0].rule and e.kind.startswith("storm")] == ["storm_started"]
    (storm,) = engine1.in_progress()  # rain of unknown end: in progress, never "ended dry"
    assert (storm.start, storm.last_tip, storm.tips, storm.depth_in) == (T0, LAST_RAIN, 18, 0.18)

    # Restarted service: it did get gw's retained "online" (not taken as a sign of life) ...
    assert len(retained) == 1 and retained[0].startswith("s1: gateway gw status online (retained: ")
    # ... which neither closed nor hid the gap; nothing new published.
    engine2 = second.svc.engines["s1"]
    assert engine2.gaps() == [GapSummary("rain", LAST_RAIN, None)]
    assert not [e for e in second.seen if e.kind == "data_gap"]
    assert [(s.tips, s.last_tip) for s in engine2.in_progress()] == [(18, LAST_RAIN)]
    assert [(g.gap_start, g.gap_end) for g in stored if g.kind == "data_gap"] == [(LAST_RAIN, None)]
