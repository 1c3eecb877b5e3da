"""The committed dashboard JSON is what the code generates (``stormwatch dashboards build``)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from stormwatch.app.cli import app
from stormwatch.dashboards.build import DASHBOARDS, JSON_DIR, build_all
from stormwatch.dashboards.common import pack_thresholds, tip_sizes
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


def test_thresholds_and_gauges_come_from_packs_and_profiles() -> None:
    # ch133: "0.5 inches of precipitation" (§133-7A(2)); "reduced by 50%" (§133-7A(1)).
    assert pack_thresholds("ch133") == (0.5, 0.5)
    sizes = dict(tip_sizes())
    assert sizes["0.01 in"] * 100 == 1
    assert sizes["0.2 mm"] * 127 == 1  # 0.2 mm / 25.4 mm per inch = 1/127 in
    board = json.loads((JSON_DIR / "stormwatch-site.json").read_text(encoding="utf-8"))
    cumulative = next(p for p in board["panels"] if p["title"] == "Cumulative rainfall (in)")
    assert cumulative["fieldConfig"]["defaults"]["thresholds"]["steps"][1]["value"] == 0.5
    lost = next(p for p in board["panels"] if p["title"] == "Basin lost capacity (%)")
    assert lost["fieldConfig"]["defaults"]["thresholds"]["steps"][1]["value"] == 50.0
