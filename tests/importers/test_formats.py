"""Campbell Scientific TOA5 and Onset HOBOware files written here with realistic headers, and the
handling of gaps and malformed rows: every expected value is worked out by hand in the comments."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stormwatch.app.cli import app
from stormwatch.importers.detect import detect_format
from stormwatch.importers.table import read_lines
from stormwatch.stores.urls import open_store
from tests.importers_support import SITE_YAML

TOA5 = """\
"TOA5","SiteLogger","CR1000X","4711","CR1000X.Std.05.02","CPU:stormwatch.CR1X","27311","Table15"
"TIMESTAMP","RECORD","BattV_Min","Rain_mm_Tot","Turb_FNU","WTemp_C"
"TS","RN","Volts","mm","FNU","Deg C"
"","","Min","Tot","Smp","Smp"
"2024-05-01 00:00:00",0,12.61,0,3.4,14.2
"2024-05-01 00:15:00",1,12.60,0.4,"NAN",14.1
"2024-05-01 00:30:00",2,12.60,1.2,5.9,-9999
"2024-05-01 00:45:00",3,12.59,,6.1,14.0
"2024-05-01 01:00:00",4,12.59,0.3,6.3,13.9
"2024-05-01 01:15:00",5,12.58,0.2,abc,13.9
"2024-05-01 01:3O:00",6,12.58,0,6.0,13.8
"2024-05-01 01:45:00",7,12.58
"2024-05-01 02:00:00",8,12.57,0.2,5.8,13.8
"""
# TOA5 by hand (--tz Etc/GMT+5 = UTC-5 all year, so UTC = logger time + 5 h); data lines 5..13 = 9 rows.
#   Always rejected: line 11 (letter O in the time: bad_time), line 12 (3 fields: too_few_fields).
#   Rain import (Rain_mm_Tot / 0.2 mm): line 9 rejected (0.3 mm is not whole tips); 00:00 0, 00:15 2,
#     00:30 6, 00:45 empty = gap, 01:15 1, 02:00 1 -> 5 readings, 10 tips.
#   Probe import: line 10 rejected ("abc" turbidity); turbidity 00:15 "NAN" and temperature 00:30
#     -9999 are gaps; the rest (00:00, 00:30/00:15, 00:45, 01:00, 02:00) are stored.

HOBO = (
    '"Plot Title: 20631045"\r\n'
    '"#","Date Time, GMT-04:00","Temp, °C (LGR S/N: 20631045, SEN S/N: 20631045)",'
    '"Coupler Attached (LGR S/N: 20631045)","Host Connected (LGR S/N: 20631045)","End Of File (LGR S/N: 20631045)"\r\n'
    "1,06/21/24 11:45:00 AM,21.544,,,\r\n"
    "2,06/21/24 12:00:00 PM,21.448,,,\r\n"
    "3,06/21/24 12:15:00 PM,,Logged,,\r\n"
    "4,06/21/24 12:30:00 PM,21.353,,,\r\n"
    "5,06/21/24 12:32:10 PM,,,Logged,Logged\r\n"
)
# HOBO by hand: GMT-04:00 -> UTC = local + 4 h; 11:45 AM -> 15:45Z, 12:00 PM (noon) -> 16:00Z,
# 12:30 PM -> 16:30Z; rows 3 and 5 have no temperature (event rows): gaps, not zeros.

HOBO_RAIN = (
    '"Plot Title: RG3-M 10472233"\n'
    '"#","Date Time, GMT+01:00","Event, units (LGR S/N: 10472233, SEN S/N: 10472233)"\n'
    "1,09/23/18 12:18:05 PM,1\n"
    "2,09/23/18 12:18:41 PM,2\n"
    "3,09/23/18 12:18:41 PM,3\n"
    "4,09/23/18 01:02:00 PM,4\n"
)
# HOBO rain (every row one 0.2 mm tip, GMT+01:00 -> UTC = local - 1 h): 11:18:05Z 1 tip,
# 11:18:41Z 2 tips (same second: both kept), 12:02:00Z 1 tip; 4 tips total.


@pytest.fixture()
def site(tmp_path: Path) -> Path:
    path = tmp_path / "site.yaml"
    path.write_text(SITE_YAML, encoding="utf-8")
    return path


def invoke(*args: str) -> dict[str, object]:
    result = CliRunner().invoke(app, ["import", *args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_toa5_rain_gaps_and_malformed_rows(site: Path, tmp_path: Path) -> None:
    path = tmp_path / "CR1000X_Table15.dat"
    path.write_text(TOA5, encoding="ascii")
    assert detect_format(read_lines(path)) == "toa5"
    url = f"sqlite:///{tmp_path / 's.db'}"
    summary = invoke(str(path), "--site", str(site), "--device", "rain-1", "--store", url, "--tz", "Etc/GMT+5",
                     "--tips", "0.2", "--tips-column", "Rain_mm_Tot")
    assert summary["format"] == "toa5"
    assert summary["rows_read"] == 9
    assert summary["rejected_rows"] == {"not_whole_tips": 1, "bad_time": 1, "too_few_fields": 1}
    # "abc" is in Turb_FNU, which this import does not read: line 10 is a good rain row (0.2 mm = 1 tip)
    assert summary["tips"] == 10 and summary["readings_stored"] == 5 and summary["gaps"] == 1
    rejects = summary["rejects"]
    assert isinstance(rejects, list)
    assert [r.split(": ")[0] for r in rejects] == [f"{path}:9", f"{path}:11", f"{path}:12"]
    store = open_store(url)
    rain = {r.time: r.value for r in store.query_readings("import-test", device="rain-1")}
    assert rain == {datetime(2024, 5, 1, 5, 0, tzinfo=UTC): 0, datetime(2024, 5, 1, 5, 15, tzinfo=UTC): 2,
                    datetime(2024, 5, 1, 5, 30, tzinfo=UTC): 6, datetime(2024, 5, 1, 6, 15, tzinfo=UTC): 1,
                    datetime(2024, 5, 1, 7, 0, tzinfo=UTC): 1}
    store.close()


def test_toa5_probe_columns_with_nan_and_sentinel_gaps(site: Path, tmp_path: Path) -> None:
    path = tmp_path / "CR1000X_Table15.dat"
    path.write_text(TOA5, encoding="ascii")
    url = f"sqlite:///{tmp_path / 's.db'}"
    summary = invoke(str(path), "--site", str(site), "--device", "sonde-1", "--store", url, "--tz", "Etc/GMT+5",
                     "--value-column", "Turb_FNU=turbidity", "--value-column", "WTemp_C=temperature")
    # line 9 is fine here (no rain column read), line 10 has "abc" -> not_a_number
    assert summary["rejected_rows"] == {"not_a_number": 1, "bad_time": 1, "too_few_fields": 1}
    assert summary["gaps"] == 2  # NAN turbidity at 00:15, -9999 temperature at 00:30
    store = open_store(url)
    turb = {r.time.hour * 60 + r.time.minute: r.value for r in store.query_readings(
        "import-test", device="sonde-1", quantity="turbidity")}
    temp = {r.time.hour * 60 + r.time.minute: r.value for r in store.query_readings(
        "import-test", device="sonde-1", quantity="temperature")}
    assert turb == {300: 3.4, 330: 5.9, 345: 6.1, 360: 6.3, 420: 5.8}
    assert temp == {300: 14.2, 315: 14.1, 345: 14.0, 360: 13.9, 420: 13.8}
    assert {r.unit for r in store.query_readings("import-test", device="sonde-1", quantity="temperature")} == {"Cel"}
    store.close()


def test_hobo_csv_offset_and_event_rows(site: Path, tmp_path: Path) -> None:
    path = tmp_path / "20631045.csv"
    path.write_bytes(HOBO.encode("cp1252"))  # HOBOware on Windows writes the degree sign in Windows-1252
    assert detect_format(read_lines(path)) == "hobo"
    url = f"sqlite:///{tmp_path / 's.db'}"
    summary = invoke(str(path), "--site", str(site), "--device", "sonde-1", "--store", url,
                     "--value-column", "Temp=temperature")
    assert summary["format"] == "hobo"
    assert (summary["rows_read"], summary["readings_stored"], summary["gaps"]) == (5, 3, 2)
    store = open_store(url)
    got = {r.time: r.value for r in store.query_readings("import-test", device="sonde-1")}
    assert got == {datetime(2024, 6, 21, 15, 45, tzinfo=UTC): 21.544, datetime(2024, 6, 21, 16, 0, tzinfo=UTC): 21.448,
                   datetime(2024, 6, 21, 16, 30, tzinfo=UTC): 21.353}
    store.close()


def test_hobo_rain_event_file_one_tip_per_row(site: Path, tmp_path: Path) -> None:
    path = tmp_path / "rg3m.csv"
    path.write_text(HOBO_RAIN, encoding="utf-8")
    url = f"sqlite:///{tmp_path / 's.db'}"
    summary = invoke(str(path), "--site", str(site), "--device", "rain-1", "--store", url, "--tips", "0.2",
                     "--tips-per-row", "row")
    assert summary["tips"] == 4 and summary["readings_stored"] == 3
    store = open_store(url)
    got = {r.time: r.value for r in store.query_readings("import-test", device="rain-1")}
    assert got == {datetime(2018, 9, 23, 11, 18, 5, tzinfo=UTC): 1, datetime(2018, 9, 23, 11, 18, 41, tzinfo=UTC): 2,
                   datetime(2018, 9, 23, 12, 2, tzinfo=UTC): 1}
    store.close()


def test_generic_count_per_row_in_local_time_with_conflicting_rows(site: Path, tmp_path: Path) -> None:
    path = tmp_path / "counts.txt"
    path.write_text(
        "exported by a contractor\n"
        "when\ttips\tturb\n"
        "2024-07-04 09:00\t0\t4.1\n"
        "2024-07-04 09:10\t3\t5.0\n"
        "2024-07-04 09:10\t3\t5.0\n"     # the same row again (overlapping download): stored once
        "2024-07-04 09:20\t-1\t5.2\n"    # negative count: rejected
        "2024-07-04 09:30\t2.5\t5.3\n"   # not a whole count: rejected
        "\n"
        "2024-07-04 09:40\t1\t7.7\n", encoding="utf-8")
    url = f"sqlite:///{tmp_path / 's.db'}"
    # EDT (UTC-4) in July: 09:00 local = 13:00Z
    summary = invoke(str(path), "--site", str(site), "--device", "rain-1", "--store", url, "--skip-rows", "1",
                     "--tz", "America/New_York", "--tips", "0.2", "--tips-column", "tips", "--tips-per-row", "count")
    assert summary["rows_read"] == 6
    assert summary["rejected_rows"] == {"negative_tips": 1, "not_whole_tips": 1}
    store = open_store(url)
    got = {r.time: r.value for r in store.query_readings("import-test", device="rain-1")}
    # the repeated 09:10 row is a second tip count at the same minute: summed, 3 + 3 (a tip file's rows add up)
    assert got == {datetime(2024, 7, 4, 13, 0, tzinfo=UTC): 0, datetime(2024, 7, 4, 13, 10, tzinfo=UTC): 6,
                   datetime(2024, 7, 4, 13, 40, tzinfo=UTC): 1}
    store.close()

    conflict = tmp_path / "turb.csv"
    conflict.write_text("time,turb_FNU\n2024-07-04T13:00:00Z,4.1\n2024-07-04T13:00:00Z,4.1\n"
                        "2024-07-04T13:00:00Z,9.9\n2024-07-04T13:05:00Z,4.2\n", encoding="utf-8")
    summary = invoke(str(conflict), "--site", str(site), "--device", "sonde-1", "--store", url,
                     "--value-column", "turb_FNU=turbidity:FNU")
    assert summary["duplicate_rows"] == 1 and summary["rejected_rows"] == {"conflicting_time": 1}
    assert summary["readings_stored"] == 2


def test_option_errors_exit_2_with_the_reason(site: Path, tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text("time,v\n2024-01-01T00:00:00Z,1\n", encoding="utf-8")
    runner = CliRunner()
    cases = [
        (["--value-column", "v"], "NAME=QUANTITY"),
        ([], "nothing to import"),
        (["--value-column", "nope=turbidity"], "no column named 'nope'"),
        (["--value-column", "v=turbidity", "--time-column", "99"],
         "no column '99': the file has 2 columns, indexes 0 to 1 (columns: time, v)"),
        (["--value-column", "v=turbidity", "--tz", "Mars/Olympus"], "unknown IANA time zone"),
        (["--tips", "0.2", "--tips-in", "0.01"], "not both"),
    ]
    for extra, message in cases:
        result = runner.invoke(app, ["import", str(path), "--site", str(site), "--device", "sonde-1",
                                     "--store", f"sqlite:///{tmp_path / 's.db'}", *extra])
        assert result.exit_code == 2, (extra, result.output)
        assert message in result.output, (extra, result.output)
