"""The alert engine's acceptance: a 1.2-inch NRCS Type II storm, with the MQTT broker away for the two hours
around its peak (11 h to 13 h into the storm) while the gateway's outbox holds the readings, which it
replays when the broker is back. Real pieces: simulated Modbus TCP rain gauge (SimulatedSite),
the gateway, a real Mosquitto (stopped and restarted), the alert service.

Expected values come from the scenario's tip times (stormwatch.simulators.design_storm, NRCS Type II table of
hydrology.md), not from the engine: 1.2 in / 0.01 in = 120 tips; the last one falls when the
cumulative fraction reaches 1, at 24 h; exactly one storm_inspection_due (§133-7A(2)), due exactly
24 h after it. The run starts 10.5 h into the storm to stay short; tips before the gateway's first
(baseline) poll are not counted -- the storm still qualifies. On the lockstep clock: every slot is
polled and taken by the engine before time moves on, the broker stops at 11 h and comes back at 13 h
whatever the machine's load, so the record has no gap at all.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest

from stormwatch.alerts.lockstep import EngineParticipant
from stormwatch.alerts.service import AlertService
from stormwatch.config import parse_site
from stormwatch.contract import Event
from stormwatch.gateway.service import Gateway
from stormwatch.lockstep import LockstepClock
from stormwatch.profiles import ProfileLibrary
from stormwatch.simulators.design_storm import design_storm_tip_times
from stormwatch.simulators.scenario import RainSpec, Scenario, StormSpec
from stormwatch.simulators.site import SimulatedSite, isolate_site
from tests.gateway_support import Conductor, Script
from tests.waits import wait_until

STORM_START = datetime(2026, 6, 1, 0, 0, tzinfo=UTC)
RUN_FROM = STORM_START + timedelta(hours=10, minutes=30)
AWAY = (STORM_START + timedelta(hours=11), STORM_START + timedelta(hours=13))
RUN_TO = STORM_START + timedelta(hours=30, minutes=15)  # last tip (24 h) + 6 h dry gap + margin


@pytest.mark.mosquitto
def test_type_ii_storm_with_broker_away_at_the_peak_gives_one_inspection_due(own_mosquitto, tmp_path: Path) -> None:
    profiles = ProfileLibrary()
    cfg = isolate_site(parse_site({
        "site": {"id": "accept", "jurisdiction": "ch133"}, "gateway_id": "gw-a",
        "devices": [{"id": "rain-1", "profile": "tipping_bucket_modbus_counter", "poll_interval_s": 60,
                     "transport": {"kind": "modbus-tcp", "host": "127.0.0.1", "port": 5020}}],
        "rain_gauge": "rain-1"}, "accept.yaml", profiles), tmp_path / "links")
    scenario = Scenario(name="type-ii-1.2", start=STORM_START, duration_h=31,
                        rain=RainSpec(storm=StormSpec(distribution="type_ii", depth_in=Decimal("1.2"),
                                                      start_offset_h=0)))
    tips = design_storm_tip_times("type_ii", Fraction(12, 10), Fraction(1, 100), STORM_START)
    assert len(tips) == 120 and tips[-1] == STORM_START + timedelta(hours=24)
    last_tip = tips[-1]

    clock = LockstepClock(RUN_FROM, RUN_TO)
    site = SimulatedSite(cfg, profiles, scenario, clock)
    seen: list[Event] = []
    service = AlertService([cfg], profiles, own_mosquitto.url, None, tmp_path / "alerts.db", clock,
                           client_id="accept-alerts", lateness_s=600, on_event=seen.append, overdue_check_s=math.inf)
    svc_thread = threading.Thread(target=service.run, daemon=True)
    gateway = Gateway(cfg, profiles, clock, own_mosquitto.url, tmp_path / "gw", reconnect_max_s=1.0,
                      drain_timeout_s=30.0, confirm="broker")
    away = threading.Event()
    outage: dict[str, int] = {}

    def broker_away() -> None:
        outage["made_before"] = gateway.readings_made
        away.set()
        own_mosquitto.stop()

    def broker_back() -> None:
        outage["held"] = gateway.outbox_depth()
        outage["made_during"] = gateway.readings_made - outage["made_before"]
        own_mosquitto.start()
        away.clear()

    clock.add(_EngineUnlessAway(service, lambda: gateway.readings_made, RUN_FROM, away))

    def unacknowledged(t: datetime) -> str | None:  # nothing in flight when the broker goes
        depth = 0 if away.is_set() else gateway.outbox_depth()
        return f"{depth} readings not PUBACKed" if depth else None

    clock.add(Script("the broker away", {AWAY[0]: broker_away, AWAY[1]: broker_back}, unacknowledged))
    site.start()
    svc_thread.start()
    gw_thread = threading.Thread(target=gateway.run, kwargs={"until": RUN_TO}, daemon=True)
    try:
        assert service.connected.wait(10)
        gw_thread.start()
        Conductor(clock).join(600)
        gw_thread.join(60)
        assert not gw_thread.is_alive()
        wait_until(lambda: service.readings_seen >= gateway.readings_made, 60, "the engine to see every reading")
    finally:
        clock.stop()
        gateway.stop()
        service.stop()
        svc_thread.join(15)
        site.stop()
    # every slot polled; the outbox held every reading of the two hours away and replayed it
    assert gateway.missed_slots == 0
    assert gateway.readings_made == int((RUN_TO - RUN_FROM) / timedelta(minutes=1))
    assert outage["made_during"] == 120 and outage["held"] == 120, outage  # a rain reading a minute
    due = [e for e in seen if e.kind == "storm_inspection_due"]
    assert len(due) == 1, [(e.kind, e.occurrence) for e in seen]
    assert due[0].storm_end == last_tip
    assert due[0].due_at == last_tip + timedelta(hours=24)  # exactly 24 h after the last tip
    counted = [t for t in tips if t > RUN_FROM]  # the first poll (10:30) is the counter's baseline
    assert due[0].tips == len(counted)
    # The outbox lost nothing and every slot was polled: no gap in the record longer than the two poll
    # intervals of silence before a gap opens (the gateway's last will on the broker's stop may open
    # one; the replay closes it at once).
    allowance = timedelta(minutes=2)
    long_gaps = [e for e in seen if e.kind == "data_gap" and e.gap_end is not None
                 and e.gap_end - e.gap_start > allowance]
    assert long_gaps == []


class _EngineUnlessAway(EngineParticipant):
    """The engine's share of each instant, owing nothing while the broker is away (what the gateway
    makes then waits in its outbox)."""

    def __init__(self, service: AlertService, made: Callable[[], int], start: datetime,
                 away: threading.Event) -> None:
        super().__init__(service, made, start, overdue_check_s=3600)
        self.away = away

    def pending(self, t: datetime) -> str | None:
        return None if self.away.is_set() else super().pending(t)
