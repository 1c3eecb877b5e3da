"""`stormwatch import` of the real logger files in tests/data (SOURCES.md), into SQLite and InfluxDB 1.x.

Every expected count and total is computed here from the file with the csv module, independently of
the importer: no row lost, rain tips of one minute all kept (as one count per timestamp), units
converted exactly, and a second import stores nothing new.
"""

from __future__ import annotations

import csv
import json
import math
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from typer.testing import CliRunner

from stormwatch.app import servers
from stormwatch.app.cli import app
from stormwatch.stores.urls import open_store
from tests.conftest import data_file
from tests.importers_support import THARANDT, THARANDT_ARGS

VIASACRA = "viasacra_pond_exo_turb_2019-12-18_to_2020-01-09.csv"
TROUT = "troutcreek_lidar_stage_Log00017.txt"


def run_import(*args: str) -> dict[str, object]:
    result = CliRunner().invoke(app, ["import", *args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


def tharandt_by_minute(path: Path) -> Counter[datetime]:
    """Tips per timestamp, by hand: each row's depth / 0.2 mm (the first row is a 0 start marker)."""
    tips: Counter[datetime] = Counter()
    with path.open(newline="") as f:
        rows = list(csv.reader(f, delimiter=";"))[1:]
    for date, depth in rows:
        when = datetime.strptime(date, "%d.%m.%Y %H:%M").replace(tzinfo=UTC)
        tips[when] += int(Decimal(depth) / Decimal("0.2"))
    return tips


def test_tharandt_tip_file_every_tip_kept_and_reimport_adds_nothing(site: Path, tmp_path: Path) -> None:
    path = data_file(THARANDT)
    expected = tharandt_by_minute(path)
    assert sum(expected.values()) == 2631  # SOURCES.md: 2,631 tips = 526.2 mm
    db = tmp_path / "store.db"
    url = f"sqlite:///{db}"
    summary = run_import(str(path), "--site", str(site), "--device", "rain-1", "--store", url, *THARANDT_ARGS)
    assert summary["rows_read"] == 2632
    assert summary["rejected_rows"] == {}
    assert summary["readings_made"] == summary["readings_stored"] == len(expected)
    assert summary["tips"] == 2631

    store = open_store(url)
    stored = store.query_readings("import-test", device="rain-1", quantity="rain_tips")
    assert {r.time: r.value for r in stored} == dict(expected)
    assert all(isinstance(r.value, int) and r.unit == "{tip}" and r.gateway == "import" for r in stored)
    assert max(expected.values()) == max(r.value for r in stored) == 7  # up to 7 tips in one minute
    # 23.09.2018 (UTC day): 134 tips = 26.8 mm (SOURCES.md)
    day = datetime(2018, 9, 23, tzinfo=UTC)
    assert sum(r.value for r in stored if day <= r.time < day + timedelta(days=1)) == 134
    store.close()

    again = run_import(str(path), "--site", str(site), "--device", "rain-1", "--store", url, *THARANDT_ARGS)
    assert again["readings_stored"] == 0
    assert again["already_stored"] == len(expected)
    store = open_store(url)
    assert len(store.query_readings("import-test", device="rain-1")) == len(expected)
    store.close()


def test_viasacra_sonde_turbidity_fnu_and_temperature(site: Path, tmp_path: Path) -> None:
    path = data_file(VIASACRA)
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    zone = ZoneInfo("America/New_York")
    turb = {datetime.fromisoformat(r["date.time"]).replace(tzinfo=zone).astimezone(UTC): float(r["turb_FNU"])
            for r in rows}
    temp_total = math.fsum(float(r["temp"]) for r in rows)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    args = [str(path), "--site", str(site), "--device", "sonde-1", "--store", url, "--tz", "America/New_York",
            "--value-column", "turb_FNU=turbidity:FNU", "--value-column", "temp=temperature"]
    summary = run_import(*args)
    assert summary["rows_read"] == len(rows) == 6325
    assert summary["readings_stored"] == 2 * len(rows)
    assert summary["gaps"] == 0 and summary["rejected_rows"] == {}

    store = open_store(url)
    stored = store.query_readings("import-test", device="sonde-1", quantity="turbidity")
    assert {r.time: r.value for r in stored} == turb
    assert {r.unit for r in stored} == {"FNU"}
    # first sample 2019-12-18 13:35 EST = 18:35 UTC; the isolated spike 1899.57 FNU at 08:30 EST (SOURCES.md)
    assert stored[0].time == datetime(2019, 12, 18, 18, 35, tzinfo=UTC)
    assert turb[datetime(2019, 12, 22, 13, 30, tzinfo=UTC)] == 1899.57
    temps = store.query_readings("import-test", device="sonde-1", quantity="temperature")
    assert math.isclose(math.fsum(r.value for r in temps), temp_total, rel_tol=0, abs_tol=1e-6)
    assert {r.unit for r in temps} == {"Cel"}
    store.close()

    assert run_import(*args)["readings_stored"] == 0
    store = open_store(url)
    assert len(store.query_readings("import-test", device="sonde-1")) == 2 * len(rows)
    store.close()


def test_fnu_file_into_an_ntu_profile_is_refused_before_storing(site: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    result = CliRunner().invoke(app, ["import", str(data_file(VIASACRA)), "--site", str(site), "--device",
                                      "turb-ntu", "--store", url, "--value-column", "turb_FNU=turbidity:FNU"])
    assert result.exit_code == 2
    assert "unit_mismatch" in result.output and "'FNU'" in result.output and "'NTU'" in result.output
    store = open_store(url)
    assert store.query_readings("import-test") == []
    store.close()


def test_metric_tips_into_an_inch_gauge_are_refused(site: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["import", str(data_file(THARANDT)), "--site", str(site), "--device", "rain-in",
                                      "--store", f"sqlite:///{tmp_path / 's.db'}", *THARANDT_ARGS])
    assert result.exit_code == 2
    assert "0.01 in" in result.output and "0.2 mm" in result.output


def test_trout_creek_range_cm_stored_as_distance_mm(site: Path, tmp_path: Path) -> None:
    path = data_file(TROUT)
    with path.open(newline="") as f:
        lines = list(csv.reader(f))
    header = [h.strip() for h in lines[1]]
    col = header.index("Range [cm]")
    data = lines[2:]
    mm = {datetime.strptime(r[0], "%Y/%m/%d %H:%M:%S").replace(tzinfo=UTC): Decimal(r[col]) * 10 for r in data}
    url = f"sqlite:///{tmp_path / 'store.db'}"
    args = [str(path), "--site", str(site), "--device", "stage-1", "--store", url, "--skip-rows", "1",
            "--value-column", "Range [cm]=distance"]
    summary = run_import(*args)
    assert summary["rows_read"] == len(data) == 15780
    assert summary["readings_stored"] == len(mm) == 15780
    store = open_store(url)
    stored = store.query_readings("import-test", device="stage-1", quantity="distance")
    assert {r.unit for r in stored} == {"mm"}
    assert {r.time: r.value for r in stored} == {t: float(v) for t, v in mm.items()}
    low = min(stored, key=lambda r: r.value)  # flood: 266 cm at 2021-08-28 04:46:46 UTC (SOURCES.md)
    assert (low.value, low.time) == (2660.0, datetime(2021, 8, 28, 4, 46, 46, tzinfo=UTC))
    store.close()
    assert run_import(*args)["readings_stored"] == 0


@pytest.mark.influxdb
def test_tharandt_into_influxdb1_twice_is_stored_once(site: Path, influx_server: servers.InfluxDB1) -> None:
    path = data_file(THARANDT)
    expected = tharandt_by_minute(path)
    url = influx_server.store_url(f"import_{uuid.uuid4().hex[:8]}")
    args = [str(path), "--site", str(site), "--device", "rain-1", "--store", url, *THARANDT_ARGS]
    first = run_import(*args)
    assert first["readings_made"] == len(expected) and first["dead_lettered"] == {}
    store = open_store(url)
    stored = store.query_readings("import-test", device="rain-1")
    assert {r.time: r.value for r in stored} == dict(expected)
    store.close()

    run_import(*args)  # same measurement + tags + timestamp: overwrites itself
    store = open_store(url)
    again = store.query_readings("import-test", device="rain-1")
    assert len(again) == len(expected)
    assert sum(r.value for r in again) == 2631
    store.close()
