"""An SQLite store's series rows, read ahead in a second process while a backfill's rules run.

A one-year report of one site reads 2.1 million stored rows (``benchmarks/report.py``); turning
them into Python tuples is about a third of the report's time, and the rules cannot start on a
day before its rows are read. :func:`read_ahead` hands that reading to a child process, which
reads day after day and sends each day's rows through a pipe (:mod:`marshal`: the rows are tuples of
ints, floats and strings, written and read by the same interpreter; far cheaper to load than to
fetch from SQLite) while the parent's rules work on the day before -- the two cores of a field
server both busy. The child blocks when the pipe is full, so it runs at most about a day ahead:
memory stays that of a day or two of rows.

The child is a fresh interpreter (``python -m stormwatch.stores.sqlite_reader``) that imports only
the standard library and this module, and opens its own connection: no SQLite connection ever
crosses a ``fork()`` (https://www.sqlite.org/howtocorrupt.html, section 2.6). It only reads.

:func:`series_rows` is the one query, used by :meth:`stormwatch.stores.sqlite.SqliteStore.query_series`
in process and by the child.
"""

from __future__ import annotations

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
from collections.abc import Generator, Sequence
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stormwatch.stores.base import StoredRow

_TIME, _FLAGS = operator.itemgetter(0), operator.itemgetter(3)  # of a StoredRow
_LENGTH = struct.Struct("!Q")


def _engine_order(row: StoredRow) -> tuple[int, str, str, int]:
    """(time, gateway, boot, seq): the alert engine's order of readings (SQLite's BINARY collation of
    UTF-8 text is the order of Python's ``str``)."""
    return (row[0], row[4], row[5], row[6])


def series_rows(conn: sqlite3.Connection, site: str, series: Sequence[tuple[str, str]], start_us: int,
                end_us: int) -> dict[tuple[str, str], list[StoredRow]]:
    """The rows of each ``(device, quantity)`` of ``site`` with ``start_us <= time_us < end_us`` (µs
    since the epoch) in the engine's order, as :data:`~stormwatch.stores.base.StoredRow` tuples: one
    index range per series (``(site, device, quantity, time_us)``).

    The index gives the rows in time order; rows of one series at the same instant (rare: two
    gateways, or a reboot) are put in (gateway, boot, seq) order here -- an ``ORDER BY`` of all four
    columns would sort every row in a temporary B-tree (about a third of the read time).

    Raises:
        sqlite3.Error: the query failed.
    """
    out: dict[tuple[str, str], list[StoredRow]] = {}
    for device, quantity in series:
        rows: list[Any] = conn.execute(
            "SELECT time_us, value, unit, CASE flags WHEN '[]' THEN '' ELSE flags END, gateway, boot, seq,"
            " COALESCE(tip_size, '')"
            " FROM readings WHERE site = ? AND device = ? AND quantity = ? AND time_us >= ? AND time_us < ?"
            " ORDER BY time_us", (site, device, quantity, start_us, end_us)).fetchall()
        if any(map(_FLAGS, rows)):
            for i, row in enumerate(rows):
                if row[3]:  # flagged (rare): the JSON list comma-joined, as StoredRow has it
                    rows[i] = (*row[:3], ",".join(json.loads(row[3])), *row[4:])
        times = list(map(_TIME, rows))
        if any(map(operator.eq, times, itertools.islice(times, 1, None))):  # an instant twice
            rows.sort(key=_engine_order)
        out[(device, quantity)] = rows
    return out


class ReadAheadError(RuntimeError):
    """The reading process failed (the message says why: the child's error or its end)."""


def read_ahead(path: str, site: str, series: Sequence[tuple[str, str]], windows: Sequence[tuple[int, int]], *,
               busy_timeout_s: float = 10.0) -> Generator[dict[tuple[str, str], list[StoredRow]], None, None]:
    """:func:`series_rows` of each window ``(start_us, end_us)`` of the SQLite file ``path``, in order,
    read by a child process (module docstring). Closing the iterator early stops the child.

    Raises:
        OSError: the child process cannot be started.
        ReadAheadError: the child failed (an SQLite error, or it ended early).
    """
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.Popen([sys.executable, "-m", "stormwatch.stores.sqlite_reader"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    # a thread takes the child's messages off the pipe as they come (os.read waits without the GIL),
    # so the child is never held up by the rules' work on a chunk; at most AHEAD chunks wait here
    inbox: queue.Queue[bytes | None] = queue.Queue(AHEAD)
    stop = threading.Event()
    reader = threading.Thread(target=_drain, args=(proc.stdout, inbox, stop), name="sqlite-read-ahead", daemon=True)
    try:
        proc.stdin.write(pickle.dumps({"path": path, "site": site, "series": list(series),
                                       "windows": list(windows), "busy_timeout_s": busy_timeout_s}))
        proc.stdin.close()
        reader.start()
        for _ in windows:
            data = inbox.get()
            if data is None:
                proc.wait(10)
                err = proc.stderr.read().decode("utf-8", "replace").strip().splitlines() if proc.stderr else []
                raise ReadAheadError(f"the reading process ended early (exit {proc.returncode})"
                                     + (f": {err[-1]}" if err else ""))
            kind, payload = marshal.loads(data)
            if kind == "error":
                raise ReadAheadError(str(payload))
            yield payload
    finally:
        stop.set()
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        while reader.is_alive():  # it ends at the pipe's end (the child is gone); let it put what it holds
            try:
                inbox.get(timeout=0.1)
            except queue.Empty:
                pass
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


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
    out = sys.stdout.buffer
    request = pickle.loads(sys.stdin.buffer.read())
    try:
        # mode=rw: an existing file only (never created here)
        uri = f"file:{urllib.parse.quote(os.path.abspath(request['path']))}?mode=rw"
        conn = sqlite3.connect(uri, uri=True, timeout=request["busy_timeout_s"])
        try:
            for start_us, end_us in request["windows"]:
                _send(out, "rows", series_rows(conn, request["site"], request["series"], start_us, end_us))
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
