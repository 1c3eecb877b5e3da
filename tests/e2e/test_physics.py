"""Values physics forbids, and flagged rain, end to end on a real Mosquitto and a real InfluxDB 1.x
(issue 11 item 5).

One stream of gateway-shaped payloads goes to the broker; ingest (into InfluxDB) and the alert
service both consume it:

* a negative tip count, a negative turbidity (alone, and inside a batch beside a good reading) are
  dead-lettered ``impossible_value`` -- the good reading of the batch is stored; the alert engine
  never counts them (the storm's tips and InfluxDB's ``SUM(tips)`` are the 60 good tips, not 55);
* a NaN / Infinity ``raw`` is dead-lettered ``schema`` naming ``raw`` -- nothing in the store holds
  the invalid JSON text ``NaN``;
* rain readings flagged ``device_error`` open and qualify a storm, and every storm event says
  ``needs_verification: ["device_error"]`` (also on the events topic);
* a ``counter_suspect`` then ``counter_reset`` reading make a ``data_gap`` from the last trusted
  reading to the reset.

Expected values by hand: 30 + 30 tips of 0.01 in = 0.60 in >= 0.5 in (R1, Ch. 133 §133-7A(2)); the
storm ends after the 6-h dry gap; the example site polls the gauge every 60 s.
"""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from stormwatch import topics
from stormwatch.alerts.service import AlertService
from stormwatch.app import servers
from stormwatch.clock import ManualClock
from stormwatch.config import load_site
from stormwatch.contract import Event
from stormwatch.profiles import ProfileLibrary
from stormwatch.stores.influx1 import Influx1Store
from tests.ingest_support import GW, REPO, SITE, T0, Publisher, Running, ids, influx_count
from tests.waits import wait_until

pytestmark = [pytest.mark.mosquitto, pytest.mark.influxdb]

MIN = timedelta(minutes=1)
seqs = iter(range(1, 100_000))


def reading(minute: int, device: str, quantity: str, value: object, unit: str, *, raw: object = None,
            flags: tuple[str, ...] = ()) -> dict[str, object]:
    return {"site": SITE, "device": device, "quantity": quantity, "value": value, "unit": unit,
            "time": (T0 + minute * MIN).isoformat(), "gateway": GW, "boot": "boot-p", "seq": next(seqs),
            "raw": raw, "flags": list(flags)}


def rain(minute: int, tips: int, *flags: str) -> dict[str, object]:
    return reading(minute, "rain-1", "rain_tips", tips, "{tip}", raw=1000 + minute, flags=flags)


def body(*readings: dict[str, object]) -> bytes:
    return json.dumps(readings[0] if len(readings) == 1 else {"readings": list(readings)}).encode()


def test_impossible_values_dead_lettered_and_flagged_rain_needs_verification(
        own_mosquitto: servers.Mosquitto, influx_server: servers.InfluxDB1, tmp_path) -> None:
    db = f"physics_{next(ids)}"
    store = Influx1Store(influx_server.url, db)
    ingest = Running(own_mosquitto, store, clock=ManualClock(T0 + timedelta(hours=8), on_sleep="wait"), batch_ms=50)
    profiles = ProfileLibrary()
    cfg = load_site(REPO / "examples" / "site.yaml", profiles)
    seen: list[Event] = []
    # the alert service on the same clock as ingest: both refuse readings from their future
    service = AlertService([cfg], profiles, own_mosquitto.url, None, tmp_path / "state.db",
                           ManualClock(T0 + timedelta(hours=8)), client_id=f"phys-alerts-{next(ids)}", lateness_s=0,
                           on_event=seen.append,
                           overdue_check_s=0.1)
    runner = threading.Thread(target=service.run, daemon=True)
    runner.start()
    on_topic: list[dict[str, object]] = []
    sub = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"phys-sub-{next(ids)}", protocol=mqtt.MQTTv311)
    sub.on_message = lambda _c, _u, m: on_topic.append(json.loads(m.payload))
    sub.connect("127.0.0.1", own_mosquitto.port)
    sub.subscribe(topics.events(SITE), qos=1)
    sub.loop_start()
    pub = Publisher(own_mosquitto)
    good_rain = 0
    try:
        assert service.connected.wait(10)  # subscribed (SUBACK)
        # The impossible and the non-finite, beside good data.
        pub.send(body(rain(0, 0)))
        pub.send(body(rain(1, 30, "device_error")))
        pub.send(body(rain(1, -5)))  # a negative tip count
        pub.send(body(reading(1, "turb-down", "turbidity", -3.0, "NTU")))  # a negative turbidity
        pub.send(body(reading(1, "turb-up", "turbidity", 12.5, "NTU"), reading(1, "turb-up", "turbidity", -1.0, "NTU")))
        pub.send(body(reading(2, "turb-up", "turbidity", 12.0, "NTU", raw=0.0)).replace(b'"raw": 0.0', b'"raw": NaN'))
        pub.send(body(reading(3, "turb-up", "turbidity", 12.0, "NTU", raw=0.0)).replace(b'"raw": 0.0',
                                                                                         b'"raw": Infinity'))
        pub.send(body(rain(2, 30)))
        good_rain = 3
        for m in range(3, 400):  # dry, once a minute: the storm ends 6 h after its last tip
            pub.send(body(rain(m, 0)))
            good_rain += 1
        pub.send(body(rain(400, 0, "counter_suspect")))
        pub.send(body(rain(401, 0, "counter_reset")))
        pub.send(body(rain(402, 0)))
        good_rain += 3
        wait_until(lambda: any(e.kind == "data_gap" and e.gap_end is not None for e in seen), 30, "the reset gap")
        wait_until(lambda: ingest.ingest.written == good_rain + 1, 30, "every good reading written")
    finally:
        pub.close()
        service.stop()
        runner.join(10)
        ingest.stop()
        sub.loop_stop()

    assert dict(ingest.ingest.dead_lettered) == {"impossible_value": 3, "schema": 2}
    dead = influx_count(influx_server, db, 'SELECT "reason", "detail" FROM deadletter')
    assert sorted(r[1] for r in dead) == ["impossible_value"] * 3 + ["schema"] * 2
    assert sorted(str(r[2]).split(":")[0] for r in dead if r[1] == "schema") == ["raw", "raw"]
    assert any("rain_tips -5 is negative" in str(r[2]) for r in dead)
    assert influx_count(influx_server, db, 'SELECT SUM("tips") FROM readings')[0][1] == 60
    turbidity = influx_count(influx_server, db, "SELECT \"value\" FROM readings WHERE \"quantity\" = 'turbidity'")
    assert [r[1] for r in turbidity] == [12.5]  # the good half of the batch
    raws = [r[1] for r in influx_count(influx_server, db, 'SELECT "raw" FROM readings')]
    assert "NaN" not in raws and "Infinity" not in raws

    storm = [e for e in seen if e.rule == "R1" and e.kind != "data_gap"]
    assert [e.kind for e in storm] == ["storm_started", "storm_qualified", "storm_inspection_due"]
    assert all(e.needs_verification == ["device_error"] for e in storm)
    assert storm[-1].tips == 60 and storm[-1].due_at == T0 + 2 * MIN + timedelta(hours=24)
    wired = [w for w in on_topic if w["kind"] == "storm_inspection_due"]
    assert wired and wired[0]["needs_verification"] == ["device_error"]
    gaps = [(e.gap_start, e.gap_end) for e in seen if e.kind == "data_gap"]
    assert gaps == [(T0 + 399 * MIN, T0 + 401 * MIN)]
