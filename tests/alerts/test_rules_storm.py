"""R1 storm inspection (Ch. 133 §133-7A(2), Ch. 196 §196-9B): exact thresholds, storm separation,
deadline = last tip + 24 h. Expected values come from the ordinance (0.5 in) and the gauge
resolution by hand: 0.5 in / 0.01 in = 50 tips; 0.5 in = 12.7 mm, 12.7 / 0.2 = 63.5 -> 64 tips."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError

from stormwatch.alerts.engine import Engine
from stormwatch.alerts.packs import load_pack
from stormwatch.alerts.workorders import WorkOrders
from stormwatch.clock import ManualClock
from stormwatch.contract import Event
from stormwatch.profiles import ProfileLibrary
from tests.alerts_support import T0, Feeder, metric_gauge_profiles, site

MIN = timedelta(minutes=1)


def rain(feed: Feeder, tips: int, start=T0, every=MIN, dry_after_h: float = 7.0) -> list:
    """``tips`` one-tip polls every ``every``, then dry polls every 10 min for ``dry_after_h`` hours."""
    out = [feed.tips(1, start + i * every) for i in range(tips)]
    last = start + (tips - 1) * every
    n = int(dry_after_h * 6)
    out += [feed.tips(0, last + (k + 1) * timedelta(minutes=10)) for k in range(n)]
    return out


def run(engine: Engine, readings: list) -> list[Event]:
    events: list[Event] = []
    for r in readings:
        events += engine.feed(r)
    return events + engine.flush()


def storm_events(events: list[Event]) -> list[Event]:
    return [e for e in events if e.rule == "R1"]


def engine_for(tmp_path: Path, jurisdiction: str = "ch133", profiles: ProfileLibrary | None = None,
               gauge_profile: str = "tipping_bucket_modbus_counter", rules=None) -> tuple[Engine, WorkOrders]:
    cfg = site(jurisdiction, gauge_profile=gauge_profile, rules=rules)
    wo = WorkOrders(tmp_path / "wo.db", ManualClock(T0))
    return Engine(cfg, profiles or ProfileLibrary(), load_pack(jurisdiction, cfg.rules), wo, lateness_s=120), wo


def test_50_tips_of_001_in_open_a_storm_inspection(tmp_path: Path) -> None:
    engine, wo = engine_for(tmp_path)
    events = storm_events(run(engine, rain(Feeder(), 50)))
    kinds = [e.kind for e in events]
    assert kinds == ["storm_started", "storm_qualified", "storm_inspection_due"]
    last_tip = T0 + 49 * MIN
    due = events[-1]
    assert due.tips == 50 and due.depth_in == 0.5
    assert due.storm_start == T0 and due.storm_end == last_tip
    assert due.due_at == last_tip + timedelta(hours=24)  # exactly last tip + 24 h
    assert due.event_time == last_tip + timedelta(hours=6)  # known when the dry gap has passed
    assert due.citation == "Ch. 133 §133-7A(2)"
    assert events[1].event_time == last_tip and events[1].tips == 50  # qualified on the 50th tip
    orders = [o for o in wo.list() if o.rule == "R1"]
    assert len(orders) == 1 and orders[0].kind == "storm_inspection" and orders[0].due_at == due.due_at
    assert due.work_order == orders[0].id


def test_49_tips_do_not_qualify(tmp_path: Path) -> None:
    engine, wo = engine_for(tmp_path)
    events = storm_events(run(engine, rain(Feeder(), 49)))
    assert [e.kind for e in events] == ["storm_started", "storm_ended_below_threshold"]
    end = events[-1]  # the storm's end is said, with its depth, and that nothing is due
    assert (end.tips, end.depth_in, end.due_at, end.work_order) == (49, 0.49, None, None)
    assert "storm of 0.49 in" in end.message and "below the 0.5 in threshold, no inspection due" in end.message
    assert [o for o in wo.list() if o.rule == "R1"] == []


@pytest.mark.parametrize(("tips", "qualifies"), [(64, True), (63, False)])
def test_02_mm_gauge_64_qualify_63_not(tmp_path: Path, tips: int, qualifies: bool) -> None:
    profiles = metric_gauge_profiles(tmp_path)
    engine, wo = engine_for(tmp_path, profiles=profiles, gauge_profile="tipping_bucket_02mm")
    events = storm_events(run(engine, rain(Feeder(), tips)))
    assert ("storm_inspection_due" in [e.kind for e in events]) is qualifies
    assert len([o for o in wo.list() if o.rule == "R1"]) == (1 if qualifies else 0)
    if qualifies:
        # 64 x 0.2 mm = 12.8 mm = 0.50393... in
        assert events[-1].depth_in == pytest.approx(12.8 / 25.4, abs=1e-12)


@pytest.mark.parametrize(("gap", "storms"), [(timedelta(hours=6, minutes=1), 2), (timedelta(hours=6), 2),
                                              (timedelta(hours=5, minutes=59), 1)])
def test_dry_gap_separates_storms(tmp_path: Path, gap: timedelta, storms: int) -> None:
    engine, _ = engine_for(tmp_path)
    feed = Feeder()
    # 30 tips, dry polls every 10 min across the gap, 30 tips: 0.30 in each, 0.60 in together
    first = [feed.tips(1, T0 + i * MIN) for i in range(30)]
    last1 = T0 + 29 * MIN
    dry = []
    t = last1 + timedelta(minutes=10)
    while t < last1 + gap:
        dry.append(feed.tips(0, t))
        t += timedelta(minutes=10)
    second = rain(feed, 30, start=last1 + gap)
    events = storm_events(run(engine, first + dry + second))
    starts = [e for e in events if e.kind == "storm_started"]
    assert len(starts) == storms
    due = [e for e in events if e.kind == "storm_inspection_due"]
    if storms == 2:
        assert due == []  # neither 0.30-in storm reaches 0.5 in
    else:
        assert len(due) == 1 and due[0].tips == 60 and due[0].storm_start == T0


def test_open_storm_at_end_of_backfill_is_in_progress_not_ended(tmp_path: Path) -> None:
    engine, wo = engine_for(tmp_path)
    feed = Feeder()
    readings = [feed.tips(1, T0 + i * MIN) for i in range(55)]
    readings += [feed.tips(0, T0 + 55 * MIN + k * timedelta(minutes=10)) for k in range(6)]  # 1 h dry only
    events = storm_events(run(engine, readings))
    assert [e.kind for e in events] == ["storm_started", "storm_qualified"]
    (open_storm,) = engine.in_progress()
    assert open_storm.qualified and open_storm.tips == 55 and open_storm.last_tip == T0 + 54 * MIN
    assert [o for o in wo.list() if o.rule == "R1"] == []


def test_clock_from_threshold_override(tmp_path: Path) -> None:
    engine, _ = engine_for(tmp_path, rules={"R1": {"clock_from": "threshold"}})
    events = storm_events(run(engine, rain(Feeder(), 80)))
    due = events[-1]
    assert due.kind == "storm_inspection_due"
    assert due.due_at == T0 + 49 * MIN + timedelta(hours=24)  # from the 50th tip
    assert events[1].kind == "storm_qualified" and events[1].due_at == due.due_at


def test_ch196_citation(tmp_path: Path) -> None:
    engine, _ = engine_for(tmp_path, "ch196")
    events = storm_events(run(engine, rain(Feeder(), 50)))
    assert {e.citation for e in events} == {"Ch. 196 §196-9B"}


def test_silent_gauge_is_a_gap_and_closes_a_qualified_storm_conservatively(tmp_path: Path) -> None:
    engine, _ = engine_for(tmp_path)
    feed = Feeder()
    readings = [feed.tips(1, T0 + i * MIN) for i in range(50)]
    last_tip = T0 + 49 * MIN
    # the gauge falls silent; the turbidity probes keep reporting for 7 h
    for k in range(1, 43):
        t = last_tip + k * timedelta(minutes=10)
        readings += [feed("up", "turbidity", 10.0, "NTU", t), feed("down", "turbidity", 11.0, "NTU", t)]
    events = storm_events(run(engine, readings))
    kinds = [e.kind for e in events]
    assert "data_gap" in kinds
    due = next(e for e in events if e.kind == "storm_inspection_due")
    assert due.due_at == last_tip + timedelta(hours=24)
    assert "not confirmed" in due.message


def test_non_integer_tips_are_not_readings() -> None:
    # The contract refuses a fractional tip count before any rule sees it (strict payload types, docs/ingest.md).
    with pytest.raises(ValidationError, match="whole number of tips"):
        Feeder()("rain", "rain_tips", 60.0, "{tip}", T0)


@pytest.mark.parametrize(("every_min", "qualifies"), [(28, True), (30, False)])
def test_rolling_24h_mode(tmp_path: Path, every_min: int, qualifies: bool) -> None:
    # 60 one-tip polls (0.60 in), never 6 h dry: one storm either way. Rolling 24 h (EPA CGP style):
    # tips in (t - 24 h, t]: every 28 min -> the 50th tip (at 49 x 28 = 1372 min < 1440) has all 50 in
    # the window; every 30 min -> at most 1440 / 30 = 48 tips in any window: never 0.50 in.
    engine, _ = engine_for(tmp_path, rules={"R1": {"definition": "rolling"}})
    events = storm_events(run(engine, rain(Feeder(), 60, every=timedelta(minutes=every_min))))
    kinds = [e.kind for e in events]
    assert ("storm_qualified" in kinds) is qualifies and ("storm_inspection_due" in kinds) is qualifies
    if qualifies:
        q = next(e for e in events if e.kind == "storm_qualified")
        assert q.event_time == T0 + 49 * timedelta(minutes=every_min)
        assert events[-1].due_at == T0 + 59 * timedelta(minutes=every_min) + timedelta(hours=24)
    # the default (whole-storm depth) qualifies both: 60 tips >= 50
    plain, _ = engine_for(tmp_path / "x" if (tmp_path / "x").mkdir() is None else tmp_path)
    assert "storm_inspection_due" in [e.kind for e in storm_events(run(plain, rain(
        Feeder(), 60, every=timedelta(minutes=every_min))))]
