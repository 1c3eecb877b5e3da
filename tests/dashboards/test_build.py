"""The committed dashboard JSON is what the code generates (``stormwatch dashboards build``)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from stormwatch.app.cli import app
from stormwatch.dashboards.build import DASHBOARDS, JSON_DIR, build_all
from stormwatch.dashboards.common import pack_thresholds
from stormwatch.dashboards.influxql import InfluxQL


def test_committed_json_is_fresh(tmp_path: Path) -> None:
    """Fails when someone changes the code and forgets `stormwatch dashboards build`."""
    result = CliRunner().invoke(app, ["dashboards", "build", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    fresh = sorted(p.name for p in tmp_path.glob("*.json"))
    assert fresh == sorted(p.name for p in JSON_DIR.glob("*.json")) == sorted(f"{uid}.json" for uid in DASHBOARDS)
    for name in fresh:
        committed = (JSON_DIR / name).read_text(encoding="utf-8")
        assert (tmp_path / name).read_text(encoding="utf-8") == committed, (
            f"dashboards/json/{name} is stale: run `stormwatch dashboards build`")


def test_build_is_reproducible(tmp_path: Path) -> None:
    first = {p.name: p.read_bytes() for p in build_all(tmp_path / "a")}
    second = {p.name: p.read_bytes() for p in build_all(tmp_path / "b")}
    assert first == second


def test_influxql_target_json() -> None:
    q = InfluxQL('SELECT 1 FROM "readings"').ref_id("B").table().build().to_json()
    assert q["refId"] == "B" and q["rawQuery"] is True and q["resultFormat"] == "table"
    assert q["query"] == 'SELECT 1 FROM "readings"'


def test_thresholds_come_from_packs_and_depths_from_the_readings() -> None:
    # ch133: "0.5 inches of precipitation" (§133-7A(2)); "reduced by 50%" (§133-7A(1)).
    assert pack_thresholds("ch133") == (0.5, 0.5)
    board = json.loads((JSON_DIR / "stormwatch-site.json").read_text(encoding="utf-8"))
    # Stored rain describes itself (issue 11 item 3): no tip size is chosen in the dashboard; the rain
    # panels sum each reading's own depth and leave out what physics rules out.
    assert "tip_in" not in [v["name"] for v in board["templating"]["list"]]
    rain = [t["query"] for p in board["panels"] if "rain" in p.get("title", "").lower()
            for t in p.get("targets", [])]
    assert len(rain) == 3 and all('SUM("depth_in")' in q and '"flags" !~ /rain_beyond_envelope/' in q for q in rain)
    assert not any('"tips"' in q or "$tip_in" in q for q in rain)
    cumulative = next(p for p in board["panels"] if p["title"] == "Cumulative rainfall (in)")
    assert cumulative["fieldConfig"]["defaults"]["thresholds"]["steps"][1]["value"] == 0.5
    lost = next(p for p in board["panels"] if p["title"] == "Basin lost capacity (%)")
    assert lost["fieldConfig"]["defaults"]["thresholds"]["steps"][1]["value"] == 50.0
