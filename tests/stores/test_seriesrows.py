"""SeriesRows: one series' rows kept as columns are the very StoredRow tuples, made only when asked."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stormwatch.contract import Reading
from stormwatch.stores.seriesrows import SeriesRows, times_of
from stormwatch.stores.sqlite import SqliteStore

T0 = 1_780_272_000_000_000  # 2026-06-01T00:00:00Z in µs


def _rows() -> SeriesRows:
    return SeriesRows([T0, T0 + 60_000_000, T0 + 120_000_000], [0, 2, 1], [7, 11, 15], "tips", "gw-1", "b1",
                      "0.01 in")


def test_rows_are_the_stored_row_tuples() -> None:
    rows = _rows()
    # by hand: (time_us, value, unit, flags "", gateway, boot, seq, tip size)
    assert rows[1] == (T0 + 60_000_000, 2, "tips", "", "gw-1", "b1", 11, "0.01 in")
    assert rows[-1][6] == 15 and len(rows) == 3 and bool(rows)
    assert rows[1:] == [(T0 + 60_000_000, 2, "tips", "", "gw-1", "b1", 11, "0.01 in"),
                        (T0 + 120_000_000, 1, "tips", "", "gw-1", "b1", 15, "0.01 in")]
    assert list(rows) == [rows[0], rows[1], rows[2]]
    assert rows == list(rows) and rows != list(rows)[:2] and rows != "abc"
    assert times_of(rows) is rows.times and times_of(list(rows)) == rows.times
    assert not SeriesRows([], [], [], "tips", "gw-1", "b1", "")


def test_columns_of_one_length() -> None:
    with pytest.raises(ValueError, match="2 times, 1 values"):
        SeriesRows([T0, T0 + 1], [0], [1, 2], "tips", "gw-1", "b1", "")


def test_sqlite_gives_columns_equal_to_its_rows(tmp_path: Path) -> None:
    # a clean series comes back as columns; one with a flagged reading as its tuples -- both equal
    # to query_series' lists
    t = datetime(2026, 6, 1, tzinfo=UTC)
    readings = [Reading(site="s1", device="rain-1", quantity="rain_tips", value=i % 2, unit="tips",
                        time=t + timedelta(minutes=i), gateway="gw-1", boot="b1", seq=2 * i, tip_size="0.01 in")
                for i in range(5)]
    readings += [Reading(site="s1", device="turb-up", quantity="turbidity", value=4.5, unit="NTU",
                         time=t + timedelta(minutes=i), gateway="gw-1", boot="b1", seq=2 * i + 1,
                         flags=("fouling",) if i == 2 else ()) for i in range(5)]
    readings += [Reading(site="s1", device="level", quantity="distance", value=1200.0, unit="mm",
                         time=t + timedelta(minutes=i), gateway="gw-1", boot="b1" if i < 3 else "b2", seq=100 + i)
                 for i in range(5)]  # the gateway rebooted: its rows name two boots
    series = [("rain-1", "rain_tips"), ("turb-up", "turbidity"), ("level", "distance")]
    with SqliteStore(tmp_path / "s.db") as store:
        store.write_readings(readings)
        (chunk,) = store.series_chunks("s1", series, [(t, t + timedelta(hours=1))])
        plain = store.query_series("s1", series, t, t + timedelta(hours=1))
    rain, turb = chunk[("rain-1", "rain_tips")], chunk[("turb-up", "turbidity")]
    assert isinstance(rain, SeriesRows) and rain.values == [0, 1, 0, 1, 0] and rain.seqs == [0, 2, 4, 6, 8]
    assert rain.tip_size == "0.01 in" and rain == plain[("rain-1", "rain_tips")]
    assert isinstance(turb, list) and turb[2][3] == "fouling" and turb == plain[("turb-up", "turbidity")]
    level = chunk[("level", "distance")]
    assert isinstance(level, list) and [r[5] for r in level] == ["b1", "b1", "b1", "b2", "b2"]
