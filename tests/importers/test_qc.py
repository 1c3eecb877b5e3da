"""Imported readings carry the same QC flags as live ones (gateway/qc.py), so the rules treat a
logger file's impossible values as flagged data, not as evidence of a violation.

By hand: the Yosemitech Y511 profile's turbidity valid_range is [0, 1000] NTU (device_profiles/
yosemitech_y511.yaml). 9999 NTU is outside it -> ``out_of_range``; -5 NTU is a value physics
forbids (a negative turbidity): its rows are rejected ``negative_value`` (issue 11 item 5); 99999 NTU
is above what any turbidity sensor reports (10,000, stormwatch.physics.MAX_TURBIDITY): rejected
``beyond_instrument_range``. Rules.md R2: a
downstream window whose data carry QC flags is ``turbidity_needs_verification``, never a
``turbidity_contrast``. Control: the same file with 80 NTU (in range, 70 NTU above a 10 NTU
background, > 5 NTU allowed for a background <= 50 NTU, for 30 min > 15 min sustained) IS a
possible violation.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml
from typer.testing import CliRunner

from stormwatch.app.cli import app
from stormwatch.stores.urls import open_store

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)

SITE = {
    "site": {"id": "qc-site", "jurisdiction": "ch133", "timezone": "UTC"},
    "gateway_id": "gw",
    "devices": [
        {"id": "up", "profile": "yosemitech_y511", "transport": {"kind": "modbus-tcp", "host": "h"},
         "poll_interval_s": 60},
        {"id": "down", "profile": "yosemitech_y511", "transport": {"kind": "modbus-tcp", "host": "h"},
         "poll_interval_s": 60},
    ],
    "turbidity_pair": {"upstream": "up", "downstream": "down"},
}


def write_csv(path: Path, values: list[str]) -> Path:
    lines = ["time,turb [NTU]"] + [f"{(T0 + i * MIN).isoformat()},{v}" for i, v in enumerate(values)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def import_pair(tmp_path: Path, downstream: list[str]) -> tuple[Path, str, dict[str, object]]:
    site = tmp_path / "site.yaml"
    site.write_text(yaml.safe_dump(SITE), encoding="utf-8")
    url = f"sqlite:///{tmp_path / 'store.db'}"
    runner = CliRunner()
    summaries = {}
    for device, values in (("up", ["10"] * 60), ("down", downstream)):
        path = write_csv(tmp_path / f"{device}.csv", values)
        result = runner.invoke(app, ["import", str(path), "--site", str(site), "--device", device, "--store", url,
                                     "--value-column", "turb=turbidity", "--json"], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        summaries[device] = json.loads(result.stdout.strip().splitlines()[-1])
    return site, url, summaries


def evaluate_kinds(site: Path, url: str) -> list[str]:
    result = CliRunner().invoke(app, ["evaluate", "--site", str(site), "--from", "2024-05-01T11:00:00Z",
                                      "--to", "2024-05-01T14:00:00Z", "--store", url, "--json"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return [e["kind"] for e in json.loads(result.stdout)["events"]]


def test_out_of_range_turbidity_is_flagged_and_never_a_violation(tmp_path: Path) -> None:
    # 9999 is above the Y511's 1000 NTU but within what a field sensor can report (0-9999 FNU,
    # stormwatch.physics.MAX_TURBIDITY): kept, flagged; 99999 no instrument reports: the row is rejected
    downstream = ["10"] * 15 + ["9999"] * 27 + ["99999"] + ["-5", "-5"] + ["10"] * 15
    site, url, summaries = import_pair(tmp_path, downstream)
    assert summaries["down"]["flagged"] == {"out_of_range": 27}
    assert summaries["down"]["rejected_rows"] == {"negative_value": 2, "beyond_instrument_range": 1}
    assert summaries["up"]["flagged"] == {}
    store = open_store(url)
    try:
        stored = store.query_readings("qc-site", device="down", quantity="turbidity")
    finally:
        store.close()
    assert len(stored) == 57
    flagged = {r.value: r.flags for r in stored if r.flags}
    assert flagged == {9999.0: ("out_of_range",)}
    assert all(not r.flags for r in stored if r.value == 10.0)
    kinds = evaluate_kinds(site, url)
    assert "turbidity_contrast" not in kinds
    assert "turbidity_needs_verification" in kinds


def test_control_in_range_plume_is_a_possible_violation(tmp_path: Path) -> None:
    site, url, summaries = import_pair(tmp_path, ["10"] * 15 + ["80"] * 30 + ["10"] * 15)
    assert summaries["down"]["flagged"] == {}
    assert "turbidity_contrast" in evaluate_kinds(site, url)
