"""A simulated storm through the gateway to a real Mosquitto, with the uplink and the gateway
itself failing part-way (the gateway's acceptance):

* the uplink is cut (or the broker stopped) from hour 10 to hour 20: every slot is polled, the
  outbox holds exactly the outage's readings, every reading arrives exactly once (after
  de-duplication by identity), in order, and the stored storm total equals the scenario's;
* the gateway process (``--lockstep``, the clock over MQTT) is killed (SIGKILL) at the storm's
  peak and restarted: every slot polled, no reading lost, none duplicated downstream (identity,
  tips total), no rain invented.

Both run the default scenario (NRCS Type II, 1.2 in = 120 tips of 0.01 in) on a SimulatedSite with
5-minute polling on the lockstep clock (docs/simulators.md), so a loaded machine makes them
slower, never different.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import yaml

from stormwatch import topics
from stormwatch.app.pipeline import patient
from stormwatch.config import SiteConfig, parse_site
from stormwatch.contract import Reading
from stormwatch.gateway.service import STATE_DB, Gateway
from stormwatch.lockstep import LockstepClock
from stormwatch.profiles import ProfileLibrary
from stormwatch.runtime.mqttclock import MqttConductor
from stormwatch.simulators.scenario import load_scenario
from stormwatch.simulators.site import SimulatedSite, isolate_site
from stormwatch.stores.urls import open_store
from tests.gateway_support import Collector, Conductor, Script, TcpProxy
from tests.waits import wait_until

pytestmark = pytest.mark.mosquitto

SCENARIO = load_scenario("default")
#: The outage test's uplink is away from hour 10 to hour 20 of 32 (the storm's peak: hour 12).
DOWN_FROM = SCENARIO.start + timedelta(hours=10)
DOWN_UNTIL = SCENARIO.start + timedelta(hours=20)
POLL_S = 300


def _site(tmp_path: Path, site_id: str) -> SiteConfig:
    cfg = parse_site({
        "site": {"id": site_id, "jurisdiction": "ch133"}, "gateway_id": "gw-storm",
        "devices": [
            {"id": "rain-1", "profile": "tipping_bucket_modbus_counter", "poll_interval_s": POLL_S,
             "transport": {"kind": "modbus-tcp", "host": "127.0.0.1", "port": 5020, "unit_id": 1}},
            {"id": "turb-up", "profile": "yosemitech_y511", "poll_interval_s": POLL_S,
             "transport": {"kind": "modbus-tcp", "host": "127.0.0.1", "port": 5020, "unit_id": 2}},
            {"id": "turb-down", "profile": "yosemitech_y511", "poll_interval_s": POLL_S,
             "transport": {"kind": "modbus-tcp", "host": "127.0.0.1", "port": 5021, "unit_id": 1}},
        ],
        "rain_gauge": "rain-1", "turbidity_pair": {"upstream": "turb-up", "downstream": "turb-down"},
    }, "storm-site", ProfileLibrary())
    return isolate_site(cfg, tmp_path / "links")


def _unique(readings: list[Reading]) -> dict[tuple[str, str, int], Reading]:
    out: dict[tuple[str, str, int], Reading] = {}
    for r in readings:
        out.setdefault(r.identity, r)
    return out


def _stored_tips(tmp_path: Path, readings: list[Reading], site_id: str) -> int:
    """Write what arrived to the ingest SQLite store (it de-duplicates by identity) and sum the tips."""
    store = open_store(f"sqlite:///{tmp_path / 'stored.db'}")
    try:
        store.write_readings(readings)
        stored = store.query_readings(site_id, quantity="rain_tips")
        return sum(int(r.value) for r in stored)
    finally:
        store.close()


def _settled(gw: Gateway, sub: Collector, down: threading.Event) -> Callable[[datetime], str | None]:
    """What a lockstep instant still owes while the uplink is up: every reading made PUBACKed by the
    broker and received by the subscriber (so nothing is in flight when the outage starts)."""

    def owed(t: datetime) -> str | None:
        if down.is_set():
            return None
        if depth := gw.outbox_depth():
            return f"{depth} readings not PUBACKed"
        with sub.lock:
            missing = gw.readings_made - len(sub.identities)
        return f"{missing} readings not received by the subscriber" if missing > 0 else None

    return owed


@pytest.mark.parametrize("outage", ["uplink_cut", "broker_stopped"])
def test_outage_mid_storm_every_reading_arrives_once_in_order(own_mosquitto, tmp_path: Path, outage: str) -> None:
    """``uplink_cut``: the gateway's connection is cut and refused (the cellular modem drops);
    ``broker_stopped``: Mosquitto itself is stopped (SIGTERM) and restarted with its persistence.

    On the lockstep clock: every slot is polled, the uplink goes at hour 10 (after that instant's
    readings arrived) and comes back at hour 20, whatever the machine's load."""
    site_id = f"storm-{uuid.uuid4().hex[:8]}"
    cfg = patient(_site(tmp_path, site_id))
    clock = LockstepClock(SCENARIO.start, SCENARIO.end)
    site = SimulatedSite(cfg, ProfileLibrary(), SCENARIO, clock)
    site.start()
    sub = Collector(own_mosquitto.port, topics.readings(site_id, "gw-storm"), f"sub-{site_id}", clean=False)
    proxy = TcpProxy(own_mosquitto.port).start()
    broker_url = f"mqtt://127.0.0.1:{proxy.port}" if outage == "uplink_cut" else own_mosquitto.url
    gw = Gateway(cfg, ProfileLibrary(), clock, broker_url, tmp_path / "gw", drain_timeout_s=20, confirm="broker",
                 reconnect_max_s=1)
    down = threading.Event()
    seen: dict[str, int] = {}

    def cut() -> None:
        seen["made_before"] = gw.readings_made
        down.set()
        proxy.cut() if outage == "uplink_cut" else own_mosquitto.stop()

    def restore() -> None:
        seen["depth_during"] = gw.outbox_depth()
        seen["made_during"] = gw.readings_made - seen["made_before"]
        proxy.restore() if outage == "uplink_cut" else own_mosquitto.start()
        down.clear()

    clock.add(Script("the uplink outage", {DOWN_FROM: cut, DOWN_UNTIL: restore}, _settled(gw, sub, down)))
    t = threading.Thread(target=gw.run, kwargs={"until": SCENARIO.end})
    t.start()
    conductor = Conductor(clock)
    try:
        conductor.join(600)
        t.join(60)
        expected = gw.readings_made
        got = sub.wait_for(expected, timeout_s=20)
    finally:
        clock.stop()
        gw.stop()
        sub.close()
        site.stop()
        proxy.cut()
    assert not t.is_alive()
    slots = int((SCENARIO.end - SCENARIO.start).total_seconds() // POLL_S)
    assert gw.missed_slots == 0
    assert expected == slots * 5  # rain + 2 × (turbidity, temperature) per slot: every slot polled
    assert gw.outbox_depth() == 0 and gw.publisher.acknowledged == expected  # every reading PUBACKed
    outage_slots = int((DOWN_UNTIL - DOWN_FROM).total_seconds() // POLL_S)
    # the outbox held every reading of the outage: the slots after the cut up to the restore's own
    assert seen["made_during"] == outage_slots * 5 and seen["depth_during"] == seen["made_during"]
    unique = _unique(got)
    assert sorted(r.seq for r in unique.values()) == list(range(expected))  # all, once each
    first_seen = [r for r in got if r is unique[r.identity]]
    for dev in ("rain-1", "turb-up", "turb-down"):
        # in order: each device's readings arrive in event-time (and seq) order -- across devices
        # polled by different link threads the commit order may interleave slots
        series = [(r.time, r.seq) for r in first_seen if r.device == dev and r.quantity != "temperature"]
        assert series == sorted(series) and len({t for t, _ in series}) == len(series), dev
    during = [r for r in unique.values() if DOWN_FROM < r.time <= DOWN_UNTIL]
    assert len(during) == seen["made_during"]  # readings made while the uplink was away arrived too
    scenario_tips = site.state.tips.tips_until(SCENARIO.end)
    assert scenario_tips == 120  # 1.2 in at 0.01 in per tip
    assert sum(int(r.value) for r in unique.values() if r.quantity == "rain_tips") == scenario_tips
    assert _stored_tips(tmp_path, got, site_id) == scenario_tips


def _run_gateway(cfg_path: Path, broker: str, state: Path, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [str(Path(sys.executable).parent / "stormwatch"), "gateway", "--site", str(cfg_path), "--broker", broker,
         "--state-dir", str(state), "--lockstep", "--until", SCENARIO.end.isoformat(),
         "--confirm", "broker"],  # no ingest here: the broker's PUBACK is the confirmation
        stdout=log.open("ab"), stderr=subprocess.STDOUT,
        env={**{k: v for k, v in os.environ.items() if k != "STORMWATCH_CLOCK_FILE"}, "PYTHONUNBUFFERED": "1"},
    )


class _Simulator(MqttConductor):
    """The simulator's side of the lockstep clock over MQTT (``stormwatch simulate --lockstep``): the
    simulated devices' clock, moved once the gateway process is done with each instant -- and held
    at ``hold_at`` (the gateway done with it) until the test releases it."""

    def __init__(self, clock: LockstepClock, broker_url: str, site_id: str, hold_at: datetime) -> None:
        super().__init__(clock, broker_url, site_id, participants=["gateway"], wait_s=5)
        self.hold_at = hold_at
        self.holding = threading.Event()
        self.release = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def owed(self, joining: bool = False) -> list[str]:
        out = super().owed(joining)
        if not joining and self.clock.now() == self.hold_at and not self.release.is_set():
            if not out:
                self.holding.set()
            out.append("the test (holds the clock)")
        return out

    def _run(self) -> None:
        try:
            self.run()
        except BaseException as exc:  # re-raised by the test
            self.error = exc


def test_gateway_killed_mid_storm_and_restarted_loses_and_invents_nothing(mosquitto_server, tmp_path: Path) -> None:
    """The gateway process on the lockstep clock (``--lockstep``): SIGKILLed once the clock is past the
    storm's peak, the clock waits for it, and the restarted process carries on from that instant."""
    site_id = f"kill-{uuid.uuid4().hex[:8]}"
    cfg = patient(_site(tmp_path, site_id))
    cfg_path = tmp_path / "site.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
    clock = LockstepClock(SCENARIO.start, SCENARIO.end)
    site = SimulatedSite(cfg, ProfileLibrary(), SCENARIO, clock)
    site.start()
    sub = Collector(mosquitto_server.port, topics.readings(site_id, "gw-storm"), f"sub-{site_id}", clean=False)
    state = tmp_path / "gw"
    log = tmp_path / "gateway.log"
    killed_at = SCENARIO.start + timedelta(hours=12)  # the peak, at hour 12 of 32
    sim = _Simulator(clock, mosquitto_server.url, site_id, hold_at=killed_at)
    second: subprocess.Popen | None = None
    try:
        first = _run_gateway(cfg_path, mosquitto_server.url, state, log)
        # killed once it has polled the peak's instant and its readings are PUBACKed
        wait_until(lambda: sim.holding.is_set() or first.poll() is not None, 300, "the gateway done with the peak")
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        wait_until(lambda: any(o.startswith("gateway (gone") for o in sim.owed()), 30, "the gateway's last will")
        second = _run_gateway(cfg_path, mosquitto_server.url, state, log)
        sim.release.set()  # the clock now waits for the restarted gateway at the peak
        assert second.wait(300) == 0, log.read_text()[-3000:]
        sim.thread.join(60)
        if sim.error is not None:
            raise sim.error
        assert clock.finished
        got = sub.barrier()
    finally:
        for p in (first, second):
            if p is not None and p.poll() is None:
                p.kill()
        clock.stop()
        sub.close()
        site.stop()
    unique = _unique(got)
    boots = sorted({r.boot for r in unique.values()}, key=lambda b: min(r.time for r in unique.values()
                                                                         if r.boot == b))
    assert len(boots) == 2, log.read_text()[-3000:]
    for boot in boots:  # every reading each process made arrived (seq has no holes)
        seqs = sorted(r.seq for r in unique.values() if r.boot == boot)
        assert seqs == list(range(len(seqs)))
    db = sqlite3.connect(str(state / STATE_DB))
    assert db.execute("SELECT COUNT(*) FROM outbox").fetchone() == (0,)  # nothing left behind
    db.close()
    rain = sorted((r for r in unique.values() if r.quantity == "rain_tips"), key=lambda r: (r.time, r.seq))
    slots = [SCENARIO.start + timedelta(seconds=POLL_S * k)
             for k in range(int((SCENARIO.end - SCENARIO.start).total_seconds() // POLL_S))]
    restarted = [r for r in rain if r.boot == boots[1]]
    # the restarted process polls the instant the clock waits at, which the killed one had polled:
    # that slot has a reading of each process, the second counting no tip (the counter's baseline
    # was committed with the first); every other slot one reading
    assert [r.time for r in rain] == sorted([*slots, killed_at])
    assert restarted[0].time == killed_at and "counter_baseline" not in restarted[0].flags  # baseline persisted
    before_kill = next(r for r in rain if r.time == killed_at and r.boot == boots[0])
    assert restarted[0].value == 0 and restarted[0].raw == before_kill.raw
    scenario_tips = site.state.tips.tips_until(SCENARIO.end)
    assert scenario_tips == 120
    # the gateway joined the clock before its first instant: its first sample (the counter's
    # baseline) is at the scenario's start, before the first tip
    assert "counter_baseline" in rain[0].flags and rain[0].time == SCENARIO.start
    assert int(rain[0].raw) == SCENARIO.rain.counter_offset  # type: ignore[arg-type]
    assert sum(int(r.value) for r in rain) == scenario_tips, (  # no tip lost, none invented
        f"killed at {killed_at}: " + "; ".join(f"{r.time:%H:%M} {r.boot[:4]} {r.value} {r.raw} {','.join(r.flags)}"
                                                for r in rain if r.value or r.flags))
    assert _stored_tips(tmp_path, got, site_id) == scenario_tips
