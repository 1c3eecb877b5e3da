"""An SQLite store's series rows, read ahead in a second process while a backfill's rules run.

The design: docs/stores.md ("The modules", `stores/sqlite_reader.py`).
"""

from __future__ import annotations

import gc
import itertools
import json
import marshal
import operator
import os
import pickle
import queue
import sqlite3
import struct
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Generator, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

try:
    import fcntl
except ImportError:  # not on Windows: pipes keep their size
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from stormwatch.stores.base import StoredRow

_TIME, _FLAGS = operator.itemgetter(0), operator.itemgetter(3)  # of a StoredRow
_LENGTH = struct.Struct("!Q")


def _engine_order(row: StoredRow) -> tuple[int, str, str, int]:
    """(time, gateway, boot, seq): the alert engine's order of readings (SQLite's BINARY collation of
    UTF-8 text is the order of Python's ``str``)."""
    return (row[0], row[4], row[5], row[6])


_COLUMNS = ("time_us, value, unit, CASE flags WHEN '[]' THEN '' ELSE flags END, gateway, boot, seq,"
            " COALESCE(tip_size, '')")
_RANGE = (" FROM readings WHERE site = ? AND device = ? AND quantity = ? AND time_us >= ? AND time_us < ?"
          " ORDER BY time_us")
#: The columns that change from row to row; the others (unit, gateway, boot, tip size) are compared
#: with the series' first row in SQLite, and the flags with none (``'[]'``): they come out as one
#: flag (``same``), never as Python strings.
_VARYING = ("SELECT time_us, value, seq,"
            " unit = ? AND gateway = ? AND boot = ? AND COALESCE(tip_size, '') = ? AND flags = '[]'" + _RANGE)
_SAME = operator.itemgetter(3)  # of a _VARYING row

#: One series' rows of a window as :func:`compact_rows` gives them: ``(None, rows)`` with the
#: :data:`~stormwatch.stores.base.StoredRow` tuples, or ``((unit, gateway, boot, tip_size), [times,
#: values, seqs])`` -- the rows' columns -- when every row shares the first one's unit, gateway,
#: boot and tip size, none is flagged and no instant comes twice (nearly every series; a
#: :class:`~stormwatch.stores.seriesrows.SeriesRows` in the reading process's parent, :func:`as_series`).
Compact = tuple[tuple[str, str, str, str] | None, list[Any]]
_VALUE, _SEQ = operator.itemgetter(1), operator.itemgetter(2)  # of a _VARYING row


def compact_rows(conn: sqlite3.Connection, site: str, series: Sequence[tuple[str, str]], start_us: int,
                 end_us: int) -> dict[tuple[str, str], Compact]:
    """The rows of each ``(device, quantity)`` of ``site`` with ``start_us <= time_us < end_us`` (µs
    since the epoch) in the engine's order, compacted (:data:`Compact`; :func:`expand` gives the
    rows): a series whose unit, gateway, boot and tip size stay those of its first row is read
    without those four text columns (a third of the read's time is making them Python strings,
    and as many again loading them in the parent, :func:`read_ahead`). One index range per series
    (``readings_series``, whose columns hold every column read here: no row of the table is looked up;
    a store written before it has ``(site, device, quantity, time_us)``, and each row is looked up).

    Raises:
        sqlite3.Error: the query failed.
    """
    out: dict[tuple[str, str], Compact] = {}
    for device, quantity in series:
        key = (site, device, quantity, start_us, end_us)
        first = conn.execute("SELECT unit, gateway, boot, COALESCE(tip_size, '')" + _RANGE + " LIMIT 1",
                             key).fetchone()
        if first is None:
            out[(device, quantity)] = (None, [])
            continue
        varying: list[Any] = conn.execute(_VARYING, (*first, *key)).fetchall()
        times = list(map(_TIME, varying))
        if all(map(_SAME, varying)) and not any(map(operator.eq, times, itertools.islice(times, 1, None))):
            out[(device, quantity)] = ((first[0], first[1], first[2], first[3]),
                                       [times, list(map(_VALUE, varying)), list(map(_SEQ, varying))])
        else:  # a unit, gateway or tip size changed, a flag, an instant twice (rare): every column
            out[(device, quantity)] = (None, _full_rows(conn, key))
    return out


