"""Times without a zone: every command that reads a file's times reads a zone-less time in the
site's zone (``--tz`` overrides, a header naming its zone wins), says which zone it used, and
never guesses where a time cannot be read (docs/importing.md, "Times and zones").

Expected instants by hand: America/New_York is EDT = UTC-4 in June, EST = UTC-5 in winter; it
springs forward at 02:00 on 10 March 2024 (02:00-02:59 never shows on its clocks).
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stormwatch.app.cli import app
from stormwatch.stores.urls import open_store

NEW_YORK_SITE = """
site: {id: zones, jurisdiction: ch133, timezone: America/New_York}
gateway_id: gw-zones
devices:
  - {id: rain-1, profile: tipping_bucket_0_2mm_modbus_counter, transport: {kind: modbus-tcp, host: 127.0.0.1}}
  - {id: sonde-1, profile: ysi_exo_turbidity, transport: {kind: serial, port: /dev/null}}
rain_gauge: rain-1
fallback_gauge: {station: USC00304174, interval_minutes: 1440}
"""


def z(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.fixture()
def site(tmp_path: Path) -> Path:
    path = tmp_path / "site.yaml"
    path.write_text(NEW_YORK_SITE, encoding="utf-8")
    return path


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def stored(url: str, quantity: str) -> list[tuple[datetime, float]]:
    store = open_store(url)
    try:
        return sorted((r.time, float(r.value)) for r in store.query_readings("zones", quantity=quantity))
    finally:
        store.close()


def test_import_reads_a_logger_files_times_in_the_sites_zone_and_says_so(site: Path, tmp_path: Path) -> None:
    """A New York site's 14:00 is 18:00 UTC (EDT), not 14:00 UTC; --tz reads the file in another
    zone; the summary names the zone and where it came from."""
    path = tmp_path / "turb.csv"
    path.write_text("time,turb\n2024-06-03 14:00,12.5\n2024-06-03 14:15,13.0\n", encoding="utf-8")
    url = f"sqlite:///{tmp_path / 's.db'}"
    code, out, _ = run("import", str(path), "--site", str(site), "--device", "sonde-1", "--store", url,
                       "--value-column", "turb=turbidity:FNU")
    assert code == 0, out
    assert stored(url, "turbidity") == [(z("2024-06-03T18:00"), 12.5), (z("2024-06-03T18:15"), 13.0)]
    assert ("  times:            2 times without an offset, read in America/New_York (the site's zone; "
            "--tz ZONE to read them in another)") in out.splitlines()

    other = f"sqlite:///{tmp_path / 'utc.db'}"
    code, out, _ = run("import", str(path), "--site", str(site), "--device", "sonde-1", "--store", other,
                       "--value-column", "turb=turbidity:FNU", "--tz", "Etc/GMT+5", "--json")
    assert code == 0, out
    summary = json.loads(out.splitlines()[-1])
    assert (summary["tz"], summary["tz_source"], summary["local_times"]) == ("Etc/GMT+5", "--tz", 2)
    assert stored(other, "turbidity") == [(z("2024-06-03T19:00"), 12.5), (z("2024-06-03T19:15"), 13.0)]


def test_rain_of_a_local_evening_counts_in_that_local_day(site: Path, tmp_path: Path) -> None:
    """Tips at 22:30 local on 3 June are 02:30 UTC on 4 June: read as UTC they would fall on the
    3rd's UTC day and move the daily total; in the site's zone they are the site's 3 June."""
    path = tmp_path / "tips.csv"
    path.write_text("time,rain\n2024-06-03 22:30,0.2\n2024-06-03 22:31,0.4\n", encoding="utf-8")
    url = f"sqlite:///{tmp_path / 's.db'}"
    code, out, _ = run("import", str(path), "--site", str(site), "--device", "rain-1", "--store", url,
                       "--tip-mm", "0.2")
    assert code == 0, out
    assert stored(url, "rain_tips") == [(z("2024-06-04T02:30"), 1.0), (z("2024-06-04T02:31"), 2.0)]


