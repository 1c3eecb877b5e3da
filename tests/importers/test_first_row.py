"""Every rain row is bounded by the world-record envelope -- the file's first row and a row after a
rejected one too (the envelope: 1.5 x 422 x D^0.475 mm, D in hours; docs/reference/rain-records.md).

A row with no accepted rain row before it is judged over the file's own row interval: the median of
the spacings between its distinct row times (importers/rows.py ``row_interval``), a day when the
file has a single row time. ``import`` and ``replay`` run the same code (replay imports).

Expected values by hand, tips of 0.01 in = 0.254 mm:
* over 60 s: 1.5 x 422 x (1/60)^0.475 = 633 x 0.14300 = 90.52 mm = 356.4 -> 356 tips;
* over 120 s: 633 x (1/30)^0.475 = 633 x 0.19870 = 125.78 mm = 495.2 -> 495 tips;
* over 24 h: 633 x 24^0.475 = 633 x 4.52487 = 2864.2 mm = 11276.5 -> 11276 tips (100,000 in is
  10,000,000 tips: refused).
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from stormwatch.app.cli import app
from stormwatch.stores.urls import open_store


def _import(path: Path, site_file: Path, url: str) -> dict[str, object]:
    result = CliRunner().invoke(app, ["import", str(path), "--site", str(site_file), "--device", "rain-in",
                                      "--tip-in", "0.01", "--tips-per-row", "count", "--store", url, "--json"],
                                catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_a_single_row_of_100000_in_is_not_rain_import_and_replay(site: Path, tmp_path: Path) -> None:
    big = tmp_path / "big.csv"
    big.write_text("time,rain\n2026-06-01 10:01,100000\n", encoding="utf-8")
    url = f"sqlite:///{tmp_path / 's.db'}"
    result = CliRunner().invoke(app, ["import", str(big), "--site", str(site), "--device", "rain-in",
                                      "--tip-in", "0.01", "--store", url], catch_exceptions=False)
    # nothing stored: exit 1 naming the reason and the interval used
    assert result.exit_code == 1, result.output
    assert "beyond_envelope 1" in result.output
    assert "10000000 tips" in result.output and "at most 11276" in result.output
    assert "one day, the file has a single row time" in result.output
    store = open_store(url)
    try:
        assert store.query_readings("import-test", device="rain-in") == []
    finally:
        store.close()
    replay = CliRunner().invoke(app, ["replay", str(big), "--tip-in", "0.01"], catch_exceptions=False)
    assert replay.exit_code == 2, replay.output
    assert "no rain readings to replay: 1 of 1 row rejected (beyond_envelope 1)" in replay.output


def test_first_row_judged_over_the_median_spacing(site: Path, tmp_path: Path) -> None:
    # rows a minute apart (one odd 2-minute step: the median is still 60 s): the first row may hold 356 tips
    for first, kept in ((356, True), (357, False)):
        path = tmp_path / f"first{first}.csv"
        path.write_text("time,rain\n"
                        f"2026-06-01 10:00,{first}\n"
                        "2026-06-01 10:01,1\n"
                        "2026-06-01 10:02,0\n"
                        "2026-06-01 10:04,1\n", encoding="utf-8")
        summary = _import(path, site, f"sqlite:///{tmp_path / f's{first}.db'}")
        if kept:
            assert summary["rejected_rows"] == {} and summary["tips"] == 358
        else:
            assert summary["rejected_rows"] == {"beyond_envelope": 1} and summary["tips"] == 2
            (detail,) = summary["rejects"]  # type: ignore[misc]
            assert detail.startswith(f"{path}:2: 357 tips (90.678 mm) in its row interval "
                                     "(the file's median row spacing, 1 min;")
            assert "at most 356" in detail


def test_a_row_after_a_rejected_row_is_measured_from_the_last_accepted_one(site: Path, tmp_path: Path) -> None:
    path = tmp_path / "after.csv"
    path.write_text("time,rain\n"
                    "2026-06-01 10:00,0\n"        # accepted (a start marker)
                    "2026-06-01 10:01,100000\n"   # line 3: beyond the envelope over 60 s (356)
                    "2026-06-01 10:02,496\n"      # line 4: 496 > 495 since 10:00 (120 s): beyond too
                    "2026-06-01 10:03,1\n", encoding="utf-8")
    summary = _import(path, site, f"sqlite:///{tmp_path / 's.db'}")
    assert summary["rejected_rows"] == {"beyond_envelope": 2}
    assert [d.split(": ")[0] for d in summary["rejects"]] == [f"{path}:3", f"{path}:4"]  # type: ignore[union-attr]
    # 10:00 in the site's zone, America/New_York: 10:00 EDT = 14:00 UTC
    assert "since the previous rain row at 2026-06-01T14:00:00+00:00" in summary["rejects"][1]  # type: ignore[index]
    assert summary["tips"] == 1
    path.write_text(path.read_text(encoding="utf-8").replace(",496\n", ",495\n"), encoding="utf-8")
    summary = _import(path, site, f"sqlite:///{tmp_path / 's2.db'}")
    assert summary["rejected_rows"] == {"beyond_envelope": 1} and summary["tips"] == 496


def test_an_import_reports_its_progress_through_the_writes(site: Path, tmp_path: Path) -> None:
    """``import_file``'s progress is a fraction of the whole import (the CLI shows it with the shared
    ``cliutil.progress`` after a second): the rows are the first 10 %, each written batch the rest --
    3 readings in batches of 1: 0.1, then 0.1 + 0.9 x 1/3 = 0.4, 0.7, 1.0, and 1.0 at the end."""
    from stormwatch.alerts.sitefile import load_site_file
    from stormwatch.clock import WallClock
    from stormwatch.importers.cli import build_options
    from stormwatch.importers.load import import_file
    from stormwatch.profiles import ProfileLibrary

    path = tmp_path / "three.csv"
    path.write_text("time,rain\n2026-06-01 10:00,1\n2026-06-01 10:01,1\n2026-06-01 10:02,1\n", encoding="utf-8")
    options = build_options("auto", None, None, None, "UTC", [], None, "0.01", None, "count", 0, [])
    profiles = ProfileLibrary()
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    seen: list[float] = []
    try:
        summary = import_file(path, load_site_file(site, profiles), "rain-in", profiles, store, options, WallClock(),
                              seen.append, batch_size=1)
    finally:
        store.close()
    assert summary.readings_stored == 3
    assert [round(f, 6) for f in seen] == [0.1, 0.4, 0.7, 1.0, 1.0]
