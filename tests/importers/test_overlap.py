"""``import`` never counts rain twice: a row whose time another source's stored readings of the device
already cover (the site's gateway) is rejected ``overlaps_stored``; a row in a genuine gap of that
source is stored (importers/overlap.py; docs/importing.md, "Overlap with gateway data").

A gateway's tip count is the counter's rise since its previous reading, so a reading at f covers
(p, f]; a ``counter_reset`` reading covers only its instant (the rain since p is unknown), and so
does the gateway's first reading (a baseline). Real SQLite store, real CLI.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from typer.testing import CliRunner

from stormwatch.contract import TIP_UNIT, Reading
from stormwatch.importers.identity import import_seq
from stormwatch.stores.urls import open_store

T = datetime(2026, 6, 1, 10, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)


def _gw(minute: int, tips: int, flags: tuple[str, ...] = ()) -> Reading:
    when = T + minute * MIN
    return Reading(site="import-test", device="rain-in", quantity="rain_tips", value=tips, unit=TIP_UNIT,
                   time=when, gateway="gw-1", boot="b1", seq=import_seq(when), raw=str(tips), flags=flags,
                   tip_size="0.01 in")


def _gateway_readings() -> list[Reading]:
    return [
        _gw(0, 0),                                       # the gateway's first reading: a baseline
        *(_gw(m, 1) for m in range(1, 11)),              # 10:01 .. 10:10, one tip each: 10 tips
        _gw(30, 0, ("counter_reset",)),                  # 10:10 .. 10:30 unknown: a genuine gap
        *(_gw(m, 1) for m in range(31, 36)),             # 10:31 .. 10:35: 5 tips
        _gw(60, 3, ("counter_catch_up",)),               # 11:00: 3 tips since 10:35 (an outage counted)
    ]


def _import(path: Path, site_file: Path, url: str) -> tuple[int, str]:
    from stormwatch.app.cli import app

    result = CliRunner().invoke(app, ["import", str(path), "--site", str(site_file), "--device", "rain-in",
                                      "--tip-in", "0.01", "--tips-per-row", "count", "--store", url, "--json"],
                                catch_exceptions=False)
    return result.exit_code, result.output


def test_rows_the_gateway_covers_are_rejected_rows_in_its_gaps_stored(site: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = open_store(url)
    store.write_readings(_gateway_readings())
    store.close()
    path = tmp_path / "logger.csv"
    path.write_text("time,tips\n"
                    "2026-06-01T09:50:00Z,1\n"   # before the gateway's first reading: stored
                    "2026-06-01T10:05:00Z,2\n"   # line 3: inside (10:04, 10:05]: rejected
                    "2026-06-01T10:15:00Z,4\n"   # in the reset gap: stored
                    "2026-06-01T10:20:00Z,1\n"   # in the reset gap: stored
                    "2026-06-01T10:30:00Z,7\n"   # line 6: the reset reading's own instant: rejected
                    "2026-06-01T10:45:00Z,2\n"   # line 7: inside (10:35, 11:00], the catch-up: rejected
                    "2026-06-01T11:10:00Z,3\n",  # after the gateway's last reading: stored
                    encoding="utf-8")
    code, out = _import(path, site, url)
    assert code == 0, out
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["rejected_rows"] == {"overlaps_stored": 3}
    assert [d.split(": ")[0] for d in summary["rejects"]] == [f"{path}:3", f"{path}:6", f"{path}:7"]
    # by hand: 10:00 baseline + (10:00, 10:10] one stretch; 10:30 reset instant, (10:30, 10:35] and the
    # catch-up (10:35, 11:00] another; 1 + 10 + 1 + 5 + 1 = 18 gateway readings in 09:50 .. 11:10
    assert "gw-1 covering 2026-06-01T10:00:00Z .. 2026-06-01T10:10:00Z (18 of them" in summary["rejects"][0]
    assert "covering 2026-06-01T10:30:00Z .. 2026-06-01T11:00:00Z" in summary["rejects"][2]
    assert summary["tips"] == 1 + 4 + 1 + 3 and summary["readings_stored"] == 4
    store = open_store(url)
    try:
        rain = store.query_readings("import-test", device="rain-in", quantity="rain_tips")
        # by hand: gateway 10 + 5 + 3 = 18 tips, the logger's gaps 9: 27, never 27 + 2 + 7 + 2
        assert sum(int(r.value) for r in rain) == 27
    finally:
        store.close()


def test_a_file_wholly_inside_gateway_data_stores_nothing_and_says_why(site: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = open_store(url)
    store.write_readings(_gateway_readings())
    store.close()
    path = tmp_path / "three.csv"
    path.write_text("time,tips\n2026-06-01T10:02:00Z,1\n2026-06-01T10:05:00Z,1\n2026-06-01T10:08:00Z,1\n",
                    encoding="utf-8")
    code, out = _import(path, site, url)
    assert code == 1, out
    (error,) = [line for line in out.splitlines() if line.startswith("error:")]
    assert "nothing stored: 3 of 3 rows rejected (overlaps_stored 3)" in error
    assert "rain-in rain_tips at 2026-06-01T10:02:00Z: the store already holds rain-in's readings from gateway gw-1" \
        in error
    # the gateway's readings around the file: (10:01, 10:09], 7 of them at 10:02 .. 10:08
    assert "covering 2026-06-01T10:01:00Z .. 2026-06-01T10:09:00Z (7 of them in the file's span)" in error
    assert "the gateway's readings already cover these rows" in error


def test_a_probe_sample_is_refused_between_gateway_polls_stored_in_their_gap(site: Path, tmp_path: Path) -> None:
    """Another quantity: gateway samples at most two poll intervals apart (2 x 60 s) cover the time between
    them; a longer silence is a gap a logger file may fill."""
    from stormwatch.app.cli import app

    def turb(minute: int) -> Reading:
        when = T + minute * MIN
        return Reading(site="import-test", device="sonde-1", quantity="turbidity", value=5.0, unit="FNU",
                       time=when, gateway="gw-1", boot="b1", seq=import_seq(when), raw="5")

    url = f"sqlite:///{tmp_path / 's.db'}"
    store = open_store(url)
    store.write_readings([turb(m) for m in (0, 1, 2, 3, 4, 5, 30, 31, 32)])  # silent 10:05 .. 10:30
    store.close()
    path = tmp_path / "sonde.csv"
    path.write_text("time,turb\n2026-06-01T10:02:30Z,9.0\n2026-06-01T10:15:00Z,7.0\n2026-06-01T10:31:00Z,8.0\n",
                    encoding="utf-8")
    result = CliRunner().invoke(app, ["import", str(path), "--site", str(site), "--device", "sonde-1", "--store", url,
                                      "--value-column", "turb=turbidity:FNU", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["rejected_rows"] == {"overlaps_stored": 2} and summary["readings_stored"] == 1
    store = open_store(url)
    try:
        imported = [(r.time, r.value) for r in store.query_readings("import-test", device="sonde-1")
                    if r.gateway == "import"]
    finally:
        store.close()
    assert imported == [(T + 15 * MIN, 7.0)]