def _full_rows(conn: sqlite3.Connection, key: tuple[str, str, str, int, int]) -> list[StoredRow]:
    """Every column of one series' rows (``key``: site, device, quantity, start and end µs) as
    :data:`~stormwatch.stores.base.StoredRow` tuples in the engine's order.

    The index gives the rows in time order; rows of one series at the same instant (rare: two
    gateways, or a reboot) are put in (gateway, boot, seq) order here -- an ``ORDER BY`` of all four
    columns would sort every row in a temporary B-tree (about a third of the read time)."""
    rows: list[Any] = conn.execute("SELECT " + _COLUMNS + _RANGE, key).fetchall()
    if any(map(_FLAGS, rows)):
        for i, row in enumerate(rows):
            if row[3]:  # flagged (rare): the JSON list comma-joined, as StoredRow has it
                rows[i] = (*row[:3], ",".join(json.loads(row[3])), *row[4:])
    times = list(map(_TIME, rows))
    if any(map(operator.eq, times, itertools.islice(times, 1, None))):  # an instant twice
        rows.sort(key=_engine_order)
    return rows


def expand(compact: Mapping[tuple[str, str], Compact]) -> dict[tuple[str, str], list[StoredRow]]:
    """The :data:`~stormwatch.stores.base.StoredRow` lists of :func:`compact_rows`' answer (the
    shared texts are one string object each, not one per row): :func:`as_series`' tuples made."""
    return {key: list(rows) for key, rows in as_series(compact).items()}


def as_series(compact: Mapping[tuple[str, str], Compact]) -> dict[tuple[str, str], Sequence[StoredRow]]:
    """:func:`compact_rows`' answer as rows without making the tuples: a series of columns as a
    :class:`~stormwatch.stores.seriesrows.SeriesRows`, the others as their lists."""
    from stormwatch.stores.seriesrows import SeriesRows  # the parent's; the reading process needs none

    out: dict[tuple[str, str], Sequence[StoredRow]] = {}
    for key, (shared, rows) in compact.items():
        if shared is None:
            out[key] = rows
        else:
            unit, gateway, boot, tip_size = shared
            times, values, seqs = rows
            out[key] = SeriesRows(times, values, seqs, unit, gateway, boot, tip_size)
    return out


def series_rows(conn: sqlite3.Connection, site: str, series: Sequence[tuple[str, str]], start_us: int,
                end_us: int) -> dict[tuple[str, str], list[StoredRow]]:
    """The rows of each ``(device, quantity)`` of ``site`` with ``start_us <= time_us < end_us`` (µs
    since the epoch) in the engine's order (time, gateway, boot, seq), as
    :data:`~stormwatch.stores.base.StoredRow` tuples: :func:`expand` of :func:`compact_rows`.

    Raises:
        sqlite3.Error: the query failed.
    """
    return expand(compact_rows(conn, site, series, start_us, end_us))


class ReadAheadError(RuntimeError):
    """The reading process failed (the message says why: the child's error or its end)."""


