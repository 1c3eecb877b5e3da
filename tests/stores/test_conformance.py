"""One conformance suite every store passes (issue 13 item 4): adding a sink is implementing
:class:`stormwatch.stores.base.ReadingStore` and adding one :class:`Sink` (its :class:`Subject` factory) to
:data:`SUBJECTS`; the suite's fixture takes its parameters from there.

Each subject is a store opened from its URL plus *probes* that read what it holds without the
store's own query code (SQLite: the ``sqlite3`` module; InfluxDB 1.x: InfluxQL over HTTP on the real
server), so a write is checked by an independent reader. InfluxDB 2.x: no 2.x-compatible server can
run here (Debian ships InfluxDB 1.6, which has neither ``/api/v2/write`` nor Flux; PyPI offers no
server), so the 2.x store is run through influxdb-client against a recording HTTP endpoint whose
writes are forwarded to the real InfluxDB 1.x (``bucket`` = database, as 1.8+'s v2 compatibility
API maps it): its line protocol must be byte for byte the line protocol the 1.x subject wrote
through the same suite, and its Flux texts are checked against the same expectations.
"""

from __future__ import annotations

import base64
import itertools
import json
import sqlite3
import threading
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from stormwatch.app import servers
from stormwatch.contract import Event, Reading
from stormwatch.stores.base import DeadLetter, ReadingStore, SiteInfo
from stormwatch.stores.rows import series_chunks, series_rows, us_of
from stormwatch.stores.urls import open_store
from tests.names import RUN

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
_names = (f"{RUN}_{n}" for n in itertools.count())  # unique to the run (tests/names.py)


@dataclass
class Subject:
    """A store under test and independent readers of what it holds.

    Attributes:
        url: the store URL (opened again to check that what was acknowledged survives a reopen).
        store: the open store.
        events: ``site`` → stored events as ``(kind, occurrence, event_time, message, tips)``, time order.
        deadletters: → stored dead letters as ``(reason, detail, topic, payload bytes)``, receive order.
        sites: → ``site`` → ``(timezone, jurisdiction)`` of the latest record.
    """

    url: str
    store: ReadingStore
    events: Callable[[str], list[tuple[str, str, datetime, str, int | None]]]
    deadletters: Callable[[], list[tuple[str, str, str, bytes]]]
    sites: Callable[[], dict[str, tuple[str, str]]]


def _utc_us(us: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=us)


def sqlite_subject(tmp_path: Path, request: pytest.FixtureRequest) -> Subject:
    path = tmp_path / "conformance.db"
    url = f"sqlite:///{path}"

    def rows(sql: str, *params: object) -> list[tuple[Any, ...]]:
        con = sqlite3.connect(path)
        try:
            return con.execute(sql, params).fetchall()
        finally:
            con.close()

    def events(site: str) -> list[tuple[str, str, datetime, str, int | None]]:
        out = rows("SELECT kind, occurrence, event_time_us, message, wire FROM events WHERE site = ? "
                   "ORDER BY event_time_us, id", site)
        return [(k, o, _utc_us(t), m, json.loads(w).get("tips")) for k, o, t, m, w in out]

    def deadletters() -> list[tuple[str, str, str, bytes]]:
        return [(r, d, t, bytes(p)) for r, d, t, p in
                rows("SELECT reason, detail, topic, payload FROM deadletter ORDER BY received_at_us, id")]

    def sites() -> dict[str, tuple[str, str]]:
        return {s: (tz, j) for s, tz, j in rows("SELECT site, timezone, jurisdiction FROM sites")}

    return Subject(url, open_store(url), events, deadletters, sites)


def _influxql(srv: servers.InfluxDB1, db: str, q: str) -> list[dict[str, Any]]:
    res = srv.query(q, db)["results"][0]
    assert "error" not in res, res
    return [dict(zip(s["columns"], v, strict=True)) for s in res.get("series", []) for v in s["values"]]