def test_times_with_an_offset_or_a_zone_in_the_header_need_no_zone(site: Path, tmp_path: Path) -> None:
    offsets = tmp_path / "offsets.csv"
    offsets.write_text("time,turb\n2024-06-03T14:00:00-04:00,12.5\n", encoding="utf-8")
    header = tmp_path / "header.csv"
    header.write_text("Time [UTC],turb\n2024-06-03 14:00,7.5\n", encoding="utf-8")
    for path, when, value, note in (
            (offsets, "2024-06-03T18:00", 12.5, "every time with its UTC offset (no zone needed)"),
            (header, "2024-06-03T14:00", 7.5, "1 time without an offset, read in UTC (the zone the file's header "
                                              "names)")):
        url = f"sqlite:///{tmp_path / (path.stem + '.db')}"
        code, out, _ = run("import", str(path), "--site", str(site), "--device", "sonde-1", "--store", url,
                           "--value-column", "turb=turbidity:FNU")
        assert code == 0, out
        assert stored(url, "turbidity") == [(z(when), value)]
        assert f"  times:            {note}" in out.splitlines()


def test_replay_says_the_zone_it_read_the_times_in(tmp_path: Path) -> None:
    """A replay has no site: zone-less times are UTC unless --tz names the logger's zone, and the
    output says which -- the storm's times move with it (14:00 New York = 18:00 UTC)."""
    path = tmp_path / "storm.csv"
    # 20 rows of 1.0 mm = 5 tips of 0.2 mm each: 100 tips = 20 mm >= 0.5 in; then 7 dry hours end the storm
    path.write_text("time,rain\n" + "".join(f"2024-06-03 14:{m:02d},1.0\n" for m in range(0, 20))
                    + "2024-06-03 21:30,0\n", encoding="utf-8")
    code, out, _ = run("replay", str(path), "--tip-mm", "0.2")
    assert code == 0, out
    assert ("times: 21 times without an offset, read in UTC (no site to take a zone from; --tz ZONE for the "
            "logger's clock)") in out.splitlines()
    code, out, err = run("replay", str(path), "--tip-mm", "0.2", "--tz", "America/New_York", "--json")
    assert code == 0, err
    due = json.loads(out.splitlines()[0])
    assert due["kind"] == "storm_inspection_due"
    assert datetime.fromisoformat(due["storm_start"]) == z("2024-06-03T18:00")
    assert "times: 21 times without an offset, read in America/New_York (--tz)" in err.splitlines()


def test_station_import_says_its_zone_and_refuses_a_day_end_the_clocks_skip(site: Path, tmp_path: Path) -> None:
    """GHCN-Daily days ending at --day-ends 02:30: on 10 March 2024 New York's clocks skip 02:30, so
    that day's value is refused (bad_time), never moved to 03:30 EDT or 02:30 EST; 9 March ends at
    02:30 EST = 07:30 UTC."""
    days = ["  127    "] * 9 + ["   51    "] + ["    0    "] * 21  # 12.7 mm on days 1-9, 5.1 mm on the 10th
    path = tmp_path / "USC00304174.dly"
    path.write_text("USC00304174202403PRCP" + "".join(d[:8] for d in days) + "\n", encoding="utf-8")
    url = f"sqlite:///{tmp_path / 's.db'}"
    code, out, _ = run("station", "import", str(path), "--site", str(site), "--store", url, "--day-ends", "02:30",
                       "--json")
    assert code == 0, out
    summary = json.loads(out.splitlines()[-1])
    assert summary["rejected"] == {"bad_time": 1}
    assert "day 10" in summary["first_rejected"] and "does not exist in America/New_York" in summary["first_rejected"]
    assert summary["times"] == ("days end at 02:30 in America/New_York (the site's zone; --tz ZONE to read them in "
                                "another)")
    values = dict(stored(url, "precipitation"))
    assert values[z("2024-03-09T07:30")] == 12.7
    assert len(values) == 30 and z("2024-03-10T07:30") not in values and z("2024-03-10T06:30") not in values


