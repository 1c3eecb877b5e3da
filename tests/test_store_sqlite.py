"""The embedded SQLite store: dedupe by identity, event-time order, events upsert, dead letters."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stormwatch.contract import Event, Reading
from stormwatch.ingest.sqlite_store import SqliteStore
from stormwatch.ingest.stores import StoreUrlError, open_store, sqlite_path
from stormwatch.store import DeadLetter, SiteInfo, StoreError

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


class FixedClock:
    def __init__(self, t: datetime) -> None:
        self.t = t

    def now(self) -> datetime:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += timedelta(seconds=seconds)

    async def asleep(self, seconds: float) -> None:
        self.sleep(seconds)


def tip(seq: int, tips: int, minute: int, boot: str = "b1", site: str = "riverside") -> Reading:
    return Reading(site=site, device="rain-1", quantity="rain_tips", value=tips, unit="{tip}",
                   time=T0 + timedelta(minutes=minute), gateway="gw-1", boot=boot, seq=seq, raw=1000 + seq)


@pytest.fixture()
def store(tmp_path: Path) -> SqliteStore:
    s = SqliteStore(tmp_path / "var" / "sw.db", clock=FixedClock(T0))
    yield s
    s.close()


def test_duplicate_identity_stored_once(store: SqliteStore) -> None:
    # failure-kinds.md #9: the same (gateway, boot, seq) delivered twice is one row; two tips at the
    # same minute with different seq are two readings.
    a, b = tip(1, 2, 0), tip(2, 1, 0)
    assert store.write_readings([a, b, a]) == 2
    assert store.write_readings([b]) == 0
    got = store.query_readings("riverside")
    assert [r.seq for r in got] == [1, 2]
    assert sum(r.value for r in got) == 3
    # Same seq under a new boot is a different reading.
    assert store.write_readings([tip(1, 4, 1, boot="b2")]) == 1


def test_query_order_range_and_types(store: SqliteStore) -> None:
    turb = Reading(site="riverside", device="turb-down", quantity="turbidity", value=13.0, unit="NTU",
                   time=T0 + timedelta(minutes=1, microseconds=250), gateway="gw-1", boot="b1", seq=10,
                   raw=[0, 16720], flags=("spike",))
    store.write_readings([tip(5, 1, 3), turb, tip(4, 2, 1), tip(3, 1, 1)])
    got = store.query_readings("riverside")
    assert [(r.time - T0, r.seq) for r in got] == [
        (timedelta(minutes=1), 3), (timedelta(minutes=1), 4), (timedelta(minutes=1, microseconds=250), 10),
        (timedelta(minutes=3), 5),
    ]
    assert got[2] == turb  # exact round trip, including microseconds, raw list and flags
    assert isinstance(got[0].value, int) and got[0].value == 1
    assert isinstance(got[2].value, float)
    window = store.query_readings("riverside", T0 + timedelta(minutes=1), T0 + timedelta(minutes=3),
                                  quantity="rain_tips")
    assert [r.seq for r in window] == [3, 4]  # end is exclusive
    assert store.query_readings("riverside", device="turb-down") == [turb]
    assert store.query_readings("elsewhere") == []


def test_late_flag_is_stored_and_filterable(store: SqliteStore) -> None:
    store.write_readings([tip(1, 1, 0)])
    store.write_readings([tip(2, 5, -180)], late=True)
    assert [r.seq for r in store.query_readings("riverside", late=False)] == [1]
    assert [r.seq for r in store.query_readings("riverside", late=True)] == [2]
    assert store.late_identities("riverside") == {("gw-1", "b1", 2)}
    row = sqlite3.connect(store.path).execute("SELECT late, received_at_us FROM readings WHERE seq = 2").fetchone()
    assert row == (1, 1_780_315_200_000_000)  # received_at from the clock, µs since the epoch


def test_events_upsert_on_site_kind_occurrence(store: SqliteStore) -> None:
    ev = Event(kind="storm_qualified", site="riverside", event_time=T0, rule="R1", citation="Ch. 133 §133-7A(2)",
               occurrence="storm-1", tips=50, depth_in=0.5)
    store.write_events([ev])
    store.write_events([ev, ev.model_copy(update={"message": "updated"})])
    other = ev.model_copy(update={"occurrence": "storm-2", "event_time": T0 + timedelta(days=1)})
    store.write_events([other])
    got = store.query_events("riverside")
    assert [(e.occurrence, e.message) for e in got] == [("storm-1", "updated"), ("storm-2", "")]


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


def test_sites_are_one_row_each_the_latest_record_kept(store: SqliteStore) -> None:
    t = datetime(2026, 6, 1, 12, tzinfo=UTC)
    store.write_sites([SiteInfo("riverside", "America/New_York", "ch133"), SiteInfo("hilltop", "UTC", "ch196")], t)
    store.write_sites([SiteInfo("hilltop", "America/Denver", "ch196")], t + timedelta(hours=1))  # zone corrected
    rows = sqlite3.connect(store.path).execute("SELECT site, timezone, jurisdiction, at_us FROM sites ORDER BY site")
    assert list(rows) == [("hilltop", "America/Denver", "ch196", int((t + timedelta(hours=1)).timestamp()) * 10**6),
                          ("riverside", "America/New_York", "ch133", int(t.timestamp()) * 10**6)]
