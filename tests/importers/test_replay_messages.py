"""Messages of `stormwatch replay` / `import` / `evaluate` a person relies on.

Depths by hand: 63 tips × 0.2 mm = 12.6 mm = 12.6 / 25.4 in = 0.49606... in, below the 0.5 in of
Ch. 133 §133-7A(2): it must never print as "0.50 in". The Tharandt record (SOURCES.md): 2,631 tips
= 526.2 mm = 20.7165... in.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml
from typer.testing import CliRunner

from stormwatch.alerts.backfill import depth_text
from stormwatch.app.cli import app
from tests.conftest import data_file
from tests.importers_support import THARANDT, THARANDT_ARGS


def test_depth_text_is_exact_in_the_gauge_unit_and_never_rounds_up() -> None:
    assert depth_text(63, "0.2 mm") == "63 tips = 12.6 mm (0.496 in)"
    assert depth_text(64, "0.2 mm") == "64 tips = 12.8 mm (0.503 in)"       # 12.8 / 25.4 = 0.50393...
    assert depth_text(127, "0.1 mm") == "127 tips = 12.7 mm (0.500 in)"     # exactly 0.5 in
    assert depth_text(126, "0.1 mm") == "126 tips = 12.6 mm (0.496 in)"
    assert depth_text(5, "0.254 mm") == "5 tips = 1.27 mm (0.050 in)"
    assert depth_text(49, "0.01 in") == "49 tips = 0.49 in"
    assert depth_text(1, "0.01 in") == "1 tip = 0.01 in"
    assert depth_text(0, "0.2 mm") == "0 tips = 0 mm (0.000 in)"


def test_replay_ch507_has_no_storm_rule_exit_2() -> None:
    result = CliRunner().invoke(app, ["replay", str(data_file(THARANDT)), *THARANDT_ARGS, "--jurisdiction", "ch507"])
    assert result.exit_code == 2, result.output
    assert "error: pack ch507 has no storm-inspection rule (R1); nothing to replay" in result.output


def test_replay_prints_the_open_storm_in_mm_and_three_decimal_inches() -> None:
    result = CliRunner().invoke(app, ["replay", str(data_file(THARANDT)), *THARANDT_ARGS], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "storm in progress at the end of the file: 63 tips = 12.6 mm (0.496 in) since" in result.output
    assert "0.50 in" not in result.output
    assert "2632 rows, 2631 tips = 526.2 mm (20.716 in), 0 rows rejected" in result.output


def test_import_and_evaluate_print_mm_depths(tmp_path: Path) -> None:
    site = tmp_path / "site.yaml"
    site.write_text(yaml.safe_dump({
        "site": {"id": "mm-site", "jurisdiction": "ch133", "timezone": "UTC"},
        "gateway_id": "gw",
        "devices": [{"id": "rain", "profile": "tipping_bucket_0_2mm_modbus_counter", "poll_interval_s": 60,
                     "transport": {"kind": "modbus-tcp", "host": "h"}}],
        "rain_gauge": "rain",
    }), encoding="utf-8")
    t0 = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
    rows = "".join(f"{(t0 + timedelta(minutes=i)).isoformat()},0.2\n" for i in range(63))
    (tmp_path / "tips.csv").write_text("time,depth_mm\n" + rows, encoding="utf-8")
    url = f"sqlite:///{tmp_path / 'store.db'}"
    runner = CliRunner()
    imported = runner.invoke(app, ["import", str(tmp_path / "tips.csv"), "--site", str(site), "--device", "rain",
                                   "--store", url, "--tips", "0.2"], catch_exceptions=False)
    assert imported.exit_code == 0, imported.output
    assert "readings made:    63 (63 tips = 12.6 mm (0.496 in))" in imported.output
    evaluated = runner.invoke(app, ["evaluate", "--site", str(site), "--from", "2024-06-01T12:00:00Z",
                                    "--to", "2024-06-01T14:00:00Z", "--store", url], catch_exceptions=False)
    assert evaluated.exit_code == 0, evaluated.output
    assert ("storm in progress at the end of the window: 63 tips = 12.6 mm (0.496 in) since Sat 01 Jun 2024 12:00 "
            "UTC, last tip Sat 01 Jun 2024 13:02 UTC; below the inspection threshold so far") in evaluated.output
    assert "qualified=" not in evaluated.output and "None" not in evaluated.output
    assert "0.50 in" not in evaluated.output


def test_rejected_rows_and_cells_without_a_value_are_never_complete_data(tmp_path: Path) -> None:
    """A rain file with 5 rows no reading can be made of (text, a negative depth, 0.3 mm that is no
    whole 0.2 mm tip, 1e308) and 3 empty cells: the replay says its data is NOT complete and why,
    never "rain-gauge data complete"; the same file without them is complete."""
    rows = ["0.2", "abc", "-1", "xyz", "0.3", "1e308", "", "", "", "0.2"]
    bad = tmp_path / "bad.csv"
    bad.write_text("time,rain\n" + "".join(f"2024-06-01T00:0{i}:00Z,{v}\n" for i, v in enumerate(rows)),
                   encoding="utf-8")
    result = CliRunner().invoke(app, ["replay", str(bad), "--tip-mm", "0.2"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    last = result.output.splitlines()[-1]
    assert last.startswith("10 rows, 2 tips = 0.4 mm (0.015 in), 5 rows rejected;"), last
    assert last.endswith("rain-gauge data NOT complete: 5 rows rejected and 3 cells without a value: the rain then "
                         "is unknown"), last
    assert "data complete" not in last.replace("data NOT complete", "")
    good = tmp_path / "good.csv"
    good.write_text("time,rain\n2024-06-01T00:00:00Z,0.2\n2024-06-01T00:09:00Z,0.2\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["replay", str(good), "--tip-mm", "0.2"], catch_exceptions=False)
    assert result.output.splitlines()[-1].endswith("; rain-gauge data complete")


def test_a_count_of_one_is_singular(tmp_path: Path) -> None:
    """"1 cells without a value", "1 rows": the summary's nouns agree with their counts."""
    one = tmp_path / "one.csv"
    one.write_text("time,rain\n2024-06-01T00:00:00Z,0.2\n2024-06-01T00:01:00Z,\n2024-06-01T00:02:00Z,abc\n",
                   encoding="utf-8")
    result = CliRunner().invoke(app, ["replay", str(one), "--tip-mm", "0.2"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    last = result.output.splitlines()[-1]
    assert last.startswith("3 rows, 1 tip = 0.2 mm (0.007 in), 1 row rejected;"), last
    assert last.endswith("rain-gauge data NOT complete: 1 row rejected and 1 cell without a value: the rain then "
                         "is unknown"), last
    single = tmp_path / "single.csv"
    single.write_text("time,rain\n2024-06-01T00:00:00Z,0.2\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["replay", str(single), "--tip-mm", "0.2"], catch_exceptions=False)
    assert result.output.splitlines()[-1].startswith("1 row, 1 tip = 0.2 mm (0.007 in), 0 rows rejected;")

