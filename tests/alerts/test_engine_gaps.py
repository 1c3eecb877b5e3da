"""Data gaps (docs/rules.md, "Data gaps"): a rain gauge whose gateway's last will fires and that stays silent
for 3 hours gives a data_gap covering exactly that window (last reading before it to the first
after it), opened once the clock passes two poll intervals after its last reading, on real
Mosquitto, and `evaluate` over the period reports rain there as unknown, never dry. A gateway
back online before that lost no poll slot: no gap. Also: silence alone (no last will) opens a gap
after two poll intervals of event time."""

from __future__ import annotations

import json
import socket
import threading
from datetime import timedelta
from pathlib import Path

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from stormwatch import topics
from stormwatch.alerts.backfill import evaluate
from stormwatch.alerts.engine import Engine
from stormwatch.alerts.service import AlertService
from stormwatch.clock import ManualClock
from stormwatch.contract import Event, dump_readings
from stormwatch.profiles import ProfileLibrary
from stormwatch.stores.sqlite import SqliteStore
from stormwatch.wire import format_time
from tests.alerts_support import BACK_AT, MIN, SILENT_FROM, T0, Feeder, minute, site
from tests.names import run_unique
from tests.waits import wait_until

ALLOWANCE = timedelta(seconds=1200)  # two of the rain gauge's 600-s poll intervals


def test_gateway_last_will_and_three_silent_hours_give_a_data_gap_never_dry(mosquitto_server, tmp_path: Path) -> None:
    cfg = site("ch133", rules={})
    feed = Feeder()
    before = [r for i in range(60) for r in minute(feed, i)]
    after = [r for i in range(240, 300) for r in minute(feed, i)]
    store = SqliteStore(tmp_path / "store.db")
    clock = ManualClock(SILENT_FROM + MIN)
    seen: list[Event] = []
    service = AlertService([cfg], ProfileLibrary(), mosquitto_server.url, store, tmp_path / "state.db", clock,
                           client_id=run_unique("gap-svc"), lateness_s=120, on_event=seen.append, overdue_check_s=0.1)
    runner = threading.Thread(target=service.run, daemon=True)
    runner.start()
    # the "gateway": publishes readings, has a last will on its status topic, then dies without DISCONNECT
    gw = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=run_unique("gap-gw"), protocol=mqtt.MQTTv311)
    gw.will_set(topics.status("s1", "gw"), json.dumps({"state": "offline"}), qos=1, retain=True)
    gw.connect("127.0.0.1", mosquitto_server.port)
    gw.loop_start()
    try:
        assert service.connected.wait(10)  # subscribed (SUBACK)
        store.write_readings(before)  # what ingest would have written
        for r in before:
            gw.publish(topics.readings("s1", "gw"), dump_readings([r]), qos=1).wait_for_publish(5)
        wait_until(lambda: service.readings_seen >= len(before), what="the readings before the outage")
        gw.loop_stop()
        gw.socket().shutdown(socket.SHUT_RDWR)  # the broker sees the link die: it publishes the last will
        gw.socket().close()
        wait_until(lambda: service.messages_handled > len(before), what="the last will")
        assert not [e for e in seen if e.kind == "data_gap"]  # no poll slot missed yet (600-s polls)
        clock.set(SILENT_FROM + ALLOWANCE + timedelta(seconds=1))
        wait_until(lambda: any(e.kind == "data_gap" for e in seen), what="the last will's data_gap")
        clock.set(BACK_AT)
        back = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=run_unique("gap-gw2"), protocol=mqtt.MQTTv311)
        back.connect("127.0.0.1", mosquitto_server.port)
        back.loop_start()
        store.write_readings(after)
        for r in after:
            back.publish(topics.readings("s1", "gw"), dump_readings([r]), qos=1).wait_for_publish(5)
        wait_until(lambda: service.readings_seen >= len(before) + len(after), what="every reading")
        back.publish(topics.status("s1", "gw"), b"", qos=1, retain=True).wait_for_publish(5)  # clear the will
        back.loop_stop()
    finally:
        service.stop()
        runner.join(10)
    gaps = [e for e in seen if e.kind == "data_gap"]
    assert [(g.gap_start, g.gap_end) for g in gaps] == [(SILENT_FROM, None), (SILENT_FROM, BACK_AT)]
    assert gaps[0].event_time == SILENT_FROM + ALLOWANCE  # the allowance passed on the clock after the will
    assert len({g.occurrence for g in gaps}) == 1
    assert {e.kind for e in store.query_events("s1")} >= {"data_gap"}

    result = evaluate(cfg, ProfileLibrary(), store, T0, T0 + 300 * MIN)
    store.close()
    assert [(g.start, g.end) for g in result.gaps] == [(SILENT_FROM, BACK_AT)]
    text = result.summary()
    assert "UNKNOWN" in text and f"{format_time(SILENT_FROM)} to {format_time(BACK_AT)}" in text
    assert "data complete" not in text
    assert result.to_json()["data_gaps"] == [{"device": "rain", "start": "2026-06-01T12:59:00Z",
                                              "end": "2026-06-01T16:00:00Z"}]


