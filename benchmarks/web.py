"""Benchmark: the web desk's portfolio page for many sites (default 500) over a generated store.

Generates N site files (the example site under N ids), a store (``--store sqlite``, or ``influx1``: a
real InfluxDB 1.x started in a temporary directory, as the tests do) with 24 h of readings per
site (rain gauge, two turbidity probes, basin level; one reading per ``--poll-s`` seconds each, 300 s
by default), a storm in progress at every tenth site, and one open work order per site. Then logs in
as the SMO (who sees every site) and renders ``/`` ``--renders`` times through the real application
(Starlette's test client: no network), counting the store and work-order queries each page makes.
The same is measured for ``N // 10`` sites: a constant number of queries per page, not one per site
(on InfluxDB also the HTTP requests to the server per page). Then the work-order book gets the
completed orders of years (``--history-orders``, default 50,000: storm inspections spread over the
five years before, each completed a day after its storm) and the full portfolio is measured again:
its time must stay flat, because a page reads the orders not completed and those completed in its
window (:meth:`stormwatch.alerts.workorders.WorkOrders.current`), never the whole book; the query
the portfolio and the notifier's scan make is timed against reading the whole book (``list()``).

    python benchmarks/web.py [--sites 500] [--poll-s 300] [--renders 30] [--store sqlite|influx1]
                             [--history-orders 50000]

Prints the machine and the figures; the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml

from benchmarks.machine import describe, machine
from stormwatch.alerts.workorders import WorkOrders, order_id
from stormwatch.clock import ScenarioClock, WallClock
from stormwatch.contract import Event, Reading
from stormwatch.resources import example_site
from stormwatch.stores.urls import open_store
from stormwatch.web.accounts import Accounts

NOW = datetime(2026, 6, 2, 16, 0, tzinfo=UTC)
PASSWORD = "benchmark password"


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def generate(root: Path, n_sites: int, poll_s: int, store_url: str) -> tuple[Path, int]:
    """Site files, the store ``store_url``, work orders and an SMO account under ``root``; returns (sites
    dir, readings)."""
    doc = yaml.safe_load(example_site().read_text())
    for d in doc["devices"]:
        d["poll_interval_s"] = poll_s
    sites = root / "sites"
    sites.mkdir()
    store = open_store(store_url)
    book = WorkOrders(root / "alerts.db", WallClock())
    steps = 24 * 3600 // poll_s
    start = NOW - timedelta(hours=24)
    total = 0
    for i in range(n_sites):
        sid, gw = f"site-{i:04d}", f"gw-{i:04d}"
        doc["site"]["id"], doc["site"]["name"], doc["gateway_id"] = sid, f"Site {i}", gw
        (sites / f"{sid}.yaml").write_text(yaml.safe_dump(doc))
        storming = i % 10 == 0
        batch = []
        seq = 0
        for k in range(steps):
            t = start + timedelta(seconds=k * poll_s)
            tips = 2 if storming and k >= steps - 12 else 0
            for device, quantity, value, unit in (("rain-1", "rain_tips", tips, "{tip}"),
                                                  ("turb-up", "turbidity", 8.0 + i % 5, "NTU"),
                                                  ("turb-down", "turbidity", 11.0 + i % 7, "NTU"),
                                                  ("basin-level", "distance", 1500.0 + i, "mm")):
                seq += 1
                batch.append(Reading.model_construct(site=sid, device=device, quantity=quantity, value=value,
                                                     unit=unit, time=t, gateway=gw, boot="b", seq=seq, raw=None,
                                                     flags=(), tip_size="0.01 in" if quantity == "rain_tips" else None))
        total += store.write_readings(batch)
        events = []
        if storming:
            storm_start = start + timedelta(seconds=(steps - 12) * poll_s)
            events.append(Event(kind="storm_started", site=sid, event_time=storm_start, rule="R1",
                                citation="Ch. 133 §133-7A(2)", occurrence=f"storm:{storm_start.isoformat()}",
                                storm_start=storm_start, tips=2, depth_in=0.02))
        order_event = Event(kind="basin_cleanout_due", site=sid, event_time=NOW - timedelta(hours=3), rule="R3",
                            citation="Ch. 133 §133-7A(1)", occurrence=f"basin:{sid}",
                            due_at=NOW + timedelta(hours=(i % 100) - 30), message="basin half full")
        events.append(order_event)
        store.write_events(events)
        book.open_for(order_event, timezone="America/New_York")
        if (i + 1) % 100 == 0:
            log(f"generated {i + 1} sites, {total:,} readings")
    # the engine "stopped" at NOW: the desk judges the pages at that time (as after a demo)
    book.record_clock(ScenarioClock(sim_start=NOW, speed=1.0, wall_start=time.time()), stopped=True)
    book.close()
    store.close()
    accounts = Accounts(root / "web.db")
    accounts.add("smo", "smo", PASSWORD)
    accounts.close()
    return sites, total


class Counting:
    """Counts the calls of ``names`` on a wrapped object."""

    def __init__(self, target: Any, names: tuple[str, ...]) -> None:
        self.target = target
        self.names = names
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.target, name)
        if name in self.names:
            def counted(*args: Any, **kwargs: Any) -> Any:
                self.calls += 1
                return attr(*args, **kwargs)
            return counted
        return attr


def measure(root: Path, sites_dir: Path, n_sites: int, renders: int, store_url: str) -> dict[str, Any]:
    from starlette.testclient import TestClient

    from stormwatch.web.app import create_app
    from stormwatch.web.server import DeskSettings, open_desk

    chosen = sorted(sites_dir.glob("*.yaml"))[:n_sites]
    desk = open_desk(DeskSettings(sites=chosen, store_url=store_url, state_dir=root))
    requests = Counting(desk.store, ("_request",))
    if hasattr(desk.store, "_request"):  # InfluxDB 1.x: count the HTTP requests too
        desk.store._request = requests.__getattr__("_request")  # type: ignore[attr-defined]
    store = Counting(desk.store, ("summarize", "query_tips", "query_site_events", "query_readings"))
    book = Counting(desk.book, ("list", "current", "get", "history", "engine_clock"))
    desk.store = store  # type: ignore[assignment]
    desk.book = book  # type: ignore[assignment]
    desk.clock.book = book  # type: ignore[assignment]
    client = TestClient(create_app(desk), follow_redirects=False)
    token = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/login").text).group(1)  # type: ignore[union-attr]
    assert client.post("/login", data={"username": "smo", "password": PASSWORD, "csrf_token": token}).status_code == 303
    times, store_q, book_q, http_q = [], set(), set(), set()
    for _ in range(renders):
        store.calls = book.calls = requests.calls = 0
        t0 = time.perf_counter()
        r = client.get("/")
        times.append(time.perf_counter() - t0)
        assert r.status_code == 200 and r.text.count("data-site=") == n_sites
        store_q.add(store.calls)
        book_q.add(book.calls)
        http_q.add(requests.calls)
    times.sort()
    return {"sites": n_sites, "p50_ms": round(statistics.median(times) * 1000, 1),
            "p95_ms": round(times[max(0, int(len(times) * 0.95) - 1)] * 1000, 1),
            "store_queries_per_page": sorted(store_q), "book_queries_per_page": sorted(book_q),
            "http_requests_per_page": sorted(http_q),
            "page_kb": round(len(r.content) / 1024)}


def add_history(root: Path, n_sites: int, n_orders: int) -> int:
    """``n_orders`` completed storm inspections over the five years before :data:`NOW`, round-robin over
    the sites, each with its history (opened, completed a day later); returns the book's size."""
    def ts(t: datetime) -> str:
        return t.astimezone(UTC).isoformat(timespec="microseconds")

    book = WorkOrders(root / "alerts.db", WallClock())
    span = timedelta(days=5 * 365)
    records = []
    for k in range(n_orders):
        sid = f"site-{k % n_sites:04d}"
        t = NOW - timedelta(days=3) - span * (k / max(n_orders, 1))
        occurrence = f"storm:{ts(t)}"
        done = t + timedelta(days=1)
        records.append({
            "id": order_id(sid, "R1", occurrence), "site": sid, "kind": "storm_inspection", "rule": "R1",
            "citation": "Ch. 133 §133-7A(2)", "occurrence": occurrence, "event_time": ts(t), "opened_at": ts(t),
            "due_at": ts(t + timedelta(hours=24)), "status": "completed", "message": "storm of 0.50 in",
            "evidence": "[]", "inspector": "Pat Inspector", "notes": "inspected", "completed_at": ts(done),
            "timezone": "America/New_York",
            "history": [{"at": ts(t), "by": "alert engine", "action": "opened", "status": "open", "notes": ""},
                        {"at": ts(done), "by": "Pat Inspector", "action": "completed", "status": "completed",
                         "notes": "inspected"}]})
        if len(records) == 5000:
            book.import_records(records)
            records = []
    book.import_records(records)
    size = len(book.list())
    book.close()
    return size