def influx1_subject(tmp_path: Path, request: pytest.FixtureRequest) -> Subject:
    srv: servers.InfluxDB1 = request.getfixturevalue("influx_server")
    db = f"conformance_{next(_names)}_{id(tmp_path) % 10**6}"
    url = srv.store_url(db)

    def events(site: str) -> list[tuple[str, str, datetime, str, int | None]]:
        out = _influxql(srv, db, f"SELECT * FROM events WHERE \"site\" = '{site}'")
        return [(r["kind"], r["occurrence"], _utc_us(r["time"] // 1000), r["message"], r.get("tips")) for r in out]

    def deadletters() -> list[tuple[str, str, str, bytes]]:
        out = _influxql(srv, db, "SELECT * FROM deadletter")
        return [(r["reason"], r["detail"], r["topic"],
                 base64.b64decode(r["payload"]) if r["payload_encoding"] == "base64" else r["payload"].encode())
                for r in out]

    def sites() -> dict[str, tuple[str, str]]:
        out = _influxql(srv, db, "SELECT * FROM sites")
        return {r["site"]: (r["timezone"], r["jurisdiction"]) for r in out}  # time order: the latest wins

    return Subject(url, open_store(url), events, deadletters, sites)


@dataclass(frozen=True)
class Sink:
    """One store the suite runs on: its :class:`Subject` factory and the marks of what it needs (a
    real server: ``pytest.mark.influxdb``, so it skips without one on a laptop, never under CI)."""

    make: Callable[[Path, pytest.FixtureRequest], Subject]
    marks: tuple[pytest.MarkDecorator, ...] = ()


#: Every store the suite runs on: name → sink (add a sink here: the fixture's params come from it).
SUBJECTS: dict[str, Sink] = {
    "sqlite": Sink(sqlite_subject),
    "influx1": Sink(influx1_subject, (pytest.mark.influxdb,)),
}
#: The ``subject`` fixture's parameters: one per entry of :data:`SUBJECTS`, with its marks.
PARAMS = [pytest.param(name, marks=sink.marks, id=name) for name, sink in SUBJECTS.items()]


@pytest.fixture(params=PARAMS)
def subject(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Subject]:
    s = SUBJECTS[request.param].make(tmp_path, request)
    yield s
    s.store.close()


def test_every_subject_is_a_parameter_of_the_suite() -> None:
    """Adding a Subject to SUBJECTS runs the suite on it (the parameters were once a separate list)."""
    assert [p.values[0] for p in PARAMS] == list(SUBJECTS)
    assert [p.id for p in PARAMS] == list(SUBJECTS)


def tip(seq: int, tips: int, at: timedelta, *, boot: str = "b1", site: str = "riverside",
        flags: tuple[str, ...] = (), tip_size: str | None = "0.01 in") -> Reading:
    return Reading(site=site, device="rain-1", quantity="rain_tips", value=tips, unit="{tip}", time=T0 + at,
                   gateway="gw-1", boot=boot, seq=seq, raw=1000 + seq, flags=flags, tip_size=tip_size)


def turb(seq: int, value: float, at: timedelta, raw: Any = None, flags: tuple[str, ...] = ()) -> Reading:
    return Reading(site="riverside", device="turb-down", quantity="turbidity", value=value, unit="NTU",
                   time=T0 + at, gateway="gw-1", boot="b1", seq=seq, raw=raw, flags=flags)


M = timedelta(minutes=1)


# -- readings ----------------------------------------------------------------------------------------


def test_a_redelivered_reading_is_stored_once(subject: Subject) -> None:
    # failure-kinds.md #9: the same (gateway, boot, seq) twice is one reading; write_readings counts new ones.
    a, b = tip(1, 2, 0 * M), tip(2, 1, 1 * M)
    assert subject.store.write_readings([a, b, a]) == 2
    assert subject.store.write_readings([b]) == 0
    assert subject.store.write_readings([tip(1, 4, 2 * M, boot="b2")]) == 1  # same seq, new boot: new reading
    assert [(r.boot, r.seq) for r in subject.store.query_readings("riverside")] == [("b1", 1), ("b1", 2), ("b2", 1)]


def test_one_identity_another_value_is_refused_and_the_stored_one_kept(subject: Subject) -> None:
    # failure-kinds.md #27: "the store keeps both or refuses one with a reason" -- never a silent
    # "already stored". The same identity and measurement is a duplicate (flags, raw, tip size aside);
    # another value is a conflict, refused, and what the store acknowledged first stays.
    first = turb(3, 12.5, 2 * M, raw=[1, 2])
    tips = tip(4, 2, 3 * M)
    assert subject.store.write_checked([first, tips]).new == 2
    again = subject.store.write_checked([first.model_copy(update={"flags": ("spike",), "raw": None}),
                                         tips.model_copy(update={"tip_size": None})])
    assert (again.new, again.already, again.conflicts, again.refused) == (0, 2, (), ())
    other = turb(3, 99.0, 2 * M)  # seq 3 again, 99.0 NTU where 12.5 is stored
    more = tip(4, 5, 3 * M)       # 5 tips where 2 are stored
    out = subject.store.write_checked([other, more, turb(5, 14.0, 4 * M)])
    assert (out.new, out.already) == (1, 0)
    assert [(c.reading.seq, c.reading.value, c.stored_value, c.stored_unit) for c in out.conflicts] == [
        (3, 99.0, 12.5, "NTU"), (4, 5, 2, "{tip}")]
    assert out.held([other, more]) == []
    stored = {r.seq: r.value for r in subject.store.query_readings("riverside")}
    assert stored == {3: 12.5, 4: 2, 5: 14.0}
    # write_readings (callers that only count) keeps the refused one as a dead letter, never drops it
    assert subject.store.write_readings([turb(3, 77.0, 2 * M)]) == 0
    ((reason, detail, topic, payload),) = subject.deadletters()
    assert reason == "conflicting_value" and "12.5 NTU" in detail and "77 NTU" in detail
    assert topic == "stormwatch/v1/riverside/gw-1/readings" and json.loads(payload)["value"] == 77.0


def test_supersede_replaces_one_stored_reading_in_place(subject: Subject) -> None:
    # the one way a stored value changes (an explicit manual correction): the same identity and point
    r = turb(8, 41.5, 5 * M, raw="J")
    neighbour = turb(9, 40.0, 5 * M, raw="K")  # another reading of the same instant: untouched
    assert subject.store.write_readings([r, neighbour]) == 2
    old = subject.store.supersede(r.model_copy(update={"value": 50.0}))
    assert old is not None and (old.value, old.raw) == (41.5, "J")
    assert subject.store.supersede(turb(10, 1.0, 5 * M)) is None  # nothing stored under that identity
    got = sorted((x.seq, x.value) for x in subject.store.query_readings("riverside"))
    assert got == [(8, 50.0), (9, 40.0)]


def test_two_readings_at_one_instant_are_both_kept(subject: Subject) -> None:
    # design-notes.md: two tips with the same timestamp are two readings (never one overwriting the other).
    same = [tip(s, 1, 0 * M) for s in (7, 8, 9)] + [tip(1, 3, 0 * M, boot="other-boot")]
    assert subject.store.write_readings(same) == 4
    got = subject.store.query_readings("riverside")
    assert sorted(r.identity for r in got) == sorted(r.identity for r in same)
    assert sum(int(r.value) for r in got) == 6


def test_query_order_window_and_filters(subject: Subject) -> None:
    t = turb(10, 13.5, M + timedelta(microseconds=250))
    subject.store.write_readings([tip(5, 1, 3 * M), t, tip(4, 2, M), tip(3, 1, M), tip(6, 9, M, site="other")])
    got = subject.store.query_readings("riverside")
    assert [(r.time - T0, r.seq) for r in got] == [(M, 3), (M, 4), (M + timedelta(microseconds=250), 10), (3 * M, 5)]
    window = subject.store.query_readings("riverside", T0 + M, T0 + 3 * M, quantity="rain_tips")
    assert [r.seq for r in window] == [3, 4]  # start inclusive, end exclusive
    assert subject.store.query_readings("riverside", device="turb-down") == [t]
    assert subject.store.query_readings("nowhere") == []


def test_a_reading_comes_back_exactly(subject: Subject) -> None:
    readings = [
        tip(1, 7, 0 * M, flags=("counter_catch_up",)),
        turb(2, 1500.25, M + timedelta(microseconds=1), raw=[0x8000, 0x44BB], flags=("out_of_range", "spike")),
        turb(3, 0.0, 2 * M, raw="R1234"),
        turb(4, 3.5, 3 * M, raw=None),
        turb(5, 4.75, 4 * M, raw=12.5),
    ]
    subject.store.write_readings(readings)
    got = subject.store.query_readings("riverside")
    assert got == readings
    assert type(got[0].value) is int and all(type(r.value) is float for r in got[1:])


def test_series_rows_are_the_readings_of_each_series(subject: Subject) -> None:
    # query_series (backfills, stormwatch.alerts.backfill.evaluate): per (device, quantity) the rows of
    # the window in the engine's order (time, gateway, boot, seq), the same values as query_readings;
    # the generic reader (any other store) gives the same rows from query_readings.
    readings = [
        tip(1, 7, 0 * M, flags=("counter_catch_up",)), tip(3, 0, M, tip_size=None), tip(2, 1, M, boot="b0"),
        tip(4, 2, 3 * M),
        turb(5, 1500.25, M + timedelta(microseconds=1), flags=("out_of_range", "spike")), turb(6, 3.5, 2 * M),
        tip(9, 4, M, site="other"),
    ]
    subject.store.write_readings(readings)
    series = [("rain-1", "rain_tips"), ("turb-down", "turbidity"), ("turb-up", "turbidity")]
    got = series_rows(subject.store, "riverside", series, T0, T0 + 3 * M)
    assert got == {
        ("rain-1", "rain_tips"): [(us_of(T0), 7, "{tip}", "counter_catch_up", "gw-1", "b1", 1, "0.01 in"),
                                  (us_of(T0 + M), 1, "{tip}", "", "gw-1", "b0", 2, "0.01 in"),
                                  (us_of(T0 + M), 0, "{tip}", "", "gw-1", "b1", 3, "")],  # stored without a size
        ("turb-down", "turbidity"): [(us_of(T0 + M) + 1, 1500.25, "NTU", "out_of_range,spike", "gw-1", "b1", 5, ""),
                                     (us_of(T0 + 2 * M), 3.5, "NTU", "", "gw-1", "b1", 6, "")],
        ("turb-up", "turbidity"): [],
    }
    assert all(type(row[1]) is int for row in got[("rain-1", "rain_tips")])
    assert series_rows(_ReadingsOnly(subject.store), "riverside", series, T0, T0 + 3 * M) == got
    # window after window (a backfill's reading; SQLite: read ahead by a second process), the same rows
    if hasattr(subject.store, "read_ahead_from"):
        subject.store.read_ahead_from = 2
    windows = [(T0 + k * M, T0 + (k + 1) * M) for k in range(3)]
    assert list(series_chunks(subject.store, "riverside", series, windows)) == [
        series_rows(subject.store, "riverside", series, a, b) for a, b in windows]
    assert subject.store.stored_series("riverside") == [("rain-1", "rain_tips"), ("turb-down", "turbidity")]  # type: ignore[attr-defined]


class _ReadingsOnly:
    """A store seen through query_readings alone (a store without query_series)."""

    def __init__(self, store: ReadingStore) -> None:
        self.query_readings = store.query_readings


def test_late_readings_are_stored_and_told_apart(subject: Subject) -> None:
    subject.store.write_readings([tip(1, 1, 0 * M)])
    subject.store.write_readings([tip(2, 5, -3 * M)], late=True)
    query = subject.store.query_readings
    assert [r.seq for r in query("riverside", late=False)] == [1]
    assert [r.seq for r in query("riverside", late=True)] == [2]
    assert [r.seq for r in query("riverside")] == [2, 1]


def test_what_was_acknowledged_survives_a_reopen(subject: Subject) -> None:
    readings = [tip(s, 1, s * M) for s in range(1, 51)]
    assert subject.store.write_readings(readings) == 50
    subject.store.close()
    again = open_store(subject.url)
    try:
        assert again.query_readings("riverside") == readings
        assert again.write_readings(readings[:10]) == 0
    finally:
        again.close()
    subject.store = open_store(subject.url)


# -- events, dead letters, sites ---------------------------------------------------------------------


def storm_event(message: str = "", occurrence: str = "storm:1") -> Event:
    return Event(kind="storm_qualified", site="riverside", event_time=T0, rule="R1",
                 citation="Ch. 133 §133-7A(2)", occurrence=occurrence, tips=50, depth_in=0.5, message=message)


def test_the_same_event_written_again_is_one_event_with_the_latest_content(subject: Subject) -> None:
    first = storm_event("0.50 in")
    subject.store.write_events([first])
    subject.store.write_events([first, first.model_copy(update={"message": "0.50 in (verified)"})])
    later = storm_event("next storm", occurrence="storm:2").model_copy(update={"event_time": T0 + timedelta(days=1)})
    subject.store.write_events([later])
    assert subject.events("riverside") == [
        ("storm_qualified", "storm:1", T0, "0.50 in (verified)", 50),
        ("storm_qualified", "storm:2", T0 + timedelta(days=1), "next storm", 50),
    ]
    assert subject.events("elsewhere") == []


def test_every_dead_letter_is_kept_with_its_payload(subject: Subject) -> None:
    topic = "stormwatch/v1/riverside/gw-1/readings"
    letters = [DeadLetter("not_utf8", "bad byte 0xff", topic, b"\xff\x00", T0),
               DeadLetter("bad_json", "Expecting value", topic, b"{", T0),
               DeadLetter("bad_json", "Expecting value", topic, b"{", T0),  # the same twice: both arrived
               DeadLetter("schema", "seq: must be >= 0", topic, '{"seq": -1, "site": "Zürich"}'.encode(), T0 + M)]
    subject.store.write_deadletters(letters)
    # every one kept (letters of one receive time in any order)
    assert sorted(subject.deadletters()) == sorted((d.reason, d.detail, d.topic, d.payload) for d in letters)


def test_sites_keep_one_record_each_the_latest(subject: Subject) -> None:
    subject.store.write_sites([SiteInfo("riverside", "America/New_York", "ch133"),
                               SiteInfo("hilltop", "UTC", "ch196")], T0)
    subject.store.write_sites([SiteInfo("riverside", "America/New_York", "ch133")], T0)  # again: no change
    subject.store.write_sites([SiteInfo("hilltop", "America/Denver", "ch196")], T0 + timedelta(hours=1))
    assert subject.sites() == {"riverside": ("America/New_York", "ch133"), "hilltop": ("America/Denver", "ch196")}


# -- InfluxDB 2.x: the same lines, and the Flux texts --------------------------------------------------


class _Recorder(BaseHTTPRequestHandler):
    """``/write`` and ``/api/v2/write`` forwarded to the real InfluxDB 1.x (bucket = database) and
    recorded; ``/query`` forwarded; ``/api/v2/query`` (Flux) recorded and answered with no rows."""

    upstream = ""
    log: ClassVar[list[tuple[str, str]]] = []

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        parts = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(parts.query))
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if parts.path == "/api/v2/query":
            self.log.append(("flux", json.loads(body)["query"]))
            self._reply(200, b"", "text/csv")
            return
        if parts.path in ("/write", "/api/v2/write"):
            db = query.get("db") or query["bucket"]
            self.log.append(("lines", body.decode()))
            target = f"{self.upstream}/write?{urllib.parse.urlencode({'db': db, 'precision': 'ns'})}"
        else:
            target = f"{self.upstream}{self.path}"
        try:
            with urllib.request.urlopen(urllib.request.Request(target, data=body, method="POST")) as resp:
                self._reply(resp.status, resp.read(), resp.headers.get("Content-Type", "application/json"))
        except urllib.error.HTTPError as exc:
            self._reply(exc.code, exc.read(), "application/json")

    def _reply(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture()
def recorder(influx_server: servers.InfluxDB1) -> Iterator[tuple[str, list[tuple[str, str]]]]:
    log: ClassVar[list[tuple[str, str]]] = []
    handler = type("Recorder", (_Recorder,), {"upstream": influx_server.url, "log": log})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{httpd.server_address[1]}", log
    httpd.shutdown()
    httpd.server_close()


def _suite_writes(store: ReadingStore) -> None:
    """The suite's writes, in one order (readings, a late one, events, dead letters, sites)."""
    store.write_readings([tip(5, 1, 3 * M), turb(10, 13.5, M, raw=[1, 2], flags=("spike",)), tip(4, 2, M),
                          tip(3, 1, M), tip(6, 9, M, site="Pond 3, Inlet=N")])
    store.write_readings([tip(2, 5, -3 * M)], late=True)
    store.write_events([storm_event("0.50 in")])
    store.write_deadletters([DeadLetter("not_utf8", "bad byte", "t", b"\xff", T0)])
    store.write_sites([SiteInfo("riverside", "America/New_York", "ch133")], T0)


@pytest.mark.influxdb
def test_influx2_writes_the_line_protocol_influx1_writes(recorder: tuple[str, list[tuple[str, str]]],
                                                         influx_server: servers.InfluxDB1) -> None:
    host, log = recorder
    one = open_store(f"influx1://{host}/conformance_v1_{next(_names)}")
    _suite_writes(one)
    one.close()
    v1_lines = [body.splitlines() for what, body in log if what == "lines"]
    log.clear()
    bucket = f"conformance_v2_{next(_names)}"
    influx_server.query(f"CREATE DATABASE {bucket}")  # a 2.x bucket exists before anyone writes to it
    two = open_store(f"influx2://{host}?org=stormwatch&bucket={bucket}&token=t0ken")
    _suite_writes(two)
    v2_lines = [body.splitlines() for what, body in log if what == "lines"]
    assert v1_lines and v2_lines == v1_lines
    # The 2.x store's writes reached the real server through the recorder: read them back with InfluxQL.
    stored = _influxql(influx_server, bucket, "SELECT \"seq\" FROM readings WHERE \"site\" = 'riverside'")
    assert sorted(r["seq"] for r in stored) == [2, 3, 4, 5, 10]
    two.close()


@pytest.mark.influxdb
def test_influx2_flux_texts(recorder: tuple[str, list[tuple[str, str]]], influx_server: servers.InfluxDB1) -> None:
    host, log = recorder
    influx_server.query("CREATE DATABASE b")
    two = open_store(f"influx2://{host}?org=stormwatch&bucket=b&token=t0ken")
    assert two.query_readings('Pond "3"', T0, T0 + M, device="rain-1", quantity="rain_tips") == []
    two.write_readings([tip(1, 1, 0 * M)])  # looks up the identities already stored at that instant first
    two.close()
    flux = [text for what, text in log if what == "flux"]
    assert flux[0] == (
        'from(bucket: "b") |> range(start: 2026-06-01T12:00:00Z, stop: 2026-06-01T12:01:00Z)'
        ' |> filter(fn: (r) => r._measurement == "readings" and r.site == "Pond \\"3\\"")'
        ' |> filter(fn: (r) => r.device == "rain-1") |> filter(fn: (r) => r.quantity == "rain_tips")'
        ' |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")')
    start = 1_780_315_200_000_000_000
    assert flux[1].startswith(f'from(bucket: "b") |> range(start: time(v: {start}), stop: time(v: {start + 1000})) '
                              '|> filter(fn: (r) => r._measurement == "readings" and ')
    assert '(r["site"] == "riverside")' in flux[1] and '(r["device"] == "rain-1")' in flux[1]
    assert flux[1].endswith(' |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")'
                            ' |> map(fn: (r) => ({r with stormwatch_ns: int(v: r._time)}))')


@pytest.mark.influxdb
def test_influx2_overview_flux_texts(recorder: tuple[str, list[tuple[str, str]]],
                                     influx_server: servers.InfluxDB1) -> None:
    """The web portfolio's queries on InfluxDB 2.x (stormwatch.stores.base.OverviewStore): one Flux
    request each, whatever the number of sites, with the window exact to the nanosecond and each
    site, device and quantity named once. (The texts also parse with the Flux parser of
    @influxdata/flux 0.5.1; no 2.x server runs here to execute them -- see the module docstring.)"""
    host, log = recorder
    two = open_store(f"influx2://{host}?org=stormwatch&bucket=b&token=t0ken")
    sites = [f"site-{i:03d}" for i in range(50)]
    series = [(s, d, q) for s in [*sites, 'Pond "3"'] for d, q in (("rain-1", "rain_tips"), ("turb-up", "turbidity"))]
    assert two.summarize(T0, T0 + M, series) == []  # type: ignore[attr-defined]
    assert two.query_tips(T0, T0 + M, sites) == []  # type: ignore[attr-defined]
    assert two.query_site_events(T0, T0 + M, None) == []  # type: ignore[attr-defined]
    assert two.summarize(T0, T0 + M, []) == [] and two.query_tips(T0, T0 + M, []) == []  # type: ignore[attr-defined]
    two.close()
    flux = [text for what, text in log if what == "flux"]
    assert len(flux) == 3  # one request per call; nothing for an empty selection
    window = "range(start: time(v: 1780315200000000000), stop: time(v: 1780315260000000000))"
    summary, tips, events = flux
    assert summary.startswith(f'data = from(bucket: "b") |> {window} |> filter(fn: (r) => '
                              'r._measurement == "readings" and contains(value: r["site"], set: ["Pond \\"3\\"", '
                              '"site-000", "site-001", ')
    assert summary.count("site-049") == 1 and summary.count('"rain-1"') == 1
    assert ' and contains(value: r["device"], set: ["rain-1", "turb-up"]) and contains(value: r["quantity"], '\
           'set: ["rain_tips", "turbidity"]))' in summary
    assert summary.splitlines()[1:] == [
        'data |> count(column: "value") |> yield(name: "count")',
        'data |> filter(fn: (r) => r.quantity == "rain_tips" and r.tips > 0 and r.flags !~ /rain_beyond_envelope/)'
        ' |> group(columns: ["site", "device", "quantity", "tip_size"]) |> sum(column: "tips") |> yield(name: "tips")',
        'data |> min(column: "stormwatch_ns") |> yield(name: "first")',
        'data |> max(column: "stormwatch_ns") |> yield(name: "last")']
    assert tips.startswith(f'from(bucket: "b") |> {window} |> filter(fn: (r) => r._measurement == "readings" and '
                           'r.quantity == "rain_tips" and contains(value: r["site"], set: ["site-000", ')
    assert tips.endswith('|> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")'
                         ' |> filter(fn: (r) => r.tips > 0)'
                         ' |> map(fn: (r) => ({r with stormwatch_ns: int(v: r._time)}))')
    assert events == (f'from(bucket: "b") |> {window} |> filter(fn: (r) => r._measurement == "events" and '
                      'r._field == "wire") |> map(fn: (r) => ({r with stormwatch_ns: int(v: r._time)}))')


class _FluxAnswer(BaseHTTPRequestHandler):
    """``/api/v2/query`` answered with one canned annotated-CSV body; the Flux texts recorded."""

    answer = b""
    log: ClassVar[list[str]] = []

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        assert urllib.parse.urlsplit(self.path).path == "/api/v2/query"
        self.log.append(json.loads(body)["query"])
        self.send_response(200)
        self.send_header("Content-Type", "text/csv; charset=utf-8")
        self.send_header("Content-Length", str(len(self.answer)))
        self.end_headers()
        self.wfile.write(self.answer)


def _csv_field(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def test_influx2_reads_its_events_back(tmp_path: Path) -> None:
    """``stormwatch archive`` of an influx2:// store archives its events (Influx2Store.query_events).
    No 2.x server runs here (module docstring): the Flux text is checked, and the answer is decoded
    from annotated CSV in the form the InfluxDB 2.x docs give for /api/v2/query
    (docs.influxdata.com/influxdb/v2/reference/syntax/annotated-csv: #group, #datatype, #default
    annotation rows, a header row, one table per series) -- here two tables, one per event kind,
    the later event first, each ``_value`` the ``wire`` JSON as :func:`event_point` writes it."""
    from stormwatch.stores.lineprotocol import event_point

    storm = storm_event("0.50 in").model_copy(update={"event_time": T0 + timedelta(hours=2, microseconds=7)})
    turbidity = Event(kind="turbidity_contrast", site="riverside", event_time=T0, rule="R2",
                      citation="Ch. 133 §133-6C", occurrence="turbidity:2026-06-01T11:45:00Z",
                      message='possible turbidity violation, "sustained"', due_at=T0 + timedelta(hours=24))
    rows = []
    for table, event in ((0, storm), (1, turbidity)):
        point = event_point(event)
        wire = point.fields["wire"]
        assert isinstance(wire, str)
        ns = point.time_ns
        t = event.event_time.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        rows.append(f",,{table},2026-06-01T00:00:00Z,2026-06-02T00:00:00Z,{t},{_csv_field(wire)},wire,events,"
                    f"{event.kind},{event.rule},riverside,{ns}")
    answer = "\r\n".join([
        "#group,false,false,true,true,false,false,true,true,true,true,true,false",
        "#datatype,string,long,dateTime:RFC3339,dateTime:RFC3339,dateTime:RFC3339,string,string,string,string,"
        "string,string,long",
        "#default,_result,,,,,,,,,,,",
        ",result,table,_start,_stop,_time,_value,_field,_measurement,kind,rule,site,stormwatch_ns",
        *rows, "", ""])
    handler = type("Answer", (_FluxAnswer,), {"answer": answer.encode("utf-8"), "log": []})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        two = open_store(f"influx2://127.0.0.1:{httpd.server_address[1]}?org=stormwatch&bucket=b&token=t0ken")
        got = two.query_events("riverside", T0, T0 + timedelta(days=1))  # type: ignore[attr-defined]
        assert two.query_events('Pond "3"') == [turbidity, storm]  # type: ignore[attr-defined]  # same answer
        two.close()
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert got == [turbidity, storm]  # event-time order, every field as written
    assert got[1].event_time == T0 + timedelta(hours=2, microseconds=7)
    flux = handler.log
    assert flux[0] == ('from(bucket: "b") |> range(start: time(v: 1780315200000000000), stop: time(v: '
                       '1780401600000000000)) |> filter(fn: (r) => r._measurement == "events" and '
                       'r.site == "riverside" and r._field == "wire") '
                       '|> map(fn: (r) => ({r with stormwatch_ns: int(v: r._time)}))')
    # no window: from the epoch to the last instant Flux holds; the site quoted as a Flux string
    assert flux[1].startswith('from(bucket: "b") |> range(start: time(v: 0), stop: time(v: 9223372036854775807))'
                              ' |> filter(fn: (r) => r._measurement == "events" and r.site == "Pond \\"3\\"" and')
