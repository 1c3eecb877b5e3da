"""Services over a county (docs/scaling.md): partitions together equal one service; a site added is watched.

On real Mosquitto with a simulated fleet of ten sites (storms qualifying at different times, a
plume, basins filling; seed 7): one ``stormwatch alerts --sites DIR`` and two more with
``--partition 1/2`` and ``--partition 2/2`` (sharing one work-order book) run side by side. Every
event the single service publishes is published exactly once more by the partitions -- the same
JSON, work-order id included -- and nothing else; each partition's events are of its own sites.
Two ``stormwatch ingest --partition K/2`` (subscribed to their own sites' topics alone, for brokers
without shared subscriptions) store every reading exactly once between them.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
import uuid
from collections import Counter
from pathlib import Path

from stormwatch.app import servers
from stormwatch.runtime.partition import Partition
from stormwatch.simulators.fleetsites import write_fleet_sites
from tests.fleet_support import EventListener, fleet, service, stop, summary
from tests.waits import wait_until

SPEED = 600.0  # 10 simulated minutes a real second


def _alerts(tmp: Path, name: str, broker: str, sites: Path, state: Path, clock: Path, *extra: str):  # type: ignore[no-untyped-def]
    return service(["alerts", "--sites", str(sites), "--broker", broker, "--store", f"sqlite:///{tmp / name}.db",
                    "--state-dir", str(state), "--clock-file", str(clock), "--client-id",
                    f"{name}-{uuid.uuid4().hex[:6]}", *extra], tmp / f"{name}.log")


def _stored_events(db: Path) -> set[tuple[str, str, str]]:
    with sqlite3.connect(db) as con:
        return set(con.execute("SELECT site, kind, occurrence FROM events").fetchall())


def _each_twice(listener: EventListener) -> bool:
    counts = Counter(json.dumps(e, sort_keys=True) for e in list(listener.events))
    return bool(counts) and set(counts.values()) == {2}


def _subscribed(log: Path) -> bool:
    return log.exists() and "connected to" in log.read_text()


def test_two_partitioned_alert_services_publish_exactly_the_events_of_one(
        tmp_path: Path, mosquitto_server: servers.Mosquitto) -> None:
    sites = tmp_path / "sites"
    write_fleet_sites(sites, 10)
    clock = tmp_path / "clock.json"
    listener = EventListener(mosquitto_server.url)
    url = mosquitto_server.url
    single = _alerts(tmp_path, "single", url, sites, tmp_path / "single-state", clock)
    part1 = _alerts(tmp_path, "part1", url, sites, tmp_path / "shared-state", clock, "--partition", "1/2")
    part2 = _alerts(tmp_path, "part2", url, sites, tmp_path / "shared-state", clock, "--partition", "2/2")
    sim = fleet(10, sites, url, SPEED, 3.0, clock, tmp_path / "fleet.log", "--start-delay-s", "8")
    try:
        wait_until(lambda: all(_subscribed(tmp_path / f"{n}.log") for n in ("single", "part1", "part2")), 60,
                 "three alert services connected")
        published = summary(sim, 180)
        # the services' last decisions: a loaded machine may take a while over the last readings,
        # so wait for every event to be published by both sides (the assertion below says which not)
        wait_until(lambda: _each_twice(listener), 60, fail=False, every_s=0.2)
    finally:
        stop(single, part1, part2)
        if sim.poll() is None:
            sim.kill()
        time.sleep(0.5)
        listener.close()
    assert published["readings"] > 10 * 6 * 170

    counts = Counter(json.dumps(e, sort_keys=True) for e in listener.events)
    assert counts and set(counts.values()) == {2}, [e for e, n in counts.items() if n != 2][:3]
    kinds = Counter(json.loads(e)["kind"] for e in counts)
    assert kinds["storm_qualified"] >= 3 and kinds["basin_cleanout_due"] >= 1 and kinds["turbidity_contrast"] >= 1

    one = _stored_events(tmp_path / "single.db")
    first, second = _stored_events(tmp_path / "part1.db"), _stored_events(tmp_path / "part2.db")
    assert first | second == one and not first & second
    for part, events in ((Partition(1, 2), first), (Partition(2, 2), second)):
        assert events and all(part.owns(site) for site, _, _ in events)


def test_a_site_file_added_to_the_directory_is_watched_within_seconds(
        tmp_path: Path, mosquitto_server: servers.Mosquitto) -> None:
    fleet_sites, watched = tmp_path / "fleet-sites", tmp_path / "sites"
    files = write_fleet_sites(fleet_sites, 2)  # site 1 starts with its basin 48 % full: a warning at once
    watched.mkdir()
    shutil.copy(files[1], watched / files[1].name)
    clock = tmp_path / "clock.json"
    listener = EventListener(mosquitto_server.url)
    alerts = _alerts(tmp_path, "alerts", mosquitto_server.url, watched, tmp_path / "state", clock)
    sim = fleet(2, fleet_sites, mosquitto_server.url, 60.0, 1.0, clock, tmp_path / "fleet.log")
    try:
        wait_until(lambda: _subscribed(tmp_path / "alerts.log"), 60, "alerts connected")
        wait_until(lambda: clock.exists(), 30, "the fleet's clock")
        time.sleep(6)
        assert not [e for e in listener.events if e["site"] == "fleet-0001"]  # not watched yet
        added = time.monotonic()
        shutil.copy(files[0], watched / ".adding.tmp")
        (watched / ".adding.tmp").replace(watched / files[0].name)
        wait_until(lambda: any(e["site"] == "fleet-0001" and e["kind"] == "basin_capacity_warning"
                             for e in listener.events), 15, "an event of the added site", every_s=0.1)
        assert time.monotonic() - added < 10
        assert "1 added (fleet-0001)" in (tmp_path / "alerts.log").read_text()
    finally:
        stop(alerts)
        sim.kill()
        sim.wait()
        listener.close()


def test_two_partitioned_ingests_store_every_reading_once(tmp_path: Path, mosquitto_server: servers.Mosquitto) -> None:
    sites = tmp_path / "sites"
    write_fleet_sites(sites, 6)
    clock = tmp_path / "clock.json"
    ingests = [service(["ingest", "--sites", str(sites), "--broker", mosquitto_server.url, "--partition", f"{k}/2",
                        "--store", f"sqlite:///{tmp_path / f'part{k}.db'}", "--clock-file", str(clock),
                        "--client-id", f"ingest-part{k}-{uuid.uuid4().hex[:6]}"], tmp_path / f"ingest{k}.log")
               for k in (1, 2)]
    sim = fleet(6, sites, mosquitto_server.url, SPEED, 1.0, clock, tmp_path / "fleet.log", "--start-delay-s", "6")
    try:
        published = summary(sim, 120)

        def rows(k: int) -> list[tuple[str, str, int]]:
            with sqlite3.connect(tmp_path / f"part{k}.db") as con:
                return con.execute("SELECT site, gateway, seq FROM readings").fetchall()

        wait_until(lambda: len(rows(1)) + len(rows(2)) >= published["readings"], 60, "every reading stored")
    finally:
        stop(*ingests)
        if sim.poll() is None:
            sim.kill()
    first, second = rows(1), rows(2)
    assert len(first) + len(second) == published["readings"] and not set(first) & set(second)
    for k, stored in ((1, first), (2, second)):
        assert stored and all(Partition(k, 2).owns(site) for site, _, _ in stored)
        assert "subscribed to" in (tmp_path / f"ingest{k}.log").read_text()
