"""The SQLite store's read-ahead (stormwatch.stores.sqlite_reader): a backfill's series rows read by a
second process give exactly the rows read in process, an unreadable file is a one-line StoreError,
and a reader stopped early leaves no process behind."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stormwatch.contract import TIP_UNIT, Reading
from stormwatch.stores import sqlite_reader
from stormwatch.stores.base import StoreError
from stormwatch.stores.rows import series_chunks
from stormwatch.stores.sqlite import SqliteStore
from stormwatch.stores.sqlite_reader import READERS, read_ahead

T0 = datetime(2026, 6, 1, tzinfo=UTC)
SERIES = [("rain-1", "rain_tips"), ("turb-down", "turbidity")]


def _store(path: Path, days: int) -> None:
    readings, seq = [], 0
    for minute in range(days * 1440):
        t = T0 + timedelta(minutes=minute)
        seq += 1
        readings.append(Reading(site="s1", device="rain-1", quantity="rain_tips", value=minute % 3, unit=TIP_UNIT,
                                time=t, gateway="gw-1", boot="b1", seq=seq))
        seq += 1
        readings.append(Reading(site="s1", device="turb-down", quantity="turbidity", value=10.0 + minute % 7,
                                unit="NTU", time=t, gateway="gw-1", boot="b1", seq=seq,
                                flags=("spike",) if minute % 500 == 0 else ()))
    with SqliteStore(path) as store:
        store.write_readings(readings)


def test_read_ahead_gives_the_rows_of_each_day_in_order(tmp_path: Path) -> None:
    _store(tmp_path / "s.db", 3)
    windows = [(T0 + timedelta(days=d), T0 + timedelta(days=d + 1)) for d in range(4)]  # the last one empty
    with SqliteStore(tmp_path / "s.db") as store:
        store.read_ahead_from = 2  # (a real backfill: from 8 days on)
        got = list(series_chunks(store, "s1", SERIES, windows))
        assert got == [store.query_series("s1", SERIES, a, b) for a, b in windows]
    assert [len(c[("rain-1", "rain_tips")]) for c in got] == [1440, 1440, 1440, 0]
    assert got[0][("turb-down", "turbidity")][0][3] == "spike"  # flags as StoredRow has them


def test_an_unreadable_file_is_a_store_error(tmp_path: Path) -> None:
    # the store's file damaged, then removed, under an open store: the reading process says so, and
    # never creates a file
    path = tmp_path / "s.db"
    windows = [(T0, T0 + timedelta(days=1)), (T0 + timedelta(days=1), T0 + timedelta(days=2))]
    with SqliteStore(path) as store:
        store.read_ahead_from = 2
        for extra in ("-wal", "-shm"):
            Path(f"{path}{extra}").unlink(missing_ok=True)
        path.write_bytes(b"this is not SQLite" * 100)
        with pytest.raises(StoreError, match=r"s\.db: SQLite query on .*s\.db failed: file is not a database"):
            list(store.series_chunks("s1", SERIES, windows))
        path.unlink()
        with pytest.raises(StoreError, match="unable to open database file"):
            list(store.series_chunks("s1", SERIES, windows))
        assert not path.exists()


def test_a_reader_stopped_early_leaves_no_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # pipes of one page: each reader blocks a few windows ahead, alive when counted (in pipes of a MiB
    # it wrote all 48 small windows and ended before the count)
    monkeypatch.setattr(sqlite_reader, "PIPE_BYTES", 4096)
    _store(tmp_path / "s.db", 2)
    windows = [(T0 + timedelta(hours=h), T0 + timedelta(hours=h + 1)) for h in range(48)]
    before = _children()  # a test server this session started (influxd...) is not the reader's
    rows = read_ahead(str(tmp_path / "s.db"), "s1", SERIES, [(_us(a), _us(b)) for a, b in windows])
    first = next(rows)
    assert len(first[("rain-1", "rain_tips")]) == 60
    children = _children() - before
    assert len(children) == min(READERS, len(SERIES)), "not one process per share of the series"
    rows.close()
    assert not (_children() & children)


def _us(t: datetime) -> int:
    return (t - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


def _children() -> set[int]:
    """Process ids whose parent is this process (Linux /proc)."""
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == os.getpid() and fields[0] != "Z":
                out.add(int(entry.name))
    return out


def test_a_series_whose_texts_change_is_read_whole(tmp_path: Path) -> None:
    # compact_rows reads a series without its unit/gateway/boot/tip-size texts only when they stay
    # those of its first row: a gauge replaced mid-hour (another tip size), a second gateway at the
    # same instant, a flag -- each read whole, every row as written, in the engine's order
    def rain(minute: int, gateway: str, seq: int, tip: str) -> Reading:
        return Reading(site="s1", device="rain-1", quantity="rain_tips", value=1, unit=TIP_UNIT,
                       time=T0 + timedelta(minutes=minute), gateway=gateway, boot="b1", seq=seq, tip_size=tip)

    def probe(minute: int, flags: tuple[str, ...] = ()) -> Reading:
        return Reading(site="s1", device="turb-down", quantity="turbidity", value=12.5, unit="NTU",
                       time=T0 + timedelta(minutes=minute), gateway="gw-1", boot="b1", seq=100 + minute, flags=flags)

    written = [rain(0, "gw-1", 1, "0.01 in"), rain(1, "gw-1", 2, "0.2 mm"),  # hour 0: the gauge replaced
               rain(61, "gw-2", 7, "0.2 mm"), rain(61, "gw-1", 8, "0.2 mm"),  # hour 1: an instant twice
               rain(122, "gw-1", 9, "0.2 mm"), rain(123, "gw-1", 10, "0.2 mm"),  # hour 2: nothing changes
               probe(0), probe(1, ("spike", "stuck")), probe(61)]
    with SqliteStore(tmp_path / "s.db") as store:
        store.write_readings(written)
        windows = [(T0 + timedelta(hours=h), T0 + timedelta(hours=h + 1)) for h in range(3)]
        got = [store.query_series("s1", SERIES, a, b) for a, b in windows]

    def row(r: Reading) -> tuple[object, ...]:
        return (_us(r.time), r.value, r.unit, ",".join(r.flags), r.gateway, r.boot, r.seq, r.tip_size or "")

    assert got[0][("rain-1", "rain_tips")] == [row(written[0]), row(written[1])]
    assert got[1][("rain-1", "rain_tips")] == [row(written[3]), row(written[2])]  # gw-1 before gw-2
    assert got[2][("rain-1", "rain_tips")] == [row(written[4]), row(written[5])]
    assert got[0][("turb-down", "turbidity")] == [row(written[6]), row(written[7])]
    assert got[0][("turb-down", "turbidity")][1][3] == "spike,stuck"
    assert got[1][("turb-down", "turbidity")] == [row(written[8])]
    assert got[2][("turb-down", "turbidity")] == []


@pytest.mark.skipif(not hasattr(__import__("fcntl"), "F_GETPIPE_SZ"), reason="pipe sizes are Linux's")
def test_a_readers_pipe_holds_a_days_message(tmp_path: Path) -> None:
    import fcntl

    from stormwatch.stores.sqlite_reader import PIPE_BYTES, _widen

    limit = int(Path("/proc/sys/fs/pipe-max-size").read_text())
    r, w = os.pipe()
    with os.fdopen(r, "rb") as pipe:
        try:
            before = fcntl.fcntl(pipe.fileno(), fcntl.F_GETPIPE_SZ)
            assert before == 65536  # Linux's default (pipe(7))
            _widen(pipe)
            # a day of two 1-minute series is about 80 KB (2 x 1,440 times, values and seqs, marshalled):
            # more than the default holds, well within the widened pipe
            assert fcntl.fcntl(pipe.fileno(), fcntl.F_GETPIPE_SZ) == (PIPE_BYTES if limit >= PIPE_BYTES else before)
        finally:
            os.close(w)
