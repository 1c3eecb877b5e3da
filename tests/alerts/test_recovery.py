"""The alert engine after a broker crash and a store outage (docs/rules.md, "After a broker crash, and
while the store is away"), as processes killed with SIGKILL on real Mosquitto and InfluxDB 1.x.

The readings are the alert tests' 10-hour scenario (tests/alerts/test_engine_backfill.py): a 60-tip storm in
the first hour, a turbidity plume at 0:30-1:00, sediment rising from 1 to 3 ft in a 4-ft basin. The
test plays gateway and ingest: it publishes each minute's readings as one message and writes them
to InfluxDB. Its events, by hand: storm_started 0:00, routine_inspection_due 0:00, turbidity_contrast
0:45 (15 minutes sustained), storm_qualified 0:49 (the 50th tip, 0.50 in), turbidity_cleared 1:15,
basin_capacity_warning 6:12 (half full: sediment 2 ft at 1 + 2 × 372/600), storm_inspection_due
6:59 (the last tip at 0:59 plus the 6-hour dry gap; due 24 h after the last tip), basin_cleanout_due
8:02 (three quarters of the design volume).

The alert service runs on a simulated clock pinned after the data (speed 1), so nothing is overdue.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from stormwatch.alerts.service import AlertService
from stormwatch.app import servers
from stormwatch.clock import ManualClock, ScenarioClock, write_clock_file
from stormwatch.contract import Event, Reading
from stormwatch.profiles import ProfileLibrary
from stormwatch.stores.influx1 import Influx1Store
from stormwatch.stores.sqlite import SqliteStore
from tests.alerts_support import T0, Feeder, keys, live, scenario, site, site_doc
from tests.delivery_support import (
    FORGETFUL,
    EventListener,
    Service,
    event_key,
    kept_events,
    progress,
    publish,
    stored_events,
)
from tests.waits import wait_until

pytestmark = [pytest.mark.mosquitto, pytest.mark.influxdb]

#: The engine's lateness on a clock running at 1x (stormwatch.alerts.engine.lateness_for).
LATENESS = timedelta(seconds=120)
#: The events of the scenario, by hand (module docstring).
EXPECTED_KINDS = ["basin_capacity_warning", "basin_cleanout_due", "routine_inspection_due", "storm_inspection_due",
                  "storm_qualified", "storm_started", "turbidity_cleared", "turbidity_contrast"]
LAST_TIP = T0 + timedelta(minutes=59)
#: Failed store attempts after the first before the engine's retry spacing reaches its cap
#: (1, 2, 4 s, then RETRY_MAX_S = 5 s: stormwatch.alerts.service).
REPEATS_TO_THE_CAP = 3


def _parts(*hours: float) -> list[list[Reading]]:
    readings = scenario(Feeder())
    cuts = [T0 + timedelta(hours=h) for h in hours]
    out: list[list[Reading]] = []
    start = T0
    for cut in [*cuts, T0 + timedelta(days=1)]:
        out.append([r for r in readings if start <= r.time < cut])
        start = cut
    return out


class Rig:
    """One site file, one clock file, and alert services started on them."""

    def __init__(self, tmp_path: Path, broker: servers.Mosquitto, influx: servers.InfluxDB1, db: str) -> None:
        self.tmp = tmp_path
        self.broker = broker
        self.influx = influx
        self.db = db
        self.site = tmp_path / "site.yaml"
        self.site.write_text(yaml.safe_dump(site_doc("ch133", rain_poll_s=60)))
        self.clock_file = write_clock_file(tmp_path / "clock.json", ScenarioClock(
            sim_start=T0 + timedelta(hours=11), speed=1.0, wall_start=time.time()))
        self.state = tmp_path / "alerts"
        self.client_id = f"alerts-{uuid.uuid4().hex[:8]}"
        self.runs = 0

    @property
    def state_db(self) -> Path:
        return self.state / "alerts.db"

    def store(self) -> Influx1Store:
        return Influx1Store(self.influx.url, self.db)

    def alerts(self, log_level: str = "INFO") -> Service:
        self.runs += 1
        svc = Service(f"alerts-{self.runs}", [
            "alerts", "--site", str(self.site), "--broker", self.broker.url, "--store", self.influx.store_url(self.db),
            "--state-dir", str(self.state), "--client-id", self.client_id, "--clock-file", str(self.clock_file)],
            self.tmp / f"alerts-{self.runs}.log", env={"STORMWATCH_LOG_LEVEL": log_level})
        svc.wait_for("connected to", 60)
        return svc

    def feed(self, readings: list[Reading], *, store: bool = True) -> None:
        """Ingest's part (the store) then the gateway's (the broker)."""
        if store:
            self.write(readings)
        publish(self.broker.port, readings)

    def write(self, readings: list[Reading]) -> None:
        s = self.store()
        try:
            s.write_readings(readings)
        finally:
            s.close()

    def processed(self, readings: list[Reading], timeout_s: float = 60) -> None:
        """Wait until the service recorded progress past ``readings`` (its watermark trails by the lateness)."""
        target = max(r.time for r in readings) - LATENESS
        wait_until(lambda: (progress(self.state_db) or T0) >= target, timeout_s,
                   f"the engine's progress to reach {target.isoformat()}", every_s=0.1)


def _answer(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["kind"]: e for e in events}


def _check_by_hand(events: list[dict[str, Any]]) -> None:
    assert sorted({e["kind"] for e in events}) == EXPECTED_KINDS
    storm = _answer(events)["storm_inspection_due"]
    assert (storm["tips"], storm["depth_in"]) == (60, 0.6)  # 60 tips of 0.01 in
    assert datetime.fromisoformat(storm["due_at"].replace("Z", "+00:00")) == LAST_TIP + timedelta(hours=24)
    assert not [e for e in events if e.get("late_detection_s")]


def test_broker_sigkilled_while_the_engine_is_offline_events_equal_an_undisturbed_run(
        tmp_path: Path, influx_server: servers.InfluxDB1) -> None:
    part1, part2, part3 = _parts(3, 7.5)
    # -- undisturbed: one engine sees every reading live
    calm = servers.mosquitto(tmp_path / "mq-calm")
    calm.start()
    (tmp_path / "calm").mkdir()
    quiet = Rig(tmp_path / "calm", calm, influx_server, f"calm_{uuid.uuid4().hex[:8]}")
    listener = EventListener(calm.port, "s1")
    svc = quiet.alerts()
    try:
        for part in (part1, part2, part3):
            quiet.feed(part)
        quiet.processed(part3)
        assert svc.stop() == 0, svc.text()[-3000:]
    finally:
        svc.ensure_gone()
        listener.close()
        calm.stop()
    undisturbed = listener.got()
    _check_by_hand(undisturbed)
    wait_until(lambda: len(stored_events(influx_server, quiet.db)) == len(undisturbed), 30, "the calm run's events")

    # -- disturbed: the engine is SIGKILLed; while it is away the broker queues part 2 for its session,
    # then the broker is SIGKILLed too and comes back without it (nothing saved); the engine returns
    broker = servers.mosquitto(tmp_path / "mq", extra_conf=FORGETFUL)
    broker.start()
    (tmp_path / "storm").mkdir()
    rig = Rig(tmp_path / "storm", broker, influx_server, f"storm_{uuid.uuid4().hex[:8]}")
    listener = EventListener(broker.port, "s1")
    first = rig.alerts()
    second: Service | None = None
    try:
        rig.feed(part1)
        rig.processed(part1)
        first.kill()
        rig.feed(part2)  # stored by ingest; queued by the broker for the engine's session
        broker.kill()
        broker.start()
        wait_until(lambda: listener.subscribed.is_set(), 30, "the listener back on the broker")
        second = rig.alerts()
        second.wait_for("session present: False", 10)
        rig.feed(part3)
        rig.processed(part3)
        assert second.stop() == 0, second.text()[-3000:]
    finally:
        for s in (first, second):
            if s is not None:
                s.ensure_gone()
        listener.close()
        broker.stop()
    disturbed = listener.got()
    # the same answer, each event once
    assert sorted(map(event_key, disturbed)) == sorted(map(event_key, undisturbed)), (
        sorted(e["kind"] for e in disturbed), sorted(e["kind"] for e in undisturbed))
    assert "when the engine was away" in second.text()
    wait_until(lambda: len(stored_events(influx_server, rig.db)) == len(undisturbed), 30, "the storm run's events")
    assert sorted(map(event_key, stored_events(influx_server, rig.db))) == \
        sorted(map(event_key, stored_events(influx_server, quiet.db)))


def _log_records(text: str, level: str) -> list[str]:
    return [line for line in text.splitlines() if f" {level} " in line or line.startswith(level)]


@pytest.mark.timeout(600)
def test_influxdb_down_while_events_fire_every_event_reaches_the_events_measurement(
        tmp_path: Path, own_influx: servers.InfluxDB1) -> None:
    part1, part2 = _parts(3)
    broker = servers.mosquitto(tmp_path / "mq")
    broker.start()
    rig = Rig(tmp_path, broker, own_influx, f"down_{uuid.uuid4().hex[:8]}")
    listener = EventListener(broker.port, "s1")
    svc = rig.alerts(log_level="DEBUG")  # the repeated failures are logged at DEBUG alone
    try:
        rig.feed(part1)
        rig.processed(part1)
        own_influx.kill()  # SIGKILL
        rig.feed(part2, store=False)  # ingest holds these (it acknowledges nothing while the store is down)
        rig.processed(part2)
        # the three events of the outage were published and are kept for the store
        wait_until(lambda: kept_events(rig.state_db) == 3, 30, "three events kept in the state file")
        assert sorted(e["kind"] for e in listener.got()[-3:]) == ["basin_capacity_warning", "basin_cleanout_due",
                                                                  "storm_inspection_due"]
        # the outage lasts until the attempts are at their longest spacing and have failed there twice
        wait_until(lambda: svc.text().count("store still unavailable") >= REPEATS_TO_THE_CAP + 2, 120,
                   "the store's retries at their longest spacing", every_s=0.2)
        own_influx.start()
        back_at = time.time()
        rig.write(part2)  # ingest writes what it held
        wait_until(lambda: kept_events(rig.state_db) == 0, 30, "the kept events written")
        events = stored_events(own_influx, rig.db)
        assert svc.stop() == 0, svc.text()[-3000:]
    finally:
        svc.ensure_gone()
        listener.close()
        broker.stop()
    _check_by_hand(events)
    assert sorted(map(event_key, events)) == sorted(map(event_key, listener.got()))
    log = svc.text()
    errors = [line for line in _log_records(log, "ERROR") if "store" in line]
    assert len(errors) == 1 and "store unavailable" in errors[0], errors
    back = [line for line in log.splitlines() if "store is available again" in line]
    assert len(back) == 1 and " INFO " in back[0], back
    assert not [line for line in _log_records(log, "INFO") + _log_records(log, "WARNING")
                if "retrying in" in line or "still unavailable" in line]
    attempts = re.search(r"\((\d+) failed attempts\)", back[0])
    assert attempts and int(attempts[1]) >= REPEATS_TO_THE_CAP + 3, back[0]  # the ERROR's, the repeats
    # the kept events went out within seconds of InfluxDB's return (attempts at most 5 s apart)
    assert _line_time(back[0]) - back_at < 15, back[0]


def _line_time(line: str) -> float:
    """The wall time a log line was written (stormwatch's stderr format begins with the local HH:MM:SS)."""
    now = datetime.now()
    stamp = datetime.combine(now.date(), datetime.strptime(line.split(" ", 1)[0], "%H:%M:%S").time())
    return (stamp if stamp <= now + timedelta(seconds=1) else stamp - timedelta(days=1)).timestamp()


def test_events_kept_for_the_store_survive_a_sigkill(tmp_path: Path, own_influx: servers.InfluxDB1) -> None:
    part1, part2 = _parts(3)
    broker = servers.mosquitto(tmp_path / "mq")
    broker.start()
    rig = Rig(tmp_path, broker, own_influx, f"kept_{uuid.uuid4().hex[:8]}")
    listener = EventListener(broker.port, "s1")
    first = rig.alerts()
    second: Service | None = None
    try:
        rig.feed(part1)
        rig.processed(part1)
        own_influx.kill()
        rig.feed(part2, store=False)
        wait_until(lambda: kept_events(rig.state_db) == 3, 60, "three events kept in the state file")
        rig.processed(part2)
        first.kill()  # the kept events are in the state file only
        own_influx.start()
        rig.write(part2)
        second = rig.alerts()
        wait_until(lambda: kept_events(rig.state_db) == 0, 30, "the kept events written by the next run")
        events = stored_events(own_influx, rig.db)
        assert second.stop() == 0, second.text()[-3000:]
    finally:
        for s in (first, second):
            if s is not None:
                s.ensure_gone()
        listener.close()
        broker.stop()
    _check_by_hand(events)
    published = listener.got()
    assert sorted(map(event_key, published)) == sorted(map(event_key, events))  # none published twice
    assert "recorded the 3 events kept in the state file" in second.text()


def test_session_back_empty_the_running_engine_reads_what_it_missed_from_the_store(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The engine stays up; the broker dies with the readings it had queued for the engine's session
    (here: those published while the broker was down reached the store only, as the gateway's re-sends
    through a live ingest do). The engine, back on an empty session, reads the store for them."""
    caplog.set_level(logging.INFO, logger="stormwatch.alerts")
    part1, part2, part3 = _parts(3, 7.5)
    broker = servers.mosquitto(tmp_path / "mq", extra_conf=FORGETFUL)
    broker.start()
    store = SqliteStore(tmp_path / "store.db")
    seen: list[Event] = []
    client_id = f"alerts-{uuid.uuid4().hex[:8]}"
    _persistent_session(broker.port, client_id)  # so the first connection finds its session: no catch-up then
    svc = AlertService([site("ch133")], ProfileLibrary(), broker.url, store, tmp_path / "alerts.db",
                       ManualClock(T0 + timedelta(hours=11)), client_id=client_id,
                       lateness_s=120, on_event=seen.append, overdue_check_s=3600)
    runner = threading.Thread(target=svc.run, daemon=True)
    runner.start()
    try:
        assert svc.connected.wait(10)
        store.write_readings(part1)
        publish(broker.port, part1)
        wait_until(lambda: svc.readings_seen >= len(part1), 30, "part 1 seen")
        broker.kill()
        store.write_readings(part2)  # the engine never receives these from the broker
        broker.start()
        wait_until(lambda: {"basin_capacity_warning", "storm_inspection_due"} <= {e.kind for e in seen}, 60,
                   "the events of part 2, from the store")
        wait_until(lambda: svc.session.connects >= 2 and svc.connected.is_set(), 30, "the engine back on the broker")
        store.write_readings(part3)
        publish(broker.port, part3)
        wait_until(lambda: svc.readings_seen >= len(part1) + len(part3), 30, "part 3 seen")
    finally:
        svc.stop()
        runner.join(20)
        broker.stop()
    store.close()
    _, undisturbed = live(site("ch133"), [*part1, *part2, *part3], None)
    assert keys(seen) == keys(undisturbed) and len(seen) == len(undisturbed)
    assert not [e for e in seen if e.late_detection_s]
    said = [r.getMessage() for r in caplog.records if "reading the store for what the broker" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("session came back empty"), said  # the reconnection only


def _persistent_session(port: int, client_id: str) -> None:
    """Leave a persistent session for ``client_id`` on the broker (connect, disconnect)."""
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion

    c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=False,
                    protocol=MQTTProtocolVersion.MQTTv311)
    c.connect("127.0.0.1", port)
    c.loop_start()
    wait_until(c.is_connected, 10, "the session made")
    c.disconnect()
    c.loop_stop()
