"""Failure kind #18 (docs/reference/failure-kinds.md), "Unbounded concurrent writes": InfluxDB 1.x
answered ``500 engine: error syncing wal`` and a client that then dropped writes lost 20-50 % of
the readings. Ours: one write in flight at a time, batched, a 500 retried (it is transient in 1.x).

A real HTTP front (tests/stores/test_retry.py ``BusyFront``) stands before the real ``influxd`` and
answers ``500 {"error":"engine: error syncing wal"}`` to the first writes, forwarding everything
else; it counts concurrent ``/write`` requests and the lines of the writes InfluxDB accepted. The
database is then counted with InfluxQL, independently of the store's code.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from stormwatch.app import servers
from stormwatch.clock import ManualClock
from stormwatch.contract import Reading
from stormwatch.stores.influx1 import Influx1Store
from tests.ingest_support import T0, Publisher, Running, count_and_distinct, influx_count, publish_range
from tests.names import RUN
from tests.stores_support import BusyFront
from tests.waits import wait_until

pytestmark = pytest.mark.influxdb

WAL = b'{"error":"engine: error syncing wal"}'


@pytest.fixture()
def fronts() -> Iterator[list[BusyFront]]:
    made: list[BusyFront] = []
    yield made
    for f in made:
        f.close()


def test_store_retries_wal_500_and_writes_every_point_once(
        influx_server: servers.InfluxDB1, fronts: list[BusyFront]) -> None:
    front = BusyFront(influx_server.url, 500, None, refuse_writes=3, message=WAL)
    fronts.append(front)
    # a database of this run alone: one of an earlier run on the same server holds its 2,000 readings
    store = Influx1Store(front.url, f"wal500_store_{RUN}", retries=4, backoff_s=0.01, batch_lines=500)
    readings = [Reading(site="riverside", device="turb-down", quantity="turbidity", value=n / 4, unit="NTU",
                        time=T0 + timedelta(seconds=n), gateway="gw-1", boot="b1", seq=n, raw=[n])
                for n in range(1, 2001)]
    assert store.write_readings(readings) == 2000
    store.close()
    # the first batch of 500 was refused three times, then written; the other three at once
    assert len(front.refused) == 3 and store.retries_total == 3
    assert len(front.forwarded_writes) == 4 and front.forwarded_lines == 2000  # no line written twice
    assert front.max_in_flight == 1
    (row,) = influx_count(influx_server, f"wal500_store_{RUN}", 'SELECT COUNT("value"), SUM("value") FROM readings')
    assert row[1:] == [2000, sum(n / 4 for n in range(1, 2001))]  # 500,250.0


@pytest.mark.mosquitto
def test_ingest_through_mosquitto_survives_wal_500s_with_one_write_in_flight(
        own_mosquitto: servers.Mosquitto, influx_server: servers.InfluxDB1, fronts: list[BusyFront]) -> None:
    # 8 refusals against a store that gives up after 3 attempts: the store raises StoreError twice,
    # ingest keeps the batch unacknowledged and retries it, and the third round gets through.
    front = BusyFront(influx_server.url, 500, None, refuse_writes=8, message=WAL)
    fronts.append(front)
    store = Influx1Store(front.url, f"wal500_ingest_{RUN}", retries=2, backoff_s=0.01)
    run = Running(own_mosquitto, store, clock=ManualClock(T0 + timedelta(days=1), on_sleep="wait"), batch_ms=50,
                  retry_backoff_s=0.05, max_backoff_s=0.2)
    pub = Publisher(own_mosquitto)
    try:
        publish_range(pub, range(1, 3001))
        wait_until(lambda: run.ingest.acked == 3000, timeout_s=60, what="all 3,000 acknowledged")
    finally:
        pub.close()
        run.stop()
    assert len(front.refused) == 8
    assert run.ingest.store_errors == 2 and store.retries_total == 6  # 2 + 2 + 2 in-store retries
    assert run.ingest.written == 3000 and dict(run.ingest.dead_lettered) == {}
    # every reading written once, none twice -- plus the one record of the configured site (measurement
    # ``sites``, written once the store has taken a batch)
    assert front.forwarded_lines == 3000 + 1
    assert front.max_in_flight == 1  # one worker, one write at a time
    assert count_and_distinct(influx_server, f"wal500_ingest_{RUN}") == (3000, 3000, 1, 3000)
