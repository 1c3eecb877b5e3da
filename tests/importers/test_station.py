"""`stormwatch station import`: NOAA GHCN-Daily and TD-3240 (HPD) station records (issue 16).

The lines are written here in the layouts the formats document (NCEI ghcnd-readme: ID 1-11, year
12-15, month 16-17, element 18-21, then per day a 5-character value in tenths of mm and three flag
characters; NCDC TD-3240: ``HPD``, COOP station 4-9, division 10-11, ``HPCP`` 12-15, units 16-17
(``HI`` hundredths of an inch, ``HT`` tenths of a mm), year, month, 2 filler, day, the number of
values, then per value ``HHMM`` (the hour ending then, local standard time), a 6-digit amount and
two flags; hour 2500 is the day's total). Expected values are worked out by hand below.
"""

from __future__ import annotations

from datetime import UTC, datetime, time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stormwatch.app.cli import app
from stormwatch.config import parse_site
from stormwatch.importers.station import StationImportError, detect_station_format, import_station
from stormwatch.profiles import ProfileLibrary
from stormwatch.rain import PRECIPITATION, STATION_GATEWAY
from stormwatch.stores.sqlite import SqliteStore


def site(station: str = "USC00304174", interval: int = 1440, tz: str = "America/New_York") -> object:
    return parse_site({
        "site": {"id": "elm", "jurisdiction": "ch133", "timezone": tz},
        "devices": [{"id": "rain-1", "profile": "tipping_bucket_modbus_counter",
                     "transport": {"kind": "modbus-tcp", "host": "127.0.0.1"}}],
        "rain_gauge": "rain-1",
        "fallback_gauge": {"station": station, "distance_km": 3.2, "interval_minutes": interval},
    }, "elm.yaml", ProfileLibrary())


def day(value: int, m: str = " ", q: str = " ") -> str:
    return f"{value:5d}{m}{q} "


def ghcn_line(station: str = "USC00304174", element: str = "PRCP") -> str:
    # September 2018: day 1 0, day 2 254 (25.4 mm), day 3 missing, day 4 12 that failed QC ("I"),
    # day 5 a trace, days 6..30 zero, day 31 does not exist (-9999)
    days = [day(0), day(254), day(-9999), day(12, q="I"), day(0, m="T")] + [day(0)] * 25 + [day(-9999)]
    return f"{station}201809{element}" + "".join(days)


def hpd_line(units: str, dd: int, groups: list[tuple[str, int, str]]) -> str:
    return f"HPD30417400HPCP{units}201809" + f"00{dd:02d}{len(groups):03d}" + "".join(
        f"{hh}{amount:06d}{flag} " for hh, amount, flag in groups)


def test_ghcn_daily_values_gaps_and_day_end(tmp_path: Path) -> None:
    f = tmp_path / "USC00304174.dly"
    f.write_text(ghcn_line() + "\n" + ghcn_line(element="TMAX") + "\n", encoding="utf-8")
    assert detect_station_format(f.read_text().splitlines()) == "ghcn-daily"
    store = SqliteStore(tmp_path / "s.db")
    summary = import_station(f, site(), store, "ghcn-daily", day_ends=time(7, 0))  # type: ignore[arg-type]
    # 30 September days: 28 values (days 1, 2, 5 and 6..30), 2 gaps (3 missing, 4 failed QC)
    assert (summary.values, summary.gaps, summary.stored) == (28, 2, 28)
    assert summary.rejects == {"failed_qc": 1}
    rows = store.query_readings("elm", device="USC00304174", quantity=PRECIPITATION)
    by_end = {r.time: r.value for r in rows}
    # the day of 2 Sep ends at the 07:00 observation, EDT (UTC-4): 11:00Z
    assert by_end[datetime(2018, 9, 2, 11, tzinfo=UTC)] == 25.4
    assert by_end[datetime(2018, 9, 5, 11, tzinfo=UTC)] == 0.0  # trace
    assert datetime(2018, 9, 3, 11, tzinfo=UTC) not in by_end and datetime(2018, 9, 4, 11, tzinfo=UTC) not in by_end
    assert {r.unit for r in rows} == {"mm"} and {r.gateway for r in rows} == {STATION_GATEWAY}
    again = import_station(f, site(), store, "ghcn-daily", day_ends=time(7, 0))  # type: ignore[arg-type]
    assert (again.stored, again.already_stored) == (0, 28)
    store.close()


def test_hpd_hours_in_local_standard_time(tmp_path: Path) -> None:
    f = tmp_path / "3240.txt"
    f.write_text("\n".join([
        hpd_line("HI", 2, [("0800", 12, " "), ("0900", 34, " "), ("2500", 46, " ")]),
        hpd_line("HI", 3, [("1500", 99999, "M"), ("1600", 7, "A"), ("2500", 7, " ")]),
        hpd_line("HT", 4, [("2400", 25, " "), ("2500", 25, " ")]),
    ]) + "\n", encoding="utf-8")
    assert detect_station_format(f.read_text().splitlines()) == "hpd"
    store = SqliteStore(tmp_path / "s.db")
    summary = import_station(f, site("USC00304174", 60), store, "hpd")  # type: ignore[arg-type]
    assert (summary.values, summary.gaps) == (3, 2)  # 15:00 missing, 16:00 an accumulated amount
    rows = {(r.time, r.value, r.unit) for r in store.query_readings("elm", device="USC00304174")}
    # hour ending 08:00 EST (standard time, UTC-5, although New York keeps EDT in September): 13:00Z
    assert rows == {(datetime(2018, 9, 2, 13, tzinfo=UTC), 0.12, "[in_i]"),
                    (datetime(2018, 9, 2, 14, tzinfo=UTC), 0.34, "[in_i]"),
                    (datetime(2018, 9, 5, 5, tzinfo=UTC), 2.5, "mm")}  # hour ending 24:00 on the 4th
    store.close()


def test_refusals_name_the_problem(tmp_path: Path) -> None:
    f = tmp_path / "other.dly"
    f.write_text(ghcn_line(station="USC00999999") + "\n", encoding="utf-8")
    store = SqliteStore(tmp_path / "s.db")
    with pytest.raises(StationImportError, match="holds station USC00999999, not the site's"):
        import_station(f, site(), store, "ghcn-daily")  # type: ignore[arg-type]
    with pytest.raises(StationImportError, match="1440-minute values but the site's fallback_gauge has "
                                                 "interval_minutes: 60"):
        import_station(f, site(interval=60), store, "ghcn-daily")  # type: ignore[arg-type]
    assert store.query_readings("elm") == []
    store.close()


def test_cli_help_and_one_line_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    help_text = runner.invoke(app, ["station", "import", "--help"]).output
    assert "fallback_gauge" in help_text and "--day-ends" in help_text
    s = tmp_path / "site.yaml"
    s.write_text("site: {id: elm, jurisdiction: ch133}\ndevices:\n  - id: rain-1\n"
                 "    profile: tipping_bucket_modbus_counter\n"
                 "    transport: {kind: modbus-tcp, host: 127.0.0.1}\nrain_gauge: rain-1\n", encoding="utf-8")
    f = tmp_path / "x.dly"
    f.write_text(ghcn_line() + "\n", encoding="utf-8")
    result = runner.invoke(app, ["station", "import", str(f), "--site", str(s), "--store",
                                 f"sqlite:///{tmp_path}/s.db"])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and "has no fallback_gauge" in result.output
