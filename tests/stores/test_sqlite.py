"""What only the embedded SQLite store promises (WAL, FULL sync, query_deadletters, URLs); what every store
promises is tests/stores/test_conformance.py."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stormwatch.clock import ManualClock
from stormwatch.contract import Reading
from stormwatch.stores.base import DeadLetter, StoreError
from stormwatch.stores.sqlite import SqliteStore
from stormwatch.stores.urls import StoreUrlError, open_store, sqlite_path

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def tip(seq: int, tips: int, minute: int, boot: str = "b1", site: str = "riverside") -> Reading:
    return Reading(site=site, device="rain-1", quantity="rain_tips", value=tips, unit="{tip}",
                   time=T0 + timedelta(minutes=minute), gateway="gw-1", boot=boot, seq=seq, raw=1000 + seq)


@pytest.fixture()
def store(tmp_path: Path) -> SqliteStore:
    s = SqliteStore(tmp_path / "var" / "sw.db", clock=ManualClock(T0))
    yield s
    s.close()


def test_late_identities_and_receive_time(store: SqliteStore) -> None:
    # (late readings stored and told apart: tests/stores/test_conformance.py)
    store.write_readings([tip(1, 1, 0)])
    store.write_readings([tip(2, 5, -180)], late=True)
    assert store.late_identities("riverside") == {("gw-1", "b1", 2)}
    row = sqlite3.connect(store.path).execute("SELECT late, received_at_us FROM readings WHERE seq = 2").fetchone()
    assert row == (1, 1_780_315_200_000_000)  # received_at from the clock, µs since the epoch


def test_deadletters_are_kept_with_payload_bytes(store: SqliteStore) -> None:
    store.write_deadletters([DeadLetter("not_utf8", "bad byte", "stormwatch/v1/a/g/readings", b"\xff\x00", T0),
                             DeadLetter("bad_json", "Expecting value", "t", b"{", T0)])
    got = store.query_deadletters()
    assert [(d.reason, d.payload) for d in got] == [("not_utf8", b"\xff\x00"), ("bad_json", b"{")]
    assert store.query_deadletters("bad_json")[0].received_at == T0


def test_durability_settings_and_readers_in_other_connections(store: SqliteStore) -> None:
    store.write_readings([tip(1, 1, 0)])
    other = sqlite3.connect(store.path)
    assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert other.execute("SELECT COUNT(*) FROM readings").fetchone()[0] == 1
    assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    other.close()


def test_closed_store_raises_store_error(tmp_path: Path) -> None:
    s = SqliteStore(tmp_path / "x.db")
    s.close()
    with pytest.raises(StoreError):
        s.write_readings([tip(1, 1, 0)])


def test_open_store_urls(tmp_path: Path) -> None:
    assert sqlite_path("sqlite:///./var/x.db") == "./var/x.db"
    assert sqlite_path("sqlite:////abs/x.db") == "/abs/x.db"
    s = open_store(f"sqlite:///{tmp_path}/a.db")
    assert isinstance(s, SqliteStore) and s.path == f"{tmp_path}/a.db"
    s.close()
    bare = open_store(str(tmp_path / "b.db"))
    assert isinstance(bare, SqliteStore)
    bare.close()
    for bad in ("postgres://h/db", "sqlite://relative.db", "influx1://h:8086", "influx2://h:8086?org=o",
                "influx1://h:notaport/db"):
        with pytest.raises(StoreUrlError):
            open_store(bad)


def test_stored_span_is_the_first_and_last_time_in_the_window(store: SqliteStore) -> None:
    # the backfill's span of stored data (alerts/backfill._stored_span): the earliest and latest
    # reading of the asked series inside [start, end) -- not of other series, other sites, or outside
    store.write_readings([tip(1, 0, 5), tip(2, 1, 20), tip(3, 0, 50), tip(4, 2, 1, site="other"),
                          Reading(site="riverside", device="turb-1", quantity="turbidity", value=9.5, unit="NTU",
                                  time=T0 + timedelta(minutes=2), gateway="gw-1", boot="b1", seq=9)])
    rain = [("rain-1", "rain_tips")]
    assert store.stored_span("riverside", rain, T0, T0 + timedelta(hours=1)) == \
        (T0 + timedelta(minutes=5), T0 + timedelta(minutes=50))
    assert store.stored_span("riverside", [*rain, ("turb-1", "turbidity")], T0, T0 + timedelta(hours=1)) == \
        (T0 + timedelta(minutes=2), T0 + timedelta(minutes=50))
    # the end is exclusive, the start inclusive
    assert store.stored_span("riverside", rain, T0 + timedelta(minutes=5), T0 + timedelta(minutes=50)) == \
        (T0 + timedelta(minutes=5), T0 + timedelta(minutes=20))
    assert store.stored_span("riverside", rain, T0 + timedelta(minutes=51), T0 + timedelta(hours=2)) is None
    assert store.stored_span("riverside", [("nope", "rain_tips")], T0, T0 + timedelta(hours=1)) is None
    assert store.stored_span("other", rain, T0, T0 + timedelta(hours=1)) == \
        (T0 + timedelta(minutes=1), T0 + timedelta(minutes=1))


def _plan(path: Path, site: str) -> str:
    from stormwatch.stores import sqlite_reader

    con = sqlite3.connect(path)
    try:
        rows = con.execute("EXPLAIN QUERY PLAN " + sqlite_reader._VARYING,
                           ("{tip}", "gw-1", "b1", "", site, "rain-1", "rain_tips", 0, 2**62)).fetchall()
    finally:
        con.close()
    return " ".join(str(r[-1]) for r in rows)


def test_a_new_store_answers_a_series_from_its_index_alone(store: SqliteStore) -> None:
    store.write_readings([tip(i, 1, i) for i in range(3)])
    # the backfill's query of a series' day reads no row of the table (sqlite.py _SERIES_INDEX)
    assert "USING COVERING INDEX readings_series" in _plan(Path(store.path), "riverside")
    found = store.query_series("riverside", [("rain-1", "rain_tips")], T0, T0 + timedelta(hours=1))
    assert [r[:2] for r in found[("rain-1", "rain_tips")]] == [(int(T0.timestamp() * 1e6) + i * 60_000_000, 1)
                                                              for i in range(3)]


def test_a_store_with_the_earlier_series_index_keeps_it_and_reads_the_same(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with SqliteStore(path) as s:
        s.write_readings([tip(i, 1, i) for i in range(3)])
    con = sqlite3.connect(path)  # the index of stores written before readings_series, as they have it
    con.executescript("DROP INDEX readings_series; CREATE INDEX readings_site_device_quantity_time"
                      " ON readings (site, device, quantity, time_us);")
    con.close()
    with SqliteStore(path) as s:  # opening it builds no index over the years of readings it may hold
        names = {r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert "readings_series" not in names and "readings_site_device_quantity_time" in names
        assert "readings_site_device_quantity_time" in _plan(path, "riverside")
        found = s.query_series("riverside", [("rain-1", "rain_tips")], T0, T0 + timedelta(hours=1))
        assert len(found[("rain-1", "rain_tips")]) == 3
