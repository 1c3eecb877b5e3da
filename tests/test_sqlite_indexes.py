"""The SQLite store's series index: covering in a file it creates, the plain one kept in an earlier file."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

from stormwatch.contract import Reading
from stormwatch.stores import sqlite_reader
from stormwatch.stores.sqlite import SERIES_INDEX, SqliteStore

# the plain series index of stormwatch before the covering one (the shape an upgraded field file has)
EARLIER = """
CREATE TABLE readings (
    id INTEGER PRIMARY KEY, site TEXT NOT NULL, device TEXT NOT NULL, quantity TEXT NOT NULL, value NOT NULL,
    unit TEXT NOT NULL, time_us INTEGER NOT NULL, time TEXT NOT NULL, gateway TEXT NOT NULL, boot TEXT NOT NULL,
    seq INTEGER NOT NULL, raw TEXT NOT NULL, flags TEXT NOT NULL, late INTEGER NOT NULL DEFAULT 0,
    received_at_us INTEGER NOT NULL, tip_size TEXT, UNIQUE (gateway, boot, seq));
CREATE INDEX readings_site_device_quantity_time ON readings (site, device, quantity, time_us);
PRAGMA user_version=2;
"""


def _indexes(path: Path) -> set[str]:
    with sqlite3.connect(path) as con:
        return {str(r[0]) for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'index' "
                                                "AND name NOT LIKE 'sqlite_autoindex%'")}


def test_a_new_file_reads_a_series_from_the_covering_index(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    t = datetime(2026, 6, 1, tzinfo=UTC)
    with SqliteStore(path) as store:
        store.write_readings([Reading(site="s1", device="turb-up", quantity="turbidity", value=4.5 + i, unit="NTU",
                                      time=t + timedelta(minutes=i), gateway="gw-1", boot="b1", seq=i)
                              for i in range(3)])
    assert SERIES_INDEX in _indexes(path) and "readings_site_device_quantity_time" not in _indexes(path)
    with sqlite3.connect(path) as con:
        (plan,) = con.execute("EXPLAIN QUERY PLAN " + sqlite_reader._VARYING,
                              ("NTU", "gw-1", "b1", "", "s1", "turb-up", "turbidity", 0, 2**62)).fetchall()
        assert f"COVERING INDEX {SERIES_INDEX}" in plan[3]  # no lookup of each row in the table
        answer = sqlite_reader.compact_rows(con, "s1", [("turb-up", "turbidity")], 0, 2**62)
    assert answer[("turb-up", "turbidity")] == (("NTU", "gw-1", "b1", ""), [
        [1_780_272_000_000_000 + k * 60_000_000 for k in range(3)], [4.5, 5.5, 6.5], [0, 1, 2]])


def test_an_earlier_file_keeps_its_plain_index(tmp_path: Path) -> None:
    # building the covering index over years of readings at the first open would hold the write
    # lock for minutes: an earlier file is left as it is (the same answers, read through the table)
    path = tmp_path / "earlier.db"
    with sqlite3.connect(path) as con:
        con.executescript(EARLIER)
    SqliteStore(path).close()
    SqliteStore(path).close()  # and stays so
    assert "readings_site_device_quantity_time" in _indexes(path) and SERIES_INDEX not in _indexes(path)
