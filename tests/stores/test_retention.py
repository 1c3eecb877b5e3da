"""Records kept five years (Spencerport §276-26C "retain the records for at least five years";
Ch. 133 §133-7A(2) log book): the InfluxDB bucket docker-compose creates keeps data forever, the
database the InfluxDB 1.x store creates keeps it forever (a real server says so), and the SQLite
store never deletes a reading, an event or a dead letter."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

from stormwatch.app import servers
from stormwatch.contract import TIP_UNIT, Reading
from stormwatch.stores.influx1 import Influx1Store
from stormwatch.stores.sqlite import SqliteStore
from tests.conftest import REPO

FIVE_YEARS = timedelta(days=5 * 366)


def _duration(text: str) -> timedelta:
    """An InfluxDB duration (``0`` or ``0s``: infinite -> timedelta.max; ``1826d``, ``43800h0m0s``)."""
    if text in ("0", "0s"):
        return timedelta.max
    units = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
    return timedelta(seconds=sum(int(n) * units[u] for n, u in re.findall(r"(\d+)([wdhms])", text)))


def test_compose_database_keeps_at_least_five_years() -> None:
    """The stack's InfluxDB 1.8 makes its database with the default retention policy (autogen,
    infinite; the next test reads it from a real 1.x) and no setting shortens it."""
    influx = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]["influxdb"]
    assert influx["image"].startswith("influxdb:1.")
    assert not [k for k in influx["environment"] if "RETENTION" in k or k.endswith("_DURATION")]


def test_influx1_store_creates_a_database_that_keeps_everything(influx_server: servers.InfluxDB1) -> None:
    db = f"keep_{uuid.uuid4().hex[:8]}"
    store = Influx1Store(influx_server.url, db)
    store.ensure_database()
    policies = influx_server.query(f'SHOW RETENTION POLICIES ON "{db}"', db)["results"][0]["series"][0]
    rows = [dict(zip(policies["columns"], v, strict=True)) for v in policies["values"]]
    default = next(r for r in rows if r["default"])
    assert _duration(default["duration"]) >= FIVE_YEARS
    store.close()


def test_sqlite_store_never_deletes(tmp_path: Path) -> None:
    source = (REPO / "stores" / "sqlite.py").read_text()
    assert not re.search(r"\b(DELETE|DROP|TRUNCATE)\b", source)
    old = datetime.now(UTC) - timedelta(days=6 * 366)
    reading = Reading(site="s", device="rain-1", quantity="rain_tips", value=1, unit=TIP_UNIT, time=old,
                      gateway="gw", boot="b", seq=1)
    with SqliteStore(tmp_path / "s.db") as store:
        store.write_readings([reading])
    with SqliteStore(tmp_path / "s.db") as store:
        store.write_readings([reading.model_copy(update={"seq": 2, "time": datetime.now(UTC)})])
        assert store.query_readings("s", old, old + timedelta(seconds=1)) == [reading]
