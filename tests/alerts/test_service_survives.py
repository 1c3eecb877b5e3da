"""A service survives what it reads (docs/reference/failure-kinds.md, "A service survives what it
reads"): a row the store answers that cannot be read is skipped, counted and logged with its
identity, and read again; an unexpected error in one site's work stops that site, loudly, never the
service -- the other sites keep their ordinance events.

By hand: 50 tips of 0.01 in = 0.50 in, a qualifying storm under Ch. 133 (R1 threshold 0.5 in); the
storm's inspection is due 24 h after its last tip, reported once a 6-hour dry gap has passed.
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.request
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from stormwatch.alerts.service import AlertService
from stormwatch.app import servers
from stormwatch.clock import ManualClock, ScenarioClock, write_clock_file
from stormwatch.config import parse_site
from stormwatch.contract import Event, Reading
from stormwatch.profiles import ProfileLibrary
from stormwatch.stores.sqlite import SqliteStore
from tests.alerts_support import T0, Feeder, site_doc
from tests.delivery_support import EventListener, Service, publish
from tests.names import run_unique
from tests.waits import wait_until

MIN = timedelta(minutes=1)


def _storm(feed: Feeder, first: int = 1) -> list[Reading]:
    """Tips of 1 at T0 + ``first`` .. T0 + 49 min, then dry 10-minute polls for 7 hours."""
    tips = [feed.tips(1, T0 + i * MIN) for i in range(first, 50)]
    return tips + [feed.tips(0, T0 + 49 * MIN + k * timedelta(minutes=10)) for k in range(1, 43)]


def _write_lines(srv: servers.InfluxDB1, db: str, text: str) -> None:
    """Line protocol straight to InfluxDB's /write (what ingest's writes look like on the wire)."""
    req = urllib.request.Request(f"{srv.url}/write?db={db}&precision=ns", data=text.encode(), method="POST")
    with urllib.request.urlopen(req, timeout=10) as answer:
        assert answer.status == 204


@pytest.mark.mosquitto
@pytest.mark.influxdb
def test_a_point_answered_without_its_value_is_skipped_logged_and_read_again(
        tmp_path: Path, mosquitto_server: servers.Mosquitto, influx_server: servers.InfluxDB1) -> None:
    """InfluxDB 1.x answered a point ingest was writing without its ``value`` (the fleet benchmark,
    250 sites: the alert service died in its catch-up with "a bug in stormwatch"). The service
    skips it, names it, reads it again -- whole by then -- and counts its tip: 1 + 49 live = 50."""
    db = f"survive_{uuid.uuid4().hex[:8]}"
    srv = influx_server
    srv.query(f'CREATE DATABASE "{db}"')
    at_ns = int(T0.timestamp()) * 1_000_000_000
    tags = "readings,device=rain,quantity=rain_tips,site=s1,unit={tip}"
    _write_lines(srv, db, f'{tags} gateway="gw",boot="b1",seq=1i,flags="" {at_ns}\n')  # half a point: no value

    site = tmp_path / "site.yaml"
    site.write_text(yaml.safe_dump(site_doc("ch133", rain_poll_s=600)))
    clock = write_clock_file(tmp_path / "clock.json", ScenarioClock(sim_start=T0 + timedelta(hours=11), speed=1.0,
                                                                      wall_start=time.time()))
    listener = EventListener(mosquitto_server.port, "s1")
    alerts = Service("alerts", ["alerts", "--site", str(site), "--broker", mosquitto_server.url, "--store",
                                srv.store_url(db), "--state-dir", str(tmp_path / "alerts"), "--client-id",
                                run_unique("alerts-survive"), "--clock-file", str(clock)], tmp_path / "alerts.log")
    try:
        alerts.wait_for("connected to", 60)
        log = alerts.text()
        assert (f"influx1:{db}: skipped an unreadable stored reading at 2026-06-01T12:00:00Z (site=s1 device=rain "
                "quantity=rain_tips gateway=gw boot=b1 seq=1): ") in log, log[-3000:]
        # ingest's write completes: the same point, now whole
        _write_lines(srv, db, f'{tags} value=1,tips=1i,gateway="gw",boot="b1",seq=1i,raw="1",flags="" {at_ns}\n')
        alerts.wait_for("caught up from the store: 1 readings", 60)
        feed = Feeder(seq=1)
        publish(mosquitto_server.port, _storm(feed))
        wait_until(lambda: any(e["kind"] == "storm_inspection_due" for e in listener.got()), 60,
                   "storm_inspection_due of s1")
        due = next(e for e in listener.got() if e["kind"] == "storm_inspection_due")
        assert (due["tips"], due["storm_start"]) == (50, "2026-06-01T12:00:00Z")
        assert alerts.proc.poll() is None
        assert "a bug in stormwatch" not in alerts.text()
    finally:
        listener.close()
        alerts.stop()
        alerts.ensure_gone()


def _site(site_id: str) -> object:
    doc = site_doc("ch133", rain_poll_s=600)
    doc["site"]["id"] = site_id
    doc["gateway_id"] = f"gw-{site_id}"
    return parse_site(doc, f"{site_id}.yaml")


@pytest.mark.mosquitto
def test_an_unexpected_error_in_one_sites_work_stops_that_site_not_the_service(
        tmp_path: Path, mosquitto_server: servers.Mosquitto, caplog: pytest.LogCaptureFixture) -> None:
    """Site ``a``'s catch-up raises (a bug, injected): ``a`` is stopped with a CRITICAL naming it, and
    site ``b`` -- on the same service -- still gets its storm_inspection_due from live readings."""
    store = SqliteStore(tmp_path / "store.db")
    for sid in ("a", "b"):  # readings stored before the start: warm-up and the first catch-up read them
        feed = Feeder(site=sid, gateway=f"gw-{sid}", boot="old")
        store.write_readings([feed.tips(0, T0 - timedelta(minutes=30) + k * MIN) for k in range(10)])
    seen: list[Event] = []
    service = AlertService([_site("a"), _site("b")], ProfileLibrary(), mosquitto_server.url, store,  # type: ignore[list-item]
                           tmp_path / "state.db", ManualClock(T0 + timedelta(hours=11)),
                           client_id=run_unique("alerts-stop-one"), lateness_s=120, on_event=seen.append,
                           overdue_check_s=0.1)

    def boom(readings: object) -> list[Event]:
        raise RuntimeError("injected: a bug in site a's rules")

    service.engines["a"].catch_up = boom  # type: ignore[method-assign]
    caplog.set_level(logging.INFO, logger="stormwatch.alerts.service")
    runner = threading.Thread(target=service.run, daemon=True)
    runner.start()
    try:
        assert service.connected.wait(10)
        wait_until(lambda: any(r.levelno == logging.CRITICAL for r in caplog.records), 30, "site a stopped")
        publish(mosquitto_server.port, _storm(Feeder(site="b", gateway="gw-b"), first=0), site="b", gateway="gw-b")
        publish(mosquitto_server.port, _storm(Feeder(site="a", gateway="gw-a"), first=0), site="a", gateway="gw-a")
        wait_until(lambda: any(e.kind == "storm_inspection_due" and e.site == "b" for e in seen), 60,
                   "storm_inspection_due of site b")
        assert runner.is_alive() and set(service.stopped_sites) == {"a"}
    finally:
        service.stop()
        runner.join(30)
        store.close()
    due = next(e for e in seen if e.kind == "storm_inspection_due" and e.site == "b")
    assert due.tips == 50 and due.due_at == T0 + 49 * MIN + timedelta(hours=24)
    assert not [e for e in seen if e.site == "a" and e.kind.startswith("storm")]
    stopped = [r for r in caplog.records if r.levelno == logging.CRITICAL]
    assert len(stopped) == 1 and stopped[0].getMessage().startswith(
        "a: STOPPED -- an unexpected error while catching up from the store (RuntimeError: injected: a bug in "
        "site a's rules)")
    assert "the other 1 sites go on" in stopped[0].getMessage()
