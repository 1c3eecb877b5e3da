"""Issue 18 acceptance, the combined fault: ingest SIGKILLed mid-storm, then Mosquitto SIGKILLed, the
broker back, ingest back -- with the gateway, ingest and the alert engine as ``stormwatch`` processes
on one simulated clock, real Mosquitto and InfluxDB 1.x.

Mosquitto runs with ``autosave_interval 3600`` (its own default is 1800 s): the SIGKILL loses every
session and every message it had queued for the offline ingest, which it had PUBACKed to the gateway
long before. Before issue 18 that lost 338 readings and 53 of the 120 tips (the storm inspection said
0.67 in). Now the gateway keeps each reading until ingest confirms it stored, and sends again what
is never confirmed.

Expected, derived by hand: the default scenario rains 1.2 in at 0.01 in per tip = 120 tips
(hydrology.md); the gateway's first poll at 04:00 comes before the storm's first tip at 05:00, so
it sees all of them. The last tip falls 24 h after the storm's start (the NRCS Type II cumulative
fraction reaches 1.000 at hour 24): 2026-06-02 05:00 UTC; the inspection is due 24 h later,
2026-06-03 05:00 UTC, to within a poll slot at simulation speed (tests/answers_support.py,
SLOT_SLACK). The fault times are the issue's, at the storm's peak (17:00, hour 12 of the storm).
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from stormwatch.alerts.backfill import evaluate
from stormwatch.app import servers
from stormwatch.clock import ScenarioClock, write_clock_file
from stormwatch.config import load_site
from stormwatch.profiles import ProfileLibrary
from stormwatch.simulators.scenario import load_scenario
from stormwatch.simulators.site import SimulatedSite, isolate_site
from stormwatch.stores.influx1 import Influx1Store
from tests.answers_support import SLOT_SLACK
from tests.conftest import REPO
from tests.delivery_support import FORGETFUL, Service, stored_events
from tests.waits import wait_until

pytestmark = [pytest.mark.mosquitto, pytest.mark.influxdb]

#: Simulated seconds per real second: the 32-hour scenario in 115 s; each 20-minute step of the
#: fault 1.2 real seconds (a restarted process takes longer than that to come up on a loaded
#: machine: ingest is really back somewhat after 17:35).
SPEED = 1000.0
DAY = datetime(2026, 6, 1, tzinfo=UTC)
INGEST_KILLED, BROKER_KILLED, BROKER_BACK, INGEST_BACK = (
    DAY + timedelta(hours=16, minutes=35), DAY + timedelta(hours=16, minutes=55),
    DAY + timedelta(hours=17, minutes=15), DAY + timedelta(hours=17, minutes=35))
LAST_TIP = datetime(2026, 6, 2, 5, 0, tzinfo=UTC)


def _site_file(tmp_path: Path) -> tuple[Path, str]:
    profiles = ProfileLibrary()
    cfg = load_site(REPO / "examples" / "site.yaml", profiles)
    site_id = f"fault-{uuid.uuid4().hex[:8]}"
    doc = isolate_site(cfg, tmp_path / "links").model_dump(mode="json")
    doc["site"]["id"] = site_id
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path, site_id


def _influx(srv: servers.InfluxDB1, db: str, q: str) -> list[object]:
    res = srv.query(q, db)["results"][0]
    return res["series"][0]["values"][0][1:] if res.get("series") else []


@pytest.mark.timeout(900)
def test_ingest_killed_then_broker_killed_mid_storm_every_reading_stored_once(
        tmp_path: Path, influx_server: servers.InfluxDB1) -> None:
    scenario = load_scenario("default")
    assert scenario.start == DAY + timedelta(hours=4)
    broker = servers.mosquitto(tmp_path / "mq", extra_conf=FORGETFUL)
    broker.start()
    site_path, site_id = _site_file(tmp_path)
    db = f"fault_{uuid.uuid4().hex[:8]}"
    store_url = influx_server.store_url(db)
    clock_file = tmp_path / "clock.json"
    common = ["--site", str(site_path), "--broker", broker.url, "--clock-file", str(clock_file)]
    ingest_args = ["ingest", *common, "--store", store_url, "--client-id", f"ingest-{site_id}"]
    logs = tmp_path / "logs"
    logs.mkdir()
    services: list[Service] = []

    def start(name: str, args: list[str]) -> Service:
        svc = Service(name, args, logs / f"{name}.log")
        services.append(svc)
        return svc

    site: SimulatedSite | None = None
    try:
        ingest = start("ingest", ingest_args)
        alerts = start("alerts", ["alerts", *common, "--store", store_url, "--state-dir", str(tmp_path / "alerts"),
                                  "--client-id", f"alerts-{site_id}"])
        gateway = start("gateway", ["gateway", *common, "--state-dir", str(tmp_path / "gateway"),
                                    "--until", scenario.end.isoformat(), "--stats-interval-s", "5"])
        for svc in services:
            svc.wait_for("waiting for the simulated clock", 90)
        clock = ScenarioClock(sim_start=scenario.start, speed=SPEED, wall_start=time.time() + 3.0)
        site = SimulatedSite(load_site(site_path, ProfileLibrary()), ProfileLibrary(), scenario, clock,
                             hrxl_lines_per_s=50)
        site.start()
        write_clock_file(clock_file, clock)
        ingest.wait_for("subscribed to", 60)

        def at(when: datetime) -> None:
            wait_until(lambda: clock.now() >= when, (when - clock.now()).total_seconds() / SPEED + 60,
                       f"simulated {when:%H:%M}", every_s=0.01)

        at(INGEST_KILLED)
        ingest.kill()
        at(BROKER_KILLED)
        broker.kill()  # with the messages it held for the offline ingest session
        at(BROKER_BACK)
        broker.start()
        at(INGEST_BACK)
        again = start("ingest-again", ingest_args)
        again.wait_for("subscribed to", 60)
        assert gateway.proc.wait((scenario.end - clock.now()).total_seconds() / SPEED + 120) == 0, \
            gateway.text()[-3000:]
        stop_line = next(line for line in reversed(gateway.text().splitlines()) if " stopped: readings made=" in line)
        made = int(re.search(r"readings made=(\d+)", stop_line).group(1))  # type: ignore[union-attr]
        assert "outbox=0 " in stop_line, stop_line  # every reading confirmed stored before the gateway stopped
        wait_until(lambda: _influx(influx_server, db, 'SELECT COUNT("value") FROM "readings"') == [made], 60,
                   f"{made} readings in InfluxDB")
        # the alert engine has seen the storm end (the last tip + the 6-hour dry gap, before the scenario's end)
        wait_until(lambda: "storm_inspection_due" in alerts.text(), 60, "the storm inspection")
        for svc in (again, alerts):
            assert svc.stop() == 0, svc.text()[-3000:]
    finally:
        for svc in services:
            svc.ensure_gone()
        if site is not None:
            site.stop()
        broker.stop()

    # every reading exactly once: one boot, seq 0..made-1, each once (InfluxQL, not the store's code)
    assert _influx(influx_server, db, 'SELECT COUNT("value"), COUNT(DISTINCT("seq")), MIN("seq"), MAX("seq") '
                                      'FROM "readings"') == [made, made, 0, made - 1]
    assert _influx(influx_server, db, 'SELECT COUNT(DISTINCT("boot")) FROM "readings"') == [1]
    assert _influx(influx_server, db, "SELECT SUM(\"value\") FROM \"readings\" WHERE \"quantity\" = 'rain_tips'") \
        == [120]
    # the fault did what it does: the broker came back without sessions, the gateway re-sent readings
    assert "session present: False" in (logs / "ingest-again.log").read_text()
    resent = int(re.search(r"resent=(\d+)", stop_line).group(1))  # type: ignore[union-attr]
    assert resent > 0, stop_line

    # one storm inspection, for 1.2 in, due 24 h after the last tip: the alert engine's work order ...
    due = LAST_TIP + timedelta(hours=24)
    con = sqlite3.connect(str(tmp_path / "alerts" / "alerts.db"))
    try:
        orders = con.execute("SELECT due_at FROM work_orders WHERE kind = 'storm_inspection'").fetchall()
    finally:
        con.close()
    assert len(orders) == 1
    assert abs(datetime.fromisoformat(orders[0][0].replace("Z", "+00:00")) - due) <= SLOT_SLACK
    # ... its event in the store ...
    storms = [e for e in stored_events(influx_server, db) if e["kind"] == "storm_inspection_due"]
    assert len(storms) == 1, json.dumps(storms)
    assert (storms[0]["tips"], storms[0]["depth_in"]) == (120, 1.2)
    # ... and the same answer from the stored readings alone
    store = Influx1Store(influx_server.url, db)
    try:
        result = evaluate(load_site(site_path, ProfileLibrary()), ProfileLibrary(), store, scenario.start,
                          scenario.end)
    finally:
        store.close()
    inspections = [e for e in result.events if e.kind == "storm_inspection_due"]
    assert len(inspections) == 1 and (inspections[0].tips, inspections[0].depth_in) == (120, 1.2)
    assert inspections[0].due_at is not None and abs(inspections[0].due_at - due) <= SLOT_SLACK
