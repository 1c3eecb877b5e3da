"""`stormwatch replay`: one storm_inspection_due per qualifying storm, nothing for smaller ones.

The storms are found here independently from the file (rules.md R1: tips separated by >= the dry
gap are two storms; 0.5 in with 0.2-mm tips needs ceil(12.7 / 0.2) = 64 tips = 12.8 mm, 63 do not
qualify; the inspection is due 24 h after the last tip).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from typer.testing import CliRunner

from stormwatch.app.cli import app
from tests.importers_support import Storm, golden, storms_by_hand, tharandt_tips, z

TIPS_TO_QUALIFY = 64  # 64 × 0.2 mm = 12.8 mm ≥ 12.7 mm = 0.5 in; 63 × 0.2 = 12.6 mm < 0.5 in


def replay_json(*args: str) -> list[dict[str, object]]:
    result = CliRunner().invoke(app, ["replay", *args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def expected_events(storms: list[Storm], gap: timedelta) -> list[dict[str, object]]:
    return [{"storm_start": z(s.start), "storm_end": z(s.end), "tips": s.tips, "due_at": z(s.end + timedelta(hours=24)),
             "event_time": z(s.end + gap)} for s in storms if s.tips >= TIPS_TO_QUALIFY]


def test_tharandt_replay_prints_one_event_per_qualifying_storm() -> None:
    """The golden case tests/cases/tharandt-ch133 holds exactly the storms found here by hand."""
    gap = timedelta(hours=6)
    closed, still_open = storms_by_hand(tharandt_tips(), gap)
    expected = expected_events(closed, gap)
    assert len(expected) == 15 and len(closed) > 100  # many small storms print nothing
    events = golden("tharandt-ch133")
    assert {e["kind"] for e in events} == {"storm_inspection_due"}
    got = [{k: e[k] for k in ("storm_start", "storm_end", "tips", "due_at", "event_time")} for e in events]
    assert got == expected
    for e in events:
        assert e["citation"] == "Ch. 133 §133-7A(2)"
        assert abs(float(e["depth_in"]) - int(e["tips"]) * 0.2 / 25.4) < 1e-12  # type: ignore[arg-type]
    # the record ends inside a storm of 63 tips (12.6 mm): not ended, and below the threshold anyway
    assert still_open is not None and still_open.tips == 63


def test_shorter_dry_gap_and_ch196() -> None:
    """The golden case tests/cases/tharandt-ch196-dry-gap-2h, derived by hand."""
    gap = timedelta(hours=2)
    closed, _ = storms_by_hand(tharandt_tips(), gap)
    events = golden("tharandt-ch196-dry-gap-2h")
    got = [{k: e[k] for k in ("storm_start", "storm_end", "tips", "due_at", "event_time")} for e in events]
    assert got == expected_events(closed, gap)
    assert {e["citation"] for e in events} == {"Ch. 196 §196-9B"}


def test_64_tips_qualify_63_do_not(tmp_path: Path) -> None:
    start = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
    times = [start + timedelta(minutes=i) for i in range(64)]                     # storm A: 64 tips
    b = start + timedelta(hours=8)
    times += [b + timedelta(minutes=i // 2) for i in range(63)]                   # storm B: 63 tips, 2 a minute
    times += [b + timedelta(hours=8)]                                             # a tip that closes B
    path = tmp_path / "tips.csv"
    path.write_text("time,depth_mm\n" + "".join(f"{z(t)},0.2\n" for t in times), encoding="utf-8")
    events = replay_json(str(path), "--tips", "0.2")
    assert [(e["tips"], e["storm_end"]) for e in events] == [(64, z(times[63]))]

    text = CliRunner().invoke(app, ["replay", str(path), "--tips", "0.2", "--all-events"], catch_exceptions=False)
    assert text.exit_code == 0, text.output
    assert text.stdout.count("storm_started") == 3 and text.stdout.count("storm_qualified") == 1
    assert "1 qualifying storm ended" in text.stdout


def test_silence_gap_reports_the_missing_stretch(tmp_path: Path) -> None:
    # a 10-min count log (0.01-in tips) that stops for 5 hours in the middle of a 60-tip storm
    start = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
    rows = [(start + timedelta(minutes=10 * i), 10) for i in range(3)]            # 30 tips
    rows += [(start + timedelta(hours=5, minutes=10 * i), 10) for i in range(3)]  # 30 more after the outage
    rows += [(start + timedelta(hours=5, minutes=30 + 10 * i), 0) for i in range(40)]
    path = tmp_path / "counts.csv"
    path.write_text("time,tips\n" + "".join(f"{z(t)},{n}\n" for t, n in rows), encoding="utf-8")
    args = [str(path), "--tips-in", "0.01", "--tips-per-row", "count"]
    gap_events = replay_json(*args, "--silence", "gap")
    kinds = [e["kind"] for e in gap_events]
    assert "data_gap" in kinds and kinds.count("storm_inspection_due") == 1
    due = next(e for e in gap_events if e["kind"] == "storm_inspection_due")
    assert due["tips"] == 60 and due["storm_end"] == z(start + timedelta(hours=5, minutes=20))
    # the same rows read as an event log: the 5-h stretch is dry, one 60-tip storm, no gap
    dry_events = replay_json(*args)
    assert [e["kind"] for e in dry_events] == ["storm_inspection_due"]


def test_replay_needs_a_rain_file(tmp_path: Path) -> None:
    path = tmp_path / "turb.csv"
    path.write_text("time,turb\n2024-01-01T00:00:00Z,3.0\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["replay", str(path), "--value-column", "turb=turbidity:FNU"])
    assert result.exit_code == 2
    assert "--tip-mm MM or --tip-in IN" in result.output
