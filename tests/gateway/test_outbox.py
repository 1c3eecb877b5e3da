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
from stormwatch.config import parse_site
from stormwatch.contract import Reading
from stormwatch.gateway.outbox import Outbox
from stormwatch.gateway.service import STATE_DB, Gateway
from stormwatch.lockstep import LockstepClock
from stormwatch.profiles import ProfileLibrary
from tests.gateway_support import Collector, Conductor, RegisterServer

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
    until = SIM_START + timedelta(minutes=10)  # slots 0..9 -> 10 readings
    clock = LockstepClock(SIM_START, until)
    gw = Gateway(cfg, ProfileLibrary(), clock, own_mosquitto.url, tmp_path / "gw",
                 drain_timeout_s=30.0, reconnect_max_s=2.0, confirm="broker")
    t = threading.Thread(target=gw.run, kwargs={"until": until})
    t.start()
    try:
        Conductor(clock).join()  # every slot polled: the clock ran to the end
        assert gw.readings_made == 10 and gw.missed_slots == 0
        # Broker still down: nothing acknowledged, nothing deleted.
        assert gw.outbox_depth() == 10
        assert gw.publisher.acknowledged == 0
        own_mosquitto.start()
        t.join(40)
        assert not t.is_alive()
        sub.wait_for(10, timeout_s=20)
        got = sub.barrier()  # a duplicate would have arrived by now
    finally:
        clock.stop()
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


def test_outbox_replay_order_is_commit_order(tmp_path: Path) -> None:
    """Commit order (seq order within a boot): a row a slow link commits for an older slot after newer
    rows were sent comes after them, so the publisher's cursor neither skips nor repeats it."""
    box = Outbox(tmp_path / "o.sqlite3")
    box.add([_reading(7, "turbidity", 5), _reading(8, "turbidity", 1), _reading(9, "turbidity", 1)])
    assert [r.seq for r in box.pending(10)] == [7, 8, 9]
    assert [r.seq for r in box.pending(10, exclude={box.pending(1)[0].id})] == [8, 9]
    box.delete([r.id for r in box.pending(2)])
    assert box.depth() == 1
    box.close()


def test_outbox_cursor_and_confirmations(tmp_path: Path) -> None:
    """What the publisher's forward pass and re-sends read (gateway/publisher.py): rows after an id and up
    to one, and rows confirmed by (boot, seq) runs."""
    box = Outbox(tmp_path / "o.sqlite3")
    box.add([_reading(s, "turbidity", s) for s in range(6)])
    rows = box.pending(10)
    assert [r.seq for r in box.pending(10, after=rows[1].id)] == [2, 3, 4, 5]
    assert [r.seq for r in box.pending(10, after=rows[1].id, upto=rows[3].id)] == [2, 3]
    head = box.head()
    assert head is not None and head[0] == rows[0].id and abs(head[1] - time.time()) < 60
    # ingest confirmed seq 1..2 and 4 (and 9, which is not here): those leave, the rest stays
    assert box.confirm("g", [("b", 1, 2), ("b", 4, 4), ("b", 9, 9), ("other-boot", 0, 5)]) == (3, rows[4].id)
    assert [r.seq for r in box.pending(10)] == [0, 3, 5] and box.depth() == 3
    assert box.confirm("another-gateway", [("b", 0, 5)]) == (0, None)
    # an older slot committed after the cursor passed rows[5]: it comes after the cursor
    box.add([_reading(6, "turbidity", -1)])
    assert [r.seq for r in box.pending(10, after=rows[5].id)] == [6]
    box.close()


def test_outbox_of_an_older_version_gains_its_commit_times(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(str(path))
    db.execute("CREATE TABLE outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, gateway TEXT NOT NULL, boot TEXT NOT NULL,"
               " seq INTEGER NOT NULL, device TEXT NOT NULL, quantity TEXT NOT NULL, event_time TEXT NOT NULL,"
               " is_rain INTEGER NOT NULL, payload BLOB NOT NULL, UNIQUE (gateway, boot, seq))")
    db.execute("INSERT INTO outbox (gateway, boot, seq, device, quantity, event_time, is_rain, payload)"
               " VALUES ('g', 'b', 0, 'd', 'turbidity', '2026-06-01T12:00:00.000000Z', 0, x'7b7d')")
    db.commit()
    db.close()
    box = Outbox(path)
    head = box.head()
    assert box.depth() == 1 and head is not None and head[1] == 0.0  # unknown: the publisher counts from its start
    box.add([_reading(1, "turbidity", 1)])
    assert [r.seq for r in box.pending(10)] == [0, 1]
    box.close()
