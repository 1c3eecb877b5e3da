"""InfluxDB 1.x store retries: 429/503 with ``Retry-After`` are honoured (issue 6, item 3).

A small real HTTP server in a thread stands in front of the real ``influxd``: it answers the first
``/write`` with the configured status and ``Retry-After``, and forwards every other request to
InfluxDB unchanged. Nothing is mocked: the store speaks HTTP to a server, the server to InfluxDB.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from stormwatch.app import servers
from stormwatch.contract import Reading
from stormwatch.stores.influx1 import Influx1Store
from tests.names import RUN
from tests.stores_support import BusyFront

pytestmark = pytest.mark.influxdb

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


@pytest.fixture()
def front_factory(influx_server: servers.InfluxDB1) -> Iterator[list[BusyFront]]:
    fronts: list[BusyFront] = []
    yield fronts
    for f in fronts:
        f.close()


@pytest.mark.parametrize(("status", "retry_after_s"), [(503, 1.0), (429, 1.5)])
def test_retry_after_is_honoured_then_the_point_is_written(
        influx_server: servers.InfluxDB1, front_factory: list[BusyFront], status: int, retry_after_s: float) -> None:
    front = BusyFront(influx_server.url, status, f"{retry_after_s:g}")
    front_factory.append(front)
    db = f"retry_after_{status}_{RUN}"
    # The store's own backoff (10 ms) is far shorter than Retry-After: the server's word wins.
    store = Influx1Store(front.url, db, retries=3, backoff_s=0.01)
    r = Reading(site="riverside", device="turb-down", quantity="turbidity", value=21.5, unit="NTU", time=T0,
                gateway="gw-1", boot="b1", seq=1, raw=[0, 1])
    assert store.write_readings([r]) == 1
    assert len(front.refused) == 1 and len(front.forwarded_writes) == 1
    waited = front.forwarded_writes[0] - front.refused[0]
    assert retry_after_s <= waited < retry_after_s + 1.0
    assert store.retries_total == 1
    res = influx_server.query('SELECT "value" FROM readings', db)["results"][0]
    # event time in ns + the store's timestamp slot (0..999 ns, stormwatch.stores.influxwrite)
    assert [[t // 1_000 * 1_000, v] for t, v in res["series"][0]["values"]] == [[1_780_315_200_000_000_000, 21.5]]


def test_retry_after_http_date_form(influx_server: servers.InfluxDB1, front_factory: list[BusyFront]) -> None:
    # Retry-After may also be an HTTP date (RFC 9110 section 10.2.3); one in the past means "now".
    front = BusyFront(influx_server.url, 503, "Wed, 21 Oct 2015 07:28:00 GMT")
    front_factory.append(front)
    store = Influx1Store(front.url, f"retry_after_date_{RUN}", retries=3, backoff_s=0.01)
    r = Reading(site="riverside", device="turb-down", quantity="turbidity", value=3.0, unit="NTU", time=T0,
                gateway="gw-1", boot="b1", seq=2, raw=[0, 2])
    assert store.write_readings([r]) == 1
    assert front.forwarded_writes[0] - front.refused[0] < 0.5
    assert store.retries_total == 1
