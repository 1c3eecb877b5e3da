"""Restarting the alert service mid-scenario (real Mosquitto, SQLite store and state): no event is
emitted twice, no work order is opened twice or lost, the storm in progress and the basin's
warning cycle survive the restart, and `evaluate` over the whole period reproduces the live events."""

from __future__ import annotations

import threading
from datetime import timedelta
from itertools import groupby
from pathlib import Path

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from stormwatch import topics
from stormwatch.alerts.backfill import evaluate
from stormwatch.alerts.service import AlertService
from stormwatch.alerts.workorders import WorkOrders, opening_kinds
from stormwatch.clock import ManualClock
from stormwatch.contract import Event, Reading, dump_readings
from stormwatch.profiles import ProfileLibrary
from stormwatch.stores.sqlite import SqliteStore
from tests.alerts_support import HOURS, T0, Feeder, scenario, site
from tests.names import run_unique
from tests.waits import wait_until

RESTART = T0 + timedelta(hours=6, minutes=30)


def _run_service(name: str, port_url: str, store: SqliteStore, state: Path, clock: ManualClock,
                 readings: list[Reading], seen: list[Event]) -> None:
    svc = AlertService([site("ch133")], ProfileLibrary(), port_url, store, state, clock, client_id=run_unique(name),
                       lateness_s=120, on_event=seen.append, overdue_check_s=3600)
    runner = threading.Thread(target=svc.run, daemon=True)
    runner.start()
    pub = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"{name}-pub", protocol=mqtt.MQTTv311)
    pub.connect(port_url.split("//")[1].split(":")[0], int(port_url.rsplit(":", 1)[1]))
    pub.loop_start()
    try:
        assert svc.connected.wait(10)
        store.write_readings(readings)  # ingest's part
        start = svc.readings_seen
        for t, group in groupby(readings, key=lambda r: r.time):
            clock.set(max(clock.now(), t))  # live: a reading is never from the service's future
            pub.publish(topics.readings("s1", "gw"), dump_readings(list(group)), qos=1)
        wait_until(lambda: svc.readings_seen - start >= len(readings), 20, "every reading")
        assert svc.readings_seen - start == len(readings)
    finally:
        pub.loop_stop()
        svc.stop()
        runner.join(10)


def test_restart_mid_scenario_no_duplicates_and_evaluate_reproduces(mosquitto_server, tmp_path: Path) -> None:
    readings = scenario(Feeder())
    first = [r for r in readings if r.time < RESTART]
    second = [r for r in readings if r.time >= RESTART]
    store = SqliteStore(tmp_path / "store.db")
    state = tmp_path / "state.db"
    clock = ManualClock(T0)
    a: list[Event] = []
    b: list[Event] = []
    _run_service("restart-a", mosquitto_server.url, store, state, clock, first, a)
    clock.set(RESTART)
    _run_service("restart-b", mosquitto_server.url, store, state, clock, second, b)

    def key(e: Event) -> tuple[str, str, bool]:
        return (e.kind, e.occurrence, e.gap_end is None)

    everything = a + b
    assert len({key(e) for e in everything}) == len(everything), "an event was emitted twice"
    assert "basin_capacity_warning" in [e.kind for e in a] and "basin_cleanout_due" in [e.kind for e in b]
    assert "storm_qualified" in [e.kind for e in a] and "storm_inspection_due" in [e.kind for e in b]
    warning = next(e for e in a if e.kind == "basin_capacity_warning")
    cleanout = next(e for e in b if e.kind == "basin_cleanout_due")
    assert cleanout.occurrence == warning.occurrence  # the same fill cycle across the restart
    orders = WorkOrders(state, clock).list()
    opening = [e for e in everything if e.kind in opening_kinds()]
    assert sorted(o.id for o in orders) == sorted(e.work_order for e in opening)
    assert len({(o.rule, o.occurrence) for o in orders}) == len(orders)

    result = evaluate(site("ch133"), ProfileLibrary(), store, T0, T0 + timedelta(hours=HOURS))
    store.close()
    assert {(e.kind, e.occurrence, e.due_at) for e in result.events} == \
        {(e.kind, e.occurrence, e.due_at) for e in everything}
