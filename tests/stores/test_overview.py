"""Many sites in one query (stormwatch.stores.base.OverviewStore on the SQLite store and on a real
InfluxDB 1.x), and the portfolio reading them in a constant number of store queries -- and, on
InfluxDB, of HTTP requests -- whatever the number of sites."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from stormwatch.app import servers
from stormwatch.clock import ManualClock
from stormwatch.profiles import ProfileLibrary
from stormwatch.stores.base import OverviewStore
from stormwatch.stores.influx1 import Influx1Store
from stormwatch.stores.sqlite import SqliteStore
from stormwatch.web.overview import load_sites, portfolio
from tests.web_support import NOW, readings, storm_event

_names = itertools.count()


@pytest.fixture(params=[pytest.param("sqlite"), pytest.param("influx1", marks=pytest.mark.influxdb)])
def open_overview(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], OverviewStore]]:
    """A factory of a fresh overview store: SQLite in ``tmp_path``, or a new database on the session's
    InfluxDB 1.x (written and read through the store, event times on the manual clock)."""
    opened: list[OverviewStore] = []

    def make() -> OverviewStore:
        store: OverviewStore
        if request.param == "sqlite":
            store = SqliteStore(tmp_path / f"s{len(opened)}.db", clock=ManualClock(NOW))
        else:
            srv: servers.InfluxDB1 = request.getfixturevalue("influx_server")
            store = Influx1Store(srv.url, f"overview_{next(_names)}_{id(tmp_path) % 10**6}", clock=ManualClock(NOW))
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


def test_summary_tips_and_events_of_many_sites(open_overview: Callable[[], OverviewStore]) -> None:
    store = open_overview()
    store.write_readings(readings("a", "gw-a"))
    store.write_readings(readings("b", "gw-b", silent_from=NOW - timedelta(hours=3)))
    store.write_events([storm_event("a"), storm_event("b")])
    day = NOW - timedelta(hours=24)
    series = [(site, device, q) for site in ("a", "b") for device, q in
              (("rain-1", "rain_tips"), ("turb-up", "turbidity"), ("basin-level", "distance"))]
    summary = {(s.site, s.device, s.quantity): s for s in store.summarize(day, NOW, [*series, ("c", "rain-1", "x")])}
    assert set(summary) == set(series)  # a series without readings is left out
    rain_a = summary[("a", "rain-1", "rain_tips")]
    assert (rain_a.count, rain_a.total, rain_a.unit) == (1440, 50, "{tip}")
    assert isinstance(rain_a.total, int)  # tips stay integers
    assert (rain_a.first_time, rain_a.last_time) == (day, NOW - timedelta(minutes=1))
    rain_b = summary[("b", "rain-1", "rain_tips")]
    assert (rain_b.count, rain_b.total, rain_b.last_time) == (21 * 60, 0, NOW - timedelta(hours=3, minutes=1))
    basin = summary[("a", "basin-level", "distance")]
    assert (basin.count, basin.total, basin.last_value, basin.last_time) == \
        (288, None, 5.5 * 304.8, NOW - timedelta(minutes=5))
    up = summary[("a", "turb-up", "turbidity")]
    assert (up.last_value, up.unit, up.last_flags) == (10.0, "NTU", ())
    narrow = store.summarize(NOW - timedelta(hours=3), NOW - timedelta(hours=2), [("a", "rain-1", "rain_tips")])
    assert [(x.count, x.total) for x in narrow] == [(60, 50)]  # the storm hour: 50 single tips in 60 polls
    assert store.summarize(day, NOW, []) == []
    tips = store.query_tips(day, NOW)
    assert len(tips) == 50 and {r.site for r in tips} == {"a"} and all(r.value == 1 for r in tips)
    assert [e.site for e in store.query_site_events(day, NOW, ["a", "b"])] == ["a", "b"]
    assert store.query_site_events(day, NOW - timedelta(hours=2), ["a"]) == []
    assert store.query_site_events(day, NOW, []) == [] and store.query_tips(day, NOW, []) == []
    assert [r.site for r in store.query_tips(day, NOW, ["b"])] == []


class Counting:
    """A store proxy counting the queries a page makes."""

    def __init__(self, store: OverviewStore) -> None:
        self.store = store
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.store, name)
        if name.startswith(("query", "summarize")):
            def counted(*args: Any, **kwargs: Any) -> Any:
                self.calls.append(name)
                return attr(*args, **kwargs)
            return counted
        return attr


def test_portfolio_queries_do_not_grow_with_the_number_of_sites(tmp_path: Path,
                                                                 open_overview: Callable[[], OverviewStore]) -> None:
    import yaml

    from stormwatch.resources import example_site

    doc = yaml.safe_load(example_site().read_text())
    files = []
    for i in range(12):
        doc["site"]["id"], doc["gateway_id"] = f"site-{i:02d}", f"gw-{i:02d}"
        f = tmp_path / f"site-{i:02d}.yaml"
        f.write_text(yaml.safe_dump(doc))
        files.append(f)
    sites = load_sites([tmp_path], ProfileLibrary())
    store = open_overview()
    for i in range(12):
        store.write_readings(readings(f"site-{i:02d}", f"gw-{i:02d}")[:300])
        store.write_events([storm_event(f"site-{i:02d}")])
    requests: list[str] = []
    if isinstance(store, Influx1Store):  # every HTTP request the store makes, counted
        send = store._request

        def counted(path: str, *args: Any, **kwargs: Any) -> bytes:
            requests.append(path)
            return send(path, *args, **kwargs)
        store._request = counted  # type: ignore[method-assign]
    counting = Counting(store)
    portfolio(list(sites.values())[:2], counting, [], NOW)  # type: ignore[arg-type]
    two, two_requests = list(counting.calls), list(requests)
    counting.calls.clear()
    requests.clear()
    result = portfolio(list(sites.values()), counting, [], NOW)  # type: ignore[arg-type]
    assert counting.calls == two and len(two) <= 3 and result.queries == len(two)
    assert requests == two_requests and len(requests) <= len(two)  # InfluxDB: one request per store query
    assert len(result.rows) == 12
