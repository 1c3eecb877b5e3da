"""A small two-site world for the web desk's tests: site files, readings, work orders, accounts.

Site ``riverside-commons`` is the example site; ``hilltop`` is the same site file under another id
(and gateway). Readings are written to a real SQLite store and orders opened in a real work-order
book; the engine's clock is recorded as stopped at :data:`NOW`.
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml
from starlette.testclient import TestClient

from stormwatch.alerts.workorders import WorkOrders
from stormwatch.clock import ManualClock
from stormwatch.contract import Event, Reading
from stormwatch.resources import example_site
from stormwatch.stores.urls import open_store
from stormwatch.web.accounts import Accounts
from stormwatch.web.app import create_app
from stormwatch.web.server import DeskSettings, open_desk

NOW = datetime(2026, 6, 2, 16, 0, tzinfo=UTC)  # 12:00 EDT
A, B = "riverside-commons", "hilltop"
PASSWORD = "correct horse battery"
#: 5.5 ft below an 8-ft sensor: 2.5 ft of sediment (1 ft = 304.8 mm).
DISTANCE_MM = 5.5 * 304.8


def site_files(root: Path) -> list[Path]:
    """The two site files (B: A's file with another site id and gateway)."""
    doc = yaml.safe_load(example_site().read_text())
    doc["site"]["id"], doc["site"]["name"], doc["gateway_id"] = B, "Hilltop Estates", "gw-hilltop-1"
    root.mkdir(parents=True, exist_ok=True)
    (root / "hilltop.yaml").write_text(yaml.safe_dump(doc))
    return [example_site(), root / "hilltop.yaml"]


def readings(site: str, gateway: str, *, silent_from: datetime | None = None) -> list[Reading]:
    """24 h of one reading a minute per probe and gauge, and one every 5 min from the basin.

    Rain: 50 single tips in the hour before NOW - 2 h (0.50 in); turbidity up 10.0, down 16.0 NTU;
    basin distance 5.5 ft. Nothing at or after ``silent_from``.
    """
    return list(_readings(site, gateway, silent_from))


@functools.cache
def _readings(site: str, gateway: str, silent_from: datetime | None) -> tuple[Reading, ...]:
    """:func:`readings`, made once per test process (readings are frozen: every test gets the same)."""
    out: list[Reading] = []
    seq = 0
    start = NOW - timedelta(hours=24)
    storm = NOW - timedelta(hours=3)
    for i in range(24 * 60):
        t = start + timedelta(minutes=i)
        if silent_from is not None and t >= silent_from:
            break
        tips = 1 if storm <= t < storm + timedelta(minutes=50) else 0
        rows = [("rain-1", "rain_tips", tips, "{tip}"), ("turb-up", "turbidity", 10.0, "NTU"),
                ("turb-down", "turbidity", 16.0, "NTU")]
        if i % 5 == 0:
            rows.append(("basin-level", "distance", DISTANCE_MM, "mm"))
        for device, quantity, value, unit in rows:
            seq += 1
            out.append(Reading(site=site, device=device, quantity=quantity, value=value, unit=unit, time=t,
                               gateway=gateway, boot="b1", seq=seq))
    return tuple(out)


def storm_event(site: str) -> Event:
    return Event(kind="storm_inspection_due", site=site, event_time=NOW - timedelta(hours=1), rule="R1",
                 citation="Ch. 133 §133-7A(2)", occurrence=f"storm:{site}", due_at=NOW - timedelta(minutes=30),
                 message="storm of 0.50 in (50 tips of 1/100 in)", tips=50, depth_in=0.5,
                 evidence=[{"time": "2026-06-02T13:00:00Z", "tips": 1}])


def build(root: Path, store_url: str | None = None) -> dict[str, object]:
    """Write the store, the book (one overdue storm inspection per site) and the accounts under ``root``.

    ``store_url``: the readings store to write (default: SQLite ``root/stormwatch.db``; the tests pass
    a database of a real InfluxDB 1.x to run the same pages on it).
    """
    state = root / "state"
    state.mkdir(parents=True, exist_ok=True)
    store_url = store_url or f"sqlite:///{root / 'stormwatch.db'}"
    store = open_store(store_url, clock=ManualClock(NOW))
    store.write_readings(readings(A, "gw-riverside-1"))
    store.write_readings(readings(B, "gw-hilltop-1", silent_from=NOW - timedelta(hours=3)))
    store.write_events([storm_event(A), storm_event(B)])
    store.close()
    book = WorkOrders(state / "alerts.db", ManualClock(NOW - timedelta(hours=1)))
    orders = {site: book.open_for(storm_event(site), timezone="America/New_York")[0].id for site in (A, B)}
    book.record_clock(ManualClock(NOW), stopped=True)
    book.close()
    accounts = Accounts(state / "web.db")
    accounts.add("ina", "inspector", PASSWORD, sites=[A], display_name="Ina Inspector")
    accounts.add("carl", "contractor", PASSWORD, sites=[A], display_name="Carl Contractor")
    accounts.add("sam", "smo", PASSWORD, display_name="Sam SMO")
    accounts.close()
    return {"state": state, "store": store_url, "orders": orders,
            "sites": site_files(root / "sites")}


def client(world: dict[str, object], **settings: object) -> TestClient:
    desk = open_desk(DeskSettings(sites=world["sites"], store_url=str(world["store"]),  # type: ignore[arg-type]
                                  state_dir=world["state"], **settings))  # type: ignore[arg-type]
    return TestClient(create_app(desk), follow_redirects=False)


def csrf_of(html: str) -> str:
    m = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert m, "no CSRF token in the page"
    return m.group(1)


def login(c: TestClient, user: str, password: str = PASSWORD) -> str:
    """Log ``user`` in; returns the session's CSRF token (from the portfolio page)."""
    token = csrf_of(c.get("/login").text)
    r = c.post("/login", data={"username": user, "password": password, "csrf_token": token, "next": "/"})
    assert r.status_code == 303, r.text
    return csrf_of(c.get("/").text)