def book_queries(root: Path, n_sites: int) -> dict[str, float]:
    """Milliseconds (median of 5) of the portfolio's and the notifier's order query, and of ``list()``."""
    book = WorkOrders(root / "alerts.db", WallClock())
    sites = [f"site-{i:04d}" for i in range(n_sites)]

    def ms(call: Any) -> float:
        runs = []
        for _ in range(5):
            t0 = time.perf_counter()
            call()
            runs.append(time.perf_counter() - t0)
        return round(statistics.median(runs) * 1000, 1)

    out = {"list_all_ms": ms(book.list),
           "portfolio_query_ms": ms(lambda: book.current(sites, completed_since=NOW - timedelta(days=7))),
           "notifier_query_ms": ms(lambda: book.current(sites))}
    book.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sites", type=int, default=500)
    ap.add_argument("--poll-s", type=int, default=300)
    ap.add_argument("--renders", type=int, default=30)
    ap.add_argument("--store", choices=("sqlite", "influx1"), default="sqlite")
    ap.add_argument("--history-orders", type=int, default=50_000,
                    help="completed orders of earlier years added to the book before a last measurement (0: none)")
    args = ap.parse_args()
    log(f"machine: {describe()}")
    with tempfile.TemporaryDirectory(prefix="stormwatch-web-bench-") as tmp:
        root = Path(tmp)
        server = None
        if args.store == "influx1":
            from stormwatch.app import servers

            server = servers.influxdb1(root / "influxdb")
            server.start()
            store_url = server.store_url("bench")
        else:
            store_url = f"sqlite:///{root / 'stormwatch.db'}"
        try:
            result = run(root, args, store_url)
        finally:
            if server is not None:
                server.stop()
    print(json.dumps(result), flush=True)