def test_a_gateway_back_online_within_two_poll_intervals_of_its_last_will_is_no_data_gap(
        mosquitto_server, tmp_path: Path) -> None:
    cfg = site("ch133", rules={})
    feed = Feeder()
    before = [r for i in range(60) for r in minute(feed, i)]
    after = minute(feed, 69)  # the gauge's next 600-s slot after its reading at 59 min
    clock = ManualClock(SILENT_FROM + MIN)
    seen: list[Event] = []
    service = AlertService([cfg], ProfileLibrary(), mosquitto_server.url, None, tmp_path / "state.db", clock,
                           client_id=run_unique("back-svc"), lateness_s=120, on_event=seen.append,
                           overdue_check_s=0.1)
    runner = threading.Thread(target=service.run, daemon=True)
    runner.start()
    status = topics.status("s1", "gw")
    gw = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=run_unique("back-gw"), protocol=mqtt.MQTTv311)
    gw.will_set(status, json.dumps({"state": "offline"}), qos=1, retain=True)
    gw.connect("127.0.0.1", mosquitto_server.port)
    gw.loop_start()
    try:
        assert service.connected.wait(10)
        for r in before:
            gw.publish(topics.readings("s1", "gw"), dump_readings([r]), qos=1).wait_for_publish(5)
        wait_until(lambda: service.readings_seen >= len(before), what="the readings before the crash")
        gw.loop_stop()
        gw.socket().shutdown(socket.SHUT_RDWR)  # the broker publishes the last will
        gw.socket().close()
        wait_until(lambda: service.messages_handled > len(before), what="the last will")
        clock.set(T0 + 69 * MIN)  # restarted before its next poll slot: online, then that slot's readings
        back = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=run_unique("back-gw2"), protocol=mqtt.MQTTv311)
        back.connect("127.0.0.1", mosquitto_server.port)
        back.loop_start()
        back.publish(status, json.dumps({"state": "online"}), qos=1, retain=True).wait_for_publish(5)
        for r in after:
            back.publish(topics.readings("s1", "gw"), dump_readings([r]), qos=1).wait_for_publish(5)
        wait_until(lambda: service.readings_seen >= len(before) + len(after), what="the slot's readings")
        clock.set(BACK_AT)  # far past any allowance: only a will still pending could open a gap now
        checks = service.overdue_checks
        wait_until(lambda: service.overdue_checks >= checks + 2, what="two ticks of the service at the new time")
        back.publish(status, b"", qos=1, retain=True).wait_for_publish(5)  # clear the retained status
        back.loop_stop()
    finally:
        service.stop()
        runner.join(10)
    assert [e for e in seen if e.kind == "data_gap"] == []


def test_gauge_silence_alone_opens_a_gap_after_two_poll_intervals() -> None:
    cfg = site("ch133")  # rain gauge polled every 600 s: silent for more than 1200 s is a gap
    engine = Engine.for_site(cfg, ProfileLibrary(), None, 0)
    feed = Feeder()
    events = engine.feed(feed.tips(0, T0))
    for k in range(1, 40):  # only the turbidity probes keep reporting
        events += engine.feed(feed("up", "turbidity", 5.0, "NTU", T0 + k * MIN))
    (gap,) = [e for e in events if e.kind == "data_gap"]
    assert gap.gap_start == T0 and gap.gap_end is None and gap.event_time == T0 + timedelta(seconds=1200)
    closed = [e for e in engine.feed(feed.tips(0, T0 + 45 * MIN)) if e.kind == "data_gap"]
    assert [(e.gap_start, e.gap_end) for e in closed] == [(T0, T0 + 45 * MIN)]


def test_evaluate_without_any_gauge_data_never_says_dry(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "store.db")
    feed = Feeder()
    store.write_readings([feed("up", "turbidity", 5.0, "NTU", T0 + k * MIN) for k in range(30)])
    result = evaluate(site("ch133"), ProfileLibrary(), store, T0, T0 + timedelta(hours=1))
    store.close()
    assert result.qualifying_storms == [] and [(g.start, g.end) for g in result.gaps] == [(T0, None)]
    assert "UNKNOWN" in result.summary()
