"""AlertService against a real Mosquitto: a 0.5-in storm published as readings gives a
storm_inspection_due event on stormwatch/v1/<site>/events and one work order; a retained
3-hour-old reading does not trigger (failure-kinds.md #10). Plus the workorders CLI."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from pathlib import Path

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from typer.testing import CliRunner

from stormwatch import topics
from stormwatch.alerts.service import AlertService
from stormwatch.app.cli import app
from stormwatch.clock import ManualClock
from stormwatch.contract import Event, dump_readings
from stormwatch.profiles import ProfileLibrary
from tests.alerts_support import T0, Feeder, site
from tests.names import run_unique

MIN = timedelta(minutes=1)


def _client(name: str, port: int) -> mqtt.Client:
    c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=run_unique(name), protocol=mqtt.MQTTv311)
    c.connect("127.0.0.1", port)
    c.loop_start()
    return c


def test_storm_over_mqtt_opens_one_order_and_retained_does_not_trigger(mosquitto_server, tmp_path: Path) -> None:
    cfg = site("ch133")
    port = mosquitto_server.port
    feed = Feeder()
    pub = _client("alerts-test-pub", port)
    # a retained, 3-hour-old burst of 60 tips sitting on the broker before the service starts
    old = feed.tips(60, T0 - timedelta(hours=3))
    pub.publish(topics.readings("s1", "gw"), dump_readings([old]), qos=1, retain=True).wait_for_publish(5)

    seen: list[Event] = []
    wire: list[dict] = []
    got = threading.Event()
    sub = _client("alerts-test-sub", port)
    sub.on_message = lambda c, u, m: (wire.append(json.loads(m.payload)),
                                      got.set() if b"storm_inspection_due" in m.payload else None)
    sub.subscribe(topics.events("s1"), qos=1)

    service = AlertService([cfg], ProfileLibrary(), mosquitto_server.url, None, tmp_path / "state.db",
                           ManualClock(T0 + 8 * 60 * MIN),  # past the last reading: none is from its future
                           client_id=run_unique("alerts-test-svc"), lateness_s=0, on_event=seen.append,
                           overdue_check_s=0.1)
    runner = threading.Thread(target=service.run, daemon=True)
    runner.start()
    try:
        assert service.connected.wait(10)  # subscribed (SUBACK)
        readings = [feed.tips(1, T0 + i * MIN) for i in range(50)]
        readings += [feed.tips(0, T0 + 49 * MIN + k * timedelta(minutes=10)) for k in range(1, 40)]
        for r in readings:
            pub.publish(topics.readings("s1", "gw"), dump_readings([r]), qos=1)
        pub.publish(topics.readings("s1", "gw"), dump_readings([readings[10]]), qos=1)  # a duplicate
        pub.publish(topics.readings("s1", "gw"), b'{"not": "a reading"}', qos=1)  # dropped, logged
        assert got.wait(15), f"no storm_inspection_due; events: {[e.kind for e in seen]}"
    finally:
        service.stop()
        runner.join(10)
        pub.publish(topics.readings("s1", "gw"), b"", qos=1, retain=True)  # clear the retained message
        pub.loop_stop()
        sub.loop_stop()
    storm = [e for e in seen if e.rule == "R1"]
    assert [e.kind for e in storm] == ["storm_started", "storm_qualified", "storm_inspection_due"]
    due = storm[-1]
    assert due.tips == 50 and due.storm_start == T0  # the retained 60 tips were not counted
    assert due.due_at == T0 + 49 * MIN + timedelta(hours=24)
    on_wire = next(w for w in wire if w["kind"] == "storm_inspection_due")
    assert on_wire["due_at"] == "2026-06-02T12:49:00Z" and on_wire["work_order"] == due.work_order

    runner_cli = CliRunner()
    state = str(tmp_path / "state.db")
    listed = runner_cli.invoke(app, ["workorders", "list", "--state", state, "--json"])
    assert listed.exit_code == 0, listed.output
    orders = json.loads(listed.output)
    storm_orders = [o for o in orders if o["rule"] == "R1"]
    assert len(storm_orders) == 1 and storm_orders[0]["id"] == due.work_order
    ack = runner_cli.invoke(app, ["workorders", "ack", due.work_order, "--by", "ann", "--state", state, "--json"])
    assert ack.exit_code == 0 and json.loads(ack.output)["acknowledged_by"] == "ann"
    done = runner_cli.invoke(app, ["workorders", "complete", due.work_order, "--by", "ann", "--notes", "ok",
                                   "--state", state, "--json"])
    assert done.exit_code == 0 and json.loads(done.output)["status"] == "completed"
    missing = runner_cli.invoke(app, ["workorders", "show", "WO-0000000000", "--state", state])
    assert missing.exit_code == 2 and "no work order 'WO-0000000000'" in missing.output
