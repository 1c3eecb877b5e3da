"""Local times at a daylight-saving change (importers/table.TimeParser): a logger writing in local
time repeats an hour in November and skips one in March. Nothing is invented: the repeated hour is
read in order (the second 01:10 is an hour after the first 01:50, not before it), a time in the
skipped hour is a rejected row (``bad_time``), never a shifted reading.

Expected instants by hand, America/New_York (EDT = UTC-4, EST = UTC-5; 2024: back on 3 November at
02:00 EDT, forward on 10 March at 02:00 EST)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from stormwatch.stores.urls import open_store
from tests.importers_support import invoke

ARGS = ["--device", "sonde-1", "--value-column", "turb=turbidity:FNU", "--tz", "America/New_York",
        "--time-format", "%Y-%m-%d %H:%M", "--json"]


def _import(tmp_path: Path, site_path: Path, rows: str) -> tuple[dict[str, object], list[tuple[datetime, float]]]:
    path = tmp_path / "turb.csv"
    path.write_text("time,turb\n" + rows, encoding="utf-8")
    url = f"sqlite:///{tmp_path / 's.db'}"
    result = invoke(str(path), "--site", str(site_path), "--store", url, *ARGS)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    store = open_store(url)
    try:
        got = [(r.time, float(r.value)) for r in store.query_readings("import-test")]
    finally:
        store.close()
    return summary, sorted(got)


def z(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_the_repeated_hour_in_november_is_read_in_order(site: Path, tmp_path: Path) -> None:
    summary, got = _import(tmp_path, site, "2024-11-03 00:50,10\n"
                                           "2024-11-03 01:30,11\n"   # EDT (first occurrence)
                                           "2024-11-03 01:50,12\n"
                                           "2024-11-03 01:10,13\n"   # after 01:50 EDT: 01:10 EST
                                           "2024-11-03 01:40,14\n"   # EST
                                           "2024-11-03 02:10,15\n")  # EST (no second 02:10)
    assert summary["rejected_rows"] == {}
    assert got == [(z("2024-11-03T04:50"), 10.0), (z("2024-11-03T05:30"), 11.0), (z("2024-11-03T05:50"), 12.0),
                   (z("2024-11-03T06:10"), 13.0), (z("2024-11-03T06:40"), 14.0), (z("2024-11-03T07:10"), 15.0)]


def test_a_time_in_the_skipped_hour_of_march_is_rejected_not_shifted(site: Path, tmp_path: Path) -> None:
    summary, got = _import(tmp_path, site, "2024-03-10 01:50,20\n"
                                           "2024-03-10 02:30,21\n"   # line 3: never shown by a New York clock
                                           "2024-03-10 03:10,22\n")
    assert summary["rejected_rows"] == {"bad_time": 1}
    rejects = summary["rejects"]
    assert isinstance(rejects, list) and rejects[0].startswith(f"{tmp_path / 'turb.csv'}:3: ")
    assert "does not exist in America/New_York" in rejects[0]
    assert got == [(z("2024-03-10T06:50"), 20.0), (z("2024-03-10T07:10"), 22.0)]
