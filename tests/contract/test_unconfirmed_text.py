"""An event whose rule uses a pack parameter the permit text does not confirm says so as advice on
the timeline -- which parameter, that it is the pack's, and how to confirm or override it in the
site file -- never as a bare "(not confirmed by ...)" that reads like an error."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from stormwatch.contract import Event
from stormwatch.display import describe_event


def _event(unverified: list[str]) -> Event:
    return Event(kind="storm_started", site="washout-yard", event_time=datetime(2026, 6, 1, 12, tzinfo=UTC),
                 rule="R1", citation="CGP Att. D §II.B", occurrence="storm:2026-06-01T12:00:00Z", tips=1,
                 depth_in=0.01, unverified=unverified)


def test_one_parameter_says_how_to_confirm_or_override_it() -> None:
    line = describe_event(_event(["dry_gap_hours=48"]), ZoneInfo("America/Los_Angeles"))
    assert line.endswith("(rule pack parameter dry_gap_hours=48: a value the permit text in hand does not "
                         "confirm; check the permit and set it in the site file to confirm or override "
                         "(rules: {R1: {dry_gap_hours: 48}}))")
    assert "(not confirmed by the permit text:" not in line


def test_several_parameters() -> None:
    line = describe_event(_event(["dry_gap_hours=48", "inspection_within_hours=24"]), ZoneInfo("UTC"))
    assert "rule pack parameters dry_gap_hours=48, inspection_within_hours=24: values the permit text" in line
    assert "set them in the site file" in line