def _bundle_with(bundle: Path, out: Path, time_text: str) -> None:
    """``bundle`` with the first reading's time replaced by ``time_text``, its checksums made anew
    (a bundle another program wrote: the checksums hold, the row does not)."""
    with zipfile.ZipFile(bundle) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    lines = members["readings.csv"].decode("utf-8").splitlines(keepends=True)
    fields = lines[1].split(",")
    fields[5] = time_text
    lines[1] = ",".join(fields)
    members["readings.csv"] = "".join(lines).encode("utf-8")
    manifest = json.loads(members["manifest.json"])
    manifest["members"]["readings.csv"]["sha256"] = hashlib.sha256(members["readings.csv"]).hexdigest()
    manifest["members"]["readings.csv"]["bytes"] = len(members["readings.csv"])
    members["manifest.json"] = json.dumps(manifest).encode("utf-8")
    members["SHA256SUMS"] = "".join(f"{hashlib.sha256(data).hexdigest()}  {name}\n" for name, data in members.items()
                                    if name != "SHA256SUMS").encode("utf-8")
    with zipfile.ZipFile(out, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)


def test_import_archive_refuses_a_time_without_its_offset(site: Path, tmp_path: Path) -> None:
    """An archive writes every time in UTC with its offset: a zone-less one is refused with its line,
    never read in a guessed zone (nor a traceback)."""
    path = tmp_path / "turb.csv"
    path.write_text("time,turb\n2024-06-03 14:00,12.5\n", encoding="utf-8")
    url = f"sqlite:///{tmp_path / 's.db'}"
    assert run("import", str(path), "--site", str(site), "--device", "sonde-1", "--store", url,
               "--value-column", "turb=turbidity:FNU")[0] == 0
    bundle = tmp_path / "b.zip"
    code, out, _ = run("archive", "--site", str(site), "--from", "2024-06-03", "--until", "2024-06-04", "-o",
                       str(bundle), "--store", url, "--no-work-orders")
    assert code == 0, out
    edited = tmp_path / "edited.zip"
    _bundle_with(bundle, edited, "2024-06-03T14:00:00")
    result = CliRunner().invoke(app, ["import-archive", str(edited), "--store", f"sqlite:///{tmp_path / 't.db'}",
                                      "--state-dir", str(tmp_path / "state")])
    assert result.exit_code == 2, result.output
    assert result.output.splitlines()[-1] == (
        f"error: {edited}: readings.csv line 2: time '2024-06-03T14:00:00' has no UTC offset (an archive's times "
        "are UTC, written with +00:00; the bundle was made or edited by something else)")


def test_demo_rain_file_is_read_in_the_sites_zone(tmp_path: Path) -> None:
    """`demo --rain-file` reads a zone-less record in the demo site's zone (America/New_York): its
    14:30 tip is 18:30 UTC, outside a scenario window of 14:00-15:00 UTC -- refused before anything
    starts, naming where the tips are and how their times were read. A --from the clocks skip is
    refused too, never shifted."""
    rain = tmp_path / "rain.csv"
    rain.write_text("time,rain\n2024-06-01 14:30,0.2\n2024-06-01 14:40,0.2\n", encoding="utf-8")
    scenario = tmp_path / "window.yaml"
    scenario.write_text(f"start: 2024-06-01T12:00:00Z\nduration_h: 8\n"
                        f"rain: {{record: {{path: {rain}, tip_size: '0.2', start: '2024-06-01T14:00:00Z', "
                        f"end: '2024-06-01T15:00:00Z'}}}}\n", encoding="utf-8")
    code, out, err = run("demo", "--scenario", str(scenario), "--speed", "10000", "--state-dir", str(tmp_path / "d"))
    assert code == 2, out
    assert (f"{rain}: no rain from 2024-06-01T14:00:00+00:00 until 2024-06-01T15:00:00+00:00: its tips run from "
            "2024-06-01T18:30:00+00:00 to 2024-06-01T18:40:00+00:00 (2 times without an offset, read in "
            "America/New_York (the site's zone; --tz ZONE to read them in another))") in err

    code, out, err = run("demo", "--rain-file", str(rain), "--tip-mm", "0.2", "--from", "2024-03-10T02:30:00",
                         "--speed", "10000", "--state-dir", str(tmp_path / "d2"))
    assert code == 2, out
    assert "the window's start (--from/--until): '2024-03-10T02:30:00' does not exist in America/New_York" in err \
        or "2024-03-10T02:30:00 does not exist in America/New_York" in err, err