def run(root: Path, args: argparse.Namespace, store_url: str) -> dict[str, Any]:
    """Generate, then measure the tenth and the full portfolio; the JSON result."""
    t0 = time.perf_counter()
    sites_dir, readings = generate(root, args.sites, args.poll_s, store_url)
    log(f"generated {args.sites} sites, {readings:,} readings in {time.perf_counter() - t0:.0f} s")
    small = measure(root, sites_dir, max(1, args.sites // 10), args.renders, store_url)
    log(f"portfolio of {small['sites']} sites: p50 {small['p50_ms']} ms, p95 {small['p95_ms']} ms; "
        f"store queries per page {small['store_queries_per_page']}, work-order queries "
        f"{small['book_queries_per_page']}, HTTP requests {small['http_requests_per_page']}")
    full = measure(root, sites_dir, args.sites, args.renders, store_url)
    log(f"portfolio of {full['sites']} sites: p50 {full['p50_ms']} ms, p95 {full['p95_ms']} ms; "
        f"store queries per page {full['store_queries_per_page']}, work-order queries "
        f"{full['book_queries_per_page']}, HTTP requests {full['http_requests_per_page']}; page {full['page_kb']} KiB")
    constant = all(small[k] == full[k] for k in ("store_queries_per_page", "book_queries_per_page",
                                                  "http_requests_per_page"))
    log(f"queries per page independent of the number of sites: {constant}")
    result = {"benchmark": "web_portfolio", "store": args.store, "readings": readings, "poll_s": args.poll_s,
              "renders": args.renders, "full": full, "tenth": small, "constant_queries": constant,
              "machine": machine()}
    if args.history_orders > 0:
        small_book = book_queries(root, args.sites)
        orders = add_history(root, args.sites, args.history_orders)
        big_book = book_queries(root, args.sites)
        log(f"work-order book of {orders:,} orders ({args.history_orders:,} completed over 5 years): "
            f"list() {big_book['list_all_ms']} ms (was {small_book['list_all_ms']} ms with {args.sites}); the "
            f"portfolio's query {big_book['portfolio_query_ms']} ms (was {small_book['portfolio_query_ms']} ms), "
            f"the notifier's {big_book['notifier_query_ms']} ms (was {small_book['notifier_query_ms']} ms)")
        big = measure(root, sites_dir, args.sites, args.renders, store_url)
        log(f"portfolio of {big['sites']} sites over that book: p50 {big['p50_ms']} ms, p95 {big['p95_ms']} ms "
            f"(was p50 {full['p50_ms']} ms); work-order queries {big['book_queries_per_page']}")
        result.update({"history_orders": args.history_orders, "book_orders": orders, "full_big_book": big,
                       "book_queries_small": small_book, "book_queries_big": big_book})
    return result


if __name__ == "__main__":
    main()
