"""A counter reset through the real stack: a persisted baseline of 1,588, the site loses power, the
gateway comes back 10 h later and its counter (a real Modbus TCP server) reads 0, then 0, then 3.

Read as a wrap it would be 65,536 - 1,588 = 63,948 tips (639 in) and a storm inspection. Expected (by
hand, the envelope for 10 h is 1.5 x 422 x 10^0.475 mm = 7,439 tips of 0.01 in): the first sample is a
suspect (0 tips), the second confirms a reset (0 tips, ``counter_reset``), the third adds 3 tips;
readings go over a real Mosquitto to the alert engine, which reports the 10 hours since the last
trusted reading as a data gap and opens no storm inspection.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stormwatch import topics
from stormwatch.alerts.engine import Engine
from stormwatch.alerts.packs import load_pack
from stormwatch.config import parse_site
from stormwatch.contract import Event, Reading
from stormwatch.gateway.counter import CounterState
from stormwatch.gateway.outbox import Outbox
from stormwatch.gateway.service import STATE_DB, Gateway
from stormwatch.lockstep import LockstepClock
from stormwatch.profiles import ProfileLibrary
from tests.gateway_support import Collector, Conductor, RegisterServer

SIM_START = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
BEFORE = SIM_START - timedelta(hours=10)  # the last trusted sample, before the power cut


@pytest.mark.mosquitto
def test_counter_reset_after_ten_hours_is_a_gap_not_639_inches(mosquitto_server, tmp_path: Path) -> None:
    srv = RegisterServer(unit_ids=(1,)).start()
    counts = [0, 0, 3]
    srv.dynamic[1] = lambda address, read_no: counts[min(read_no, 2)] if address == 0 else None
    site_id = f"reset-{uuid.uuid4().hex[:8]}"
    profiles = ProfileLibrary()
    cfg = parse_site({"site": {"id": site_id, "jurisdiction": "ch133"}, "gateway_id": "gw-r",
                      "devices": [{"id": "rain-1", "profile": "tipping_bucket_modbus_counter", "poll_interval_s": 60,
                                   "transport": {"kind": "modbus-tcp", "host": "127.0.0.1", "port": srv.port,
                                                 "unit_id": 1}}],
                      "rain_gauge": "rain-1"}, "test", profiles)
    state_dir = tmp_path / "gw"
    state_dir.mkdir()
    outbox = Outbox(state_dir / STATE_DB)
    outbox.add([], {"rain-1": CounterState(1588, BEFORE)})  # the baseline the gateway persisted
    outbox.close()
    sub = Collector(mosquitto_server.port, topics.readings(site_id, "gw-r"), f"sub-{site_id}")
    try:
        end = SIM_START + timedelta(seconds=180)
        clock = LockstepClock(SIM_START, end)  # every slot polled, whatever the machine's load
        gw = Gateway(cfg, profiles, clock, mosquitto_server.url, state_dir, confirm="broker")
        conductor = Conductor(clock)
        gw.run(until=end)
        conductor.join()
        got = sorted(sub.wait_for(3), key=lambda r: r.seq)
    finally:
        clock.stop()
        sub.close()
        srv.stop()
    assert [r.time for r in got] == [SIM_START + timedelta(seconds=s) for s in (0, 60, 120)]
    assert [(r.value, r.raw, r.flags) for r in got] == [
        (0, 0, ("counter_suspect",)), (0, 0, ("counter_reset",)), (3, 3, ())]

    # The alert engine saw the gauge's last trusted reading before the outage, then these.
    engine = Engine(cfg, profiles, load_pack("ch133", cfg.rules), None, lateness_s=0)
    last = Reading(site=site_id, device="rain-1", quantity="rain_tips", value=0, unit="{tip}", time=BEFORE,
                   gateway="gw-r", boot="before", seq=0, raw=1588)
    events: list[Event] = engine.feed(last)
    for r in got:
        events += engine.feed(r)
    events += engine.flush()
    gaps = [(e.gap_start, e.gap_end) for e in events if e.kind == "data_gap"]
    assert gaps == [(BEFORE, None), (BEFORE, SIM_START + timedelta(seconds=60))]  # opened, closed by the reset
    storm = [e for e in events if e.kind.startswith("storm")]
    assert [e.kind for e in storm] == ["storm_started"] and storm[0].tips == 3  # 3 tips, not 63,948
    assert not any(e.kind == "storm_inspection_due" for e in events)
