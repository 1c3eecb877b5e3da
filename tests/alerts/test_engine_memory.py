"""The alert engine's memory at county scale: identities as seq runs, few readings held when a store has them.

A late reading re-evaluated from the store plus a short in-memory tail gives the events of an engine
that kept every reading in memory (the late data design of alerts/engine.py), and the identities
an engine remembers are a handful of runs, not one entry per reading.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path

from stormwatch.alerts.engine import Engine
from stormwatch.alerts.seen import SeenIdentities
from stormwatch.alerts.workorders import WorkOrders
from stormwatch.clock import ManualClock
from stormwatch.config import load_site
from stormwatch.contract import Event, Reading, parse_readings
from stormwatch.profiles import ProfileLibrary
from stormwatch.runtime.mqtt import parse_broker_url
from stormwatch.simulators.fleet import FleetOptions, build_gateways, messages_of
from stormwatch.stores.sqlite import SqliteStore

T0 = datetime(2026, 6, 1, tzinfo=UTC)


def test_identities_are_kept_as_runs_and_forgotten_by_event_time() -> None:
    seen = SeenIdentities()
    for seq in [0, 1, 2, 5, 4, 3, 9]:  # out of order: 3..5 joins 0..2, then 9 stands alone
        seen.add(("gw", "b1", seq), T0 + timedelta(minutes=seq))
    seen.add(("gw", "b1", 4), T0)  # again: nothing changes
    assert len(seen) == 7
    assert ("gw", "b1", 4) in seen and ("gw", "b1", 6) not in seen and ("gw", "b2", 0) not in seen
    assert seen._runs[("gw", "b1")] == [[0, 5], [9, 9]]
    seen.forget(T0 + timedelta(minutes=5))  # the run 0..5's newest reading is at minute 5: kept
    assert ("gw", "b1", 0) in seen
    seen.forget(T0 + timedelta(minutes=5), including=True)
    assert ("gw", "b1", 0) not in seen and ("gw", "b1", 9) in seen and len(seen) == 1


def _site_readings(tmp_path: Path) -> tuple[object, ProfileLibrary, list[Reading]]:
    """Four hours of a fleet site with a storm (site 6 of seed 7: a 2.5-in storm peaking at 02:43)."""
    library = ProfileLibrary()
    options = FleetOptions(sites_dir=tmp_path / "sites", n=6, broker=parse_broker_url("mqtt://unused:1"),
                           start=T0, duration_h=4.0, seed=7)
    gateway = build_gateways(options, library)[5]
    readings: list[Reading] = []
    for minute in range(240):
        for _t, _n, payload in messages_of(gateway.poll(T0 + timedelta(minutes=minute)), "single"):
            readings += parse_readings(payload)
    return load_site(tmp_path / "sites" / "fleet-0006.yaml", library), library, readings


def _run(tmp_path: Path, name: str, recent_s: float | None, store: SqliteStore, cfg: object,
         library: ProfileLibrary, live: list[Reading], late: list[Reading]) -> list[Event]:
    clock = ManualClock(T0)
    engine = Engine.for_site(cfg, library, WorkOrders(tmp_path / f"{name}.db", clock), 120.0,  # type: ignore[arg-type]
                             store=store, reevaluate_late=True, recent_s=recent_s)
    events = [e for r in live for e in engine.feed(r)]
    events += [e for r in late for e in engine.feed(r)]
    return events + engine.flush()


def test_a_late_reading_gives_the_same_events_with_a_short_tail_and_the_store(tmp_path: Path) -> None:
    cfg, library, readings = _site_readings(tmp_path)
    store = SqliteStore(tmp_path / "store.db")
    store.write_readings(readings)  # ingest stored everything, the late reading too
    # the gauge's wettest minute before the storm reaches 0.5 in (02:26) arrives at the end, hours late
    # (an outage replay): live, the storm qualifies later; re-evaluated, at its true time
    late = [max((r for r in readings if r.quantity == "rain_tips" and r.time < T0 + timedelta(minutes=140)),
                key=lambda r: r.value)]
    assert late[0].value > 0 and late[0].time < T0 + timedelta(hours=3)
    live = [r for r in readings if r not in late]
    everything = _run(tmp_path, "all", None, store, cfg, library, live, late)
    tail = _run(tmp_path, "tail", 600.0, store, cfg, library, live, late)

    def key(e: Event) -> tuple[object, ...]:
        return (e.kind, e.occurrence, e.event_time, e.tips, e.late_detection_s)

    assert [key(e) for e in tail] == [key(e) for e in everything]
    assert any(e.late_detection_s for e in tail)  # the late reading changed an event: it was re-evaluated
    store.close()


def test_snapshots_are_hourly_for_six_hours_then_twelve_hours_apart(tmp_path: Path) -> None:
    library = ProfileLibrary()
    options = FleetOptions(sites_dir=tmp_path / "sites", n=2, broker=parse_broker_url("mqtt://unused:1"),
                           start=T0, duration_h=48.0, seed=7)
    gateway = build_gateways(options, library)[1]  # a dry site
    cfg = load_site(tmp_path / "sites" / "fleet-0002.yaml", library)
    engine = Engine.for_site(cfg, library, None, 120.0, reevaluate_late=True)
    for minute in range(48 * 60):
        for _t, _n, payload in messages_of(gateway.poll(T0 + timedelta(minutes=minute)), "single"):
            for r in parse_readings(payload):
                engine.feed(r)
    times = [s.time for s in engine._snapshots]
    newest = times[-1]
    dense = [t for t in times if t >= newest - timedelta(hours=6)]
    sparse = [t for t in times if t < newest - timedelta(hours=6)]
    assert len(dense) == 7 and all(b - a == timedelta(hours=1) for a, b in pairwise(dense))
    assert all(b - a >= timedelta(hours=12) for a, b in pairwise(sparse))
    assert times[0] <= newest - timedelta(hours=47) and len(times) <= 12  # the horizon still covered