def read_ahead(path: str, site: str, series: Sequence[tuple[str, str]], windows: Sequence[tuple[int, int]], *,
               busy_timeout_s: float = 10.0,
               processes: int | None = None) -> Generator[dict[tuple[str, str], Sequence[StoredRow]], None, None]:
    """:func:`series_rows` of each window ``(start_us, end_us)`` of the SQLite file ``path``, in order,
    read by child processes (module docstring), as :func:`as_series` gives them (a series' columns,
    not its tuples). Closing the iterator early stops the children.

    Args:
        processes: how many reading processes share the series (every ``processes``-th series each;
            a window's answer joins theirs, in the order of ``series``). Default :data:`READERS`, at
            most one per series: reading a row costs the child about twice what the rules spend on
            it in the parent, so one reader would keep the rules waiting.

    Raises:
        OSError: a child process cannot be started.
        ReadAheadError: a child failed (an SQLite error, or it ended early).
    """
    n = max(1, min(READERS if processes is None else processes, len(series)))
    parts = [list(series[i::n]) for i in range(n)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    stop = threading.Event()
    children: list[tuple[subprocess.Popen[bytes], queue.Queue[bytes | None], threading.Thread]] = []
    try:
        for part in parts:
            proc = subprocess.Popen([sys.executable, "-m", "stormwatch.stores.sqlite_reader"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
            assert proc.stdin is not None and proc.stdout is not None
            _widen(proc.stdout)
            # a thread takes the child's messages off the pipe as they come (os.read waits without the
            # GIL), so the child is never held up by the rules' work on a chunk; at most AHEAD wait here
            inbox: queue.Queue[bytes | None] = queue.Queue(AHEAD)
            drain = threading.Thread(target=_drain, args=(proc.stdout, inbox, stop), name="sqlite-read-ahead",
                                     daemon=True)
            children.append((proc, inbox, drain))
            proc.stdin.write(pickle.dumps({"path": path, "site": site, "series": part,
                                           "windows": list(windows), "busy_timeout_s": busy_timeout_s}))
            proc.stdin.close()
            drain.start()
        for _ in windows:
            found: dict[tuple[str, str], Sequence[StoredRow]] = {}
            for proc, inbox, _drain_thread in children:
                found.update(as_series(_answer(proc, inbox)))
            yield {key: found[key] for key in series} if n > 1 else found
    finally:
        stop.set()
        for proc, inbox, drain in children:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            while drain.is_alive():  # it ends at the pipe's end (the child is gone); let it put what it holds
                try:
                    inbox.get(timeout=0.1)
                except queue.Empty:
                    pass
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()


#: Bytes a reading process's pipe holds (Linux: ``F_SETPIPE_SZ``, at most ``/proc/sys/fs/pipe-max-size``,
#: 1 MiB by default): a whole day's message (about 80 KB for two 1-minute series) fits, so the child
#: writes it without waiting. In a pipe of the default 64 KiB it waited for each message's second read
#: by the drain thread, and that thread gets the GIL back from the rules only every switch interval
#: (5 ms, :func:`sys.getswitchinterval`): the rules of a one-year report then waited about a second
#: for their rows (``benchmarks/report.py``: the evaluation 4.2-4.5 s -> 3.3-3.5 s wall).
PIPE_BYTES = 1 << 20


def _widen(pipe: IO[bytes]) -> None:
    """Make ``pipe`` hold :data:`PIPE_BYTES` where the system allows it (else it keeps its size)."""
    setsize = getattr(fcntl, "F_SETPIPE_SZ", None) if fcntl is not None else None
    if setsize is None:
        return
    try:
        fcntl.fcntl(pipe.fileno(), setsize, PIPE_BYTES)
    except OSError:  # above the system's pipe-max-size: the default size works, only slower
        pass


def _answer(proc: subprocess.Popen[bytes], inbox: queue.Queue[bytes | None]) -> dict[tuple[str, str], Compact]:
    """One child's next window (:func:`compact_rows`' answer).

    Raises:
        ReadAheadError: the child reported an error or ended early.
    """
    data = inbox.get()
    if data is None:
        proc.wait(10)
        err = proc.stderr.read().decode("utf-8", "replace").strip().splitlines() if proc.stderr else []
        raise ReadAheadError(f"the reading process ended early (exit {proc.returncode})"
                             + (f": {err[-1]}" if err else ""))
    kind, payload = marshal.loads(data)
    if kind == "error":
        raise ReadAheadError(str(payload))
    answer: dict[tuple[str, str], Compact] = payload
    return answer


#: Reading processes of a :func:`read_ahead` (two: with the rules' process, a two-core field server's
#: cores stay busy; measured in ``benchmarks/report.py``).
READERS = 2


#: Chunks read ahead and waiting for the rules, at most (a day of four 1-minute sensors: about 0.3 MB).
AHEAD = 4


def _drain(pipe: IO[bytes], inbox: queue.Queue[bytes | None], stop: threading.Event) -> None:
    """Put each message of the child on ``inbox``; ``None`` at the pipe's end."""
    try:
        while not stop.is_set():
            head = pipe.read(_LENGTH.size)
            if len(head) < _LENGTH.size:
                break
            (size,) = _LENGTH.unpack(head)
            data = pipe.read(size)
            if len(data) < size:
                break
            inbox.put(data)
    except (OSError, ValueError):  # closed under it
        pass
    inbox.put(None)


def _send(pipe: IO[bytes], kind: str, payload: Any) -> None:
    data = marshal.dumps((kind, payload))
    pipe.write(_LENGTH.pack(len(data)))
    pipe.write(data)
    pipe.flush()


def _serve() -> int:
    """The child: the request from stdin, then each window's rows to stdout (module docstring)."""
    # the child's objects are its rows, freed window by window, never in a reference cycle: no
    # cyclic collection (a pass every 700 rows: measurable in its CPU time, benchmarks/report.py)
    gc.disable()
    out = sys.stdout.buffer
    request = pickle.loads(sys.stdin.buffer.read())
    try:
        # mode=rw: an existing file only (never created here)
        uri = f"file:{urllib.parse.quote(os.path.abspath(request['path']))}?mode=rw"
        conn = sqlite3.connect(uri, uri=True, timeout=request["busy_timeout_s"])
        try:
            for start_us, end_us in request["windows"]:
                _send(out, "rows", compact_rows(conn, request["site"], request["series"], start_us, end_us))
        finally:
            conn.close()
    except sqlite3.Error as exc:
        _send(out, "error", f"SQLite query on {request['path']} failed: {exc}")
        return 1
    except BrokenPipeError:  # the parent stopped reading
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(_serve())
