"""Broker away (failure-kinds.md #8) with a real Mosquitto that the test stops and restarts, and
the outbox's bound and drop policy."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stormwatch import topics
from stormwatch.clock import ScenarioClock
from stormwatch.config import parse_site
from stormwatch.contract import Reading
from stormwatch.gateway.outbox import Outbox
from stormwatch.gateway.service import STATE_DB, Gateway
from stormwatch.profiles import ProfileLibrary
from tests.test_gateway_support import Collector, RegisterServer
from tests.waits import wait_until

SIM_START = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


@pytest.mark.mosquitto
def test_broker_away_ten_readings_all_arrive_exactly_once(own_mosquitto, tmp_path: Path) -> None:
    site_id = f"away-{uuid.uuid4().hex[:8]}"
    topic = topics.readings(site_id, "gw-t")
    # A persistent subscriber session, made while the broker is up, so the broker queues for it.
    sub = Collector(own_mosquitto.port, topic, f"sub-{site_id}", clean=False)
    srv = RegisterServer(unit_ids=(1,)).start()
    # The counter rises by 3 tips per read: 1000, 1003, 1006, ...
    srv.dynamic[1] = lambda address, n: 1000 + 3 * n if address == 0 else None
    cfg = parse_site(
        {"site": {"id": site_id, "jurisdiction": "ch133"}, "gateway_id": "gw-t",
         "devices": [{"id": "rain-1", "profile": "tipping_bucket_modbus_counter", "poll_interval_s": 60,
                      "transport": {"kind": "modbus-tcp", "host": "127.0.0.1", "port": srv.port}}]},
        "test", ProfileLibrary(),
    )
    own_mosquitto.stop()
    clock = ScenarioClock(sim_start=SIM_START, speed=600.0, wall_start=time.time() + 0.3)
    until = SIM_START + timedelta(minutes=10)  # slots 0..9 -> 10 readings
    gw = Gateway(cfg, ProfileLibrary(), clock, own_mosquitto.url, tmp_path / "gw",
                 drain_timeout_s=30.0, reconnect_max_s=2.0)
    t = threading.Thread(target=gw.run, kwargs={"until": until})
    t.start()
    try:
        wait_until(lambda: gw.readings_made >= 10 and clock.now() >= until, 15, "10 readings in the outbox")
        assert gw.readings_made == 10
        time.sleep(0.3)
        # Broker still down: nothing acknowledged, nothing deleted.
        assert gw.outbox_depth() == 10
        assert gw.publisher.acknowledged == 0
        own_mosquitto.start()
        t.join(40)
        assert not t.is_alive()
        got = sub.wait_for(10, timeout_s=20)
        time.sleep(0.5)  # let any duplicate show up
        got = sub.wait_for(10, timeout_s=0)
    finally:
        sub.close()
        srv.stop()
    ids = [(r.gateway, r.boot, r.seq) for r in got]
    assert len(ids) == 10 and len(set(ids)) == 10  # all 10, exactly once
    assert {r.boot for r in got} == {gw.boot}
    got.sort(key=lambda r: r.seq)
    assert [r.value for r in got] == [0] + [3] * 9  # baseline, then 3 tips per poll
    assert [r.time for r in got] == [SIM_START + timedelta(minutes=k) for k in range(10)]
    assert [r.raw for r in got] == [1000 + 3 * k for k in range(10)]
    reopened = Outbox(tmp_path / "gw" / STATE_DB)
    assert reopened.depth() == 0
    reopened.close()


def _reading(seq: int, quantity: str, minute: int) -> Reading:
    return Reading(
        site="s", device="d", quantity=quantity, value=1 if quantity == "rain_tips" else 1.5,
        unit="{tip}" if quantity == "rain_tips" else "NTU", time=SIM_START + timedelta(minutes=minute),
        gateway="g", boot="b", seq=seq,
    )


def test_outbox_bound_drops_non_rain_first(tmp_path: Path) -> None:
    box = Outbox(tmp_path / "o.sqlite3", max_rows=4)
    box.add([_reading(0, "rain_tips", 0), _reading(1, "turbidity", 0), _reading(2, "turbidity", 1)])
    box.add([_reading(3, "rain_tips", 2), _reading(4, "rain_tips", 3)])  # 5 rows > 4: oldest turbidity goes
    rows = box.pending(10)
    assert [r.seq for r in rows] == [0, 2, 3, 4]
    box.add([_reading(5, "rain_tips", 4), _reading(6, "rain_tips", 5)])  # then the other turbidity, then rain 0
    assert [r.seq for r in box.pending(10)] == [3, 4, 5, 6]
    assert box.dropped == 3
    box.close()


def test_outbox_replay_order_is_event_time_then_seq(tmp_path: Path) -> None:
    box = Outbox(tmp_path / "o.sqlite3")
    box.add([_reading(7, "turbidity", 5), _reading(8, "turbidity", 1), _reading(9, "turbidity", 1)])
    assert [r.seq for r in box.pending(10)] == [8, 9, 7]
    assert [r.seq for r in box.pending(10, exclude={box.pending(1)[0].id})] == [9, 7]
    box.delete([r.id for r in box.pending(2)])
    assert box.depth() == 1
    box.close()
