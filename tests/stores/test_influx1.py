"""InfluxDB 1.x store against a real ``influxd`` (failure-kinds.md #12-#16): what only this store meets
(escaping, NaN, field types, retention, an unreachable server); what every store promises is
tests/stores/test_conformance.py. Values are read back
with InfluxQL over HTTP, independently of the store's own query code."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from stormwatch.app import servers
from stormwatch.contract import Reading
from stormwatch.stores.base import StoreError
from stormwatch.stores.influx1 import Influx1Store
from stormwatch.stores.lineprotocol import Point, encode_points
from stormwatch.stores.urls import open_store
from tests.names import RUN

pytestmark = pytest.mark.influxdb

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
_db_numbers = itertools.count()


def fresh_db(name: str) -> str:
    # unique to this run too: a database of an earlier run on the same server still holds its readings
    return f"{name}_{RUN}_{next(_db_numbers)}"


def turb(seq: int, value: float | int, *, site: str = "riverside", minute: int = 0,
         flags: tuple[str, ...] = ()) -> Reading:
    return Reading(site=site, device="turb-down", quantity="turbidity", value=value, unit="NTU",
                   time=T0 + timedelta(minutes=minute), gateway="gw-1", boot="b1", seq=seq, raw=[seq], flags=flags)


def select(srv: servers.InfluxDB1, db: str, q: str) -> list[list[object]]:
    res = srv.query(q, db)["results"][0]
    assert "error" not in res, res
    series = res.get("series", [])
    return series[0]["values"] if series else []


def test_site_with_comma_space_equals_round_trips(influx_server: servers.InfluxDB1) -> None:
    # failure-kinds.md #12: `Pond 3, Inlet=N` is a valid tag value (escaped, never quoted).
    db = fresh_db("escaping")
    store = open_store(influx_server.store_url(db))
    assert isinstance(store, Influx1Store)
    r = turb(1, 4.25, site="Pond 3, Inlet=N")
    assert store.write_readings([r]) == 1
    rows = select(influx_server, db, "SELECT \"site\", \"value\" FROM readings WHERE \"site\" = 'Pond 3, Inlet=N'")
    # event time in ns + the reading's timestamp slot (0..999 ns, stormwatch.stores.influxwrite)
    assert [[t // 1_000 * 1_000, site, value] for t, site, value in rows] == [
        [1_780_315_200_000_000_000, "Pond 3, Inlet=N", 4.25]]
    tags = select(influx_server, db, 'SHOW TAG VALUES FROM readings WITH KEY = "site"')
    assert tags == [["site", "Pond 3, Inlet=N"]]
    assert store.query_readings("Pond 3, Inlet=N") == [r.model_copy(update={"value": 4.25})]


def test_nan_field_dropped_and_all_nan_point_writes_nothing(influx_server: servers.InfluxDB1) -> None:
    # failure-kinds.md #13: {turbidity: NaN, stage: 1.2} writes only stage; an all-NaN point writes
    # nothing; neither rejects the rest of the batch.
    db = fresh_db("nan")
    store = Influx1Store(influx_server.url, db)
    ns = 1_780_315_200_000_000_000
    lines = encode_points([
        Point("probe", {"site": "a"}, {"turbidity": float("nan"), "stage": 1.2}, ns),
        Point("probe", {"site": "a"}, {"turbidity": float("inf")}, ns + 1),
        Point("probe", {"site": "a"}, {"turbidity": 3.5, "stage": 1.25}, ns + 2),
    ])
    assert store.write_lines(lines) == []
    rows = select(influx_server, db, "SELECT \"turbidity\", \"stage\" FROM probe")
    assert rows == [[ns, None, 1.2], [ns + 2, 3.5, 1.25]]


def test_integer_after_float_stays_float_and_a_conflict_loses_only_its_line(
        influx_server: servers.InfluxDB1) -> None:
    # failure-kinds.md #14: 12.5 then 13 are both floats (13.0, never 13i), written in separate
    # requests so a type conflict would show.
    db = fresh_db("types")
    store = Influx1Store(influx_server.url, db)
    assert store.write_readings([turb(1, 12.5)]) == 1
    assert store.write_readings([turb(2, 13, minute=1)]) == 1
    rows = select(influx_server, db, "SELECT \"value\" FROM readings")
    assert [r[1] for r in rows] == [12.5, 13.0]
    assert [r.value for r in store.query_readings("riverside")] == [12.5, 13.0]

    # Make `tips` a float field in this shard (foreign data), then send a batch where only the
    # third reading, a tip count, carries integer tips: that line is refused, the others are stored.
    store.write_lines([f"readings,site=other tips=1.5 {1_780_315_200_000_000_000 + 5}"])
    tips = Reading(site="riverside", device="rain-1", quantity="rain_tips", value=3, unit="{tip}",
                   time=T0 + timedelta(minutes=4), gateway="gw-1", boot="b1", seq=5, raw=1420)
    batch = [turb(3, 14.0, minute=2), turb(4, 15.5, minute=3), tips, turb(6, 17.0, minute=5)]
    assert store.write_readings(batch) == 3
    rows = select(influx_server, db, "SELECT \"value\", \"seq\" FROM readings WHERE \"site\" = 'riverside'")
    assert [(r[1], r[2]) for r in rows] == [(12.5, 1), (13.0, 2), (14.0, 3), (15.5, 4), (17.0, 6)]
    # The refused reading is dead-lettered with the server's message, its JSON as the payload (what a
    # dead letter always holds: the reading as it would be sent again).
    dead = select(influx_server, db, "SELECT \"reason\", \"detail\", \"payload\" FROM deadletter")
    assert len(dead) == 1
    assert dead[0][1] == "store_rejected"
    assert "field type conflict" in str(dead[0][2])
    assert '"seq":5,' in str(dead[0][3]) and '"quantity":"rain_tips"' in str(dead[0][3])
    assert store.rejected_total == 1


def test_backfill_beyond_retention_fails_loudly(influx_server: servers.InfluxDB1,
                                                caplog: pytest.LogCaptureFixture) -> None:
    # failure-kinds.md #15: a point older than the retention policy is refused by the server; the
    # store dead-letters it with the server's message and logs a WARNING (never silent).
    db = fresh_db("retention")
    store = Influx1Store(influx_server.url, db, rp="short")
    store.ensure_database()
    influx_server.query(f'CREATE RETENTION POLICY "short" ON "{db}" DURATION 1h REPLICATION 1')
    old = turb(1, 9.0).model_copy(update={"time": datetime(2001, 1, 1, tzinfo=UTC)})  # decades past 1 h
    with caplog.at_level("WARNING", logger="stormwatch.stores.influx1"):
        assert store.write_readings([old]) == 0
    assert "retention policy" in caplog.text
    dead = select(influx_server, db, 'SELECT "detail" FROM "short"."deadletter"')
    assert len(dead) == 1 and "retention policy" in str(dead[0][1])


def test_server_down_raises_store_error(own_influx: servers.InfluxDB1) -> None:
    # failure-kinds.md #16: the caller must learn the write did not happen (so it does not ack).
    store = Influx1Store(own_influx.url, "down", retries=2, backoff_s=0.05)
    store.write_readings([turb(1, 1.0)])
    own_influx.stop()
    with pytest.raises(StoreError, match="unavailable after 3 attempts"):
        store.write_readings([turb(2, 2.0, minute=1)])
    own_influx.start()
    assert store.write_readings([turb(2, 2.0, minute=1)]) == 1
    assert select(own_influx, "down", "SELECT COUNT(\"value\") FROM readings")[0][1] == 2
