"""R3 basin cleanout (Ch. 133 §133-7A(1), Ch. 196 §196-9A): 50 % of the design capacity BY VOLUME.

Basin 40 x 20 ft, 3:1 sides, H = 4 ft: V(4) = 6,848 ft^3 by hand; d with V(d) = 3,424 ft^3 is
solved here by Newton on the prismoidal formula (independent of stormwatch.alerts.geometry). d is about
2.56 ft: ABOVE H/2, so 2 ft of sediment (35 % of the volume) does not make a cleanout due.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from stormwatch.alerts.engine import Engine
from stormwatch.alerts.packs import load_pack
from stormwatch.alerts.workorders import WorkOrders
from stormwatch.clock import ManualClock
from stormwatch.contract import Event
from stormwatch.profiles import ProfileLibrary
from tests.alerts_support import T0, D, Feeder, distance_mm, site

TEN = timedelta(minutes=10)


def make(tmp_path: Path, basin: dict | None = None) -> tuple[Engine, WorkOrders]:
    cfg = site("ch133", basin=basin)
    wo = WorkOrders(tmp_path / "wo.db", ManualClock(T0))
    return Engine(cfg, ProfileLibrary(), load_pack("ch133"), wo, lateness_s=0), wo


def feed_depths(engine: Engine, feed: Feeder, depths: list[float], start=T0) -> list[Event]:
    out: list[Event] = []
    for i, d in enumerate(depths):
        out += engine.feed(feed("lvl", "distance", distance_mm(d), "mm", start + i * TEN))
    return [e for e in out + engine.flush() if e.rule == "R3"]


def test_solved_depth_is_above_half_height() -> None:
    assert 2.55 < D < 2.57


def test_cleanout_exactly_at_half_volume_depth(tmp_path: Path) -> None:
    engine, wo = make(tmp_path)
    events = feed_depths(engine, Feeder(), [D] * 3)
    (due,) = [e for e in events if e.kind == "basin_cleanout_due"]
    assert due.lost_capacity == pytest.approx(0.5, abs=1e-9)
    assert due.sediment_depth_ft == pytest.approx(D, abs=1e-9)
    assert due.citation == "Ch. 133 §133-7A(1)"
    assert due.due_at == due.event_time + timedelta(hours=72)
    (order,) = [o for o in wo.list() if o.rule == "R3"]
    assert order.kind == "basin_cleanout" and due.work_order == order.id


def test_no_cleanout_one_hundredth_of_a_foot_below(tmp_path: Path) -> None:
    engine, _ = make(tmp_path)
    events = feed_depths(engine, Feeder(), [D - 0.01] * 6)
    assert [e.kind for e in events] == ["basin_capacity_warning"]  # 49.7 % >= 40 % warning
    # 0.01 ft less sediment is about A(d) x 0.01 ft^3 less, A(d) the surface area at d
    assert events[0].lost_capacity == pytest.approx(0.5 - (40 + 6 * D) * (20 + 6 * D) * 0.01 / 6848, abs=1e-4)


def test_two_feet_is_not_half_the_capacity(tmp_path: Path) -> None:
    engine, _ = make(tmp_path)
    assert feed_depths(engine, Feeder(), [2.0] * 6) == []  # 2416/6848 = 35.3 %: not even the warning


def test_single_spike_does_not_trigger(tmp_path: Path) -> None:
    engine, _ = make(tmp_path)
    assert feed_depths(engine, Feeder(), [1.0, 1.0, 3.9, 1.0, 1.0]) == []


def test_rearms_only_after_measured_drop(tmp_path: Path) -> None:
    engine, wo = make(tmp_path)
    feed = Feeder()
    first = feed_depths(engine, feed, [2.7] * 6)
    assert [e.kind for e in first] == ["basin_cleanout_due"]
    again = feed_depths(engine, feed, [2.7] * 3, start=T0 + 6 * TEN)
    assert again == []  # same condition, no second order
    cleaned = feed_depths(engine, feed, [0.2] * 3, start=T0 + 9 * TEN)
    assert [e.kind for e in cleaned] == ["basin_cleanout_done"]
    refill = feed_depths(engine, feed, [2.8] * 3, start=T0 + timedelta(days=30))
    assert [e.kind for e in refill] == ["basin_cleanout_due"]
    assert len([o for o in wo.list() if o.rule == "R3"]) == 2


def test_pressure_depth_sensor(tmp_path: Path) -> None:
    # depth 2.6 ft = 0.79248 m of water: P = 0.79248 * 1000 * 9.80665 / 1e5 bar
    engine, _ = make(tmp_path, basin={"device": "press", "geometry": {
        "bottom_length_ft": 40, "bottom_width_ft": 20, "side_slope_z": 3, "design_height_ft": 4}})
    feed = Feeder()
    p_bar = 2.6 * 0.3048 * 1000 * 9.80665 / 1e5
    events = []
    for i in range(3):
        events += engine.feed(feed("press", "pressure", p_bar, "bar", T0 + i * TEN))
    events = [e for e in events + engine.flush() if e.rule == "R3"]
    assert [e.kind for e in events] == ["basin_cleanout_due"]
    assert events[0].sediment_depth_ft == pytest.approx(2.6, abs=1e-9)


def test_flagged_and_no_target_readings_skipped(tmp_path: Path) -> None:
    engine, _ = make(tmp_path)
    feed = Feeder()
    events = []
    for i in range(3):
        events += engine.feed(feed("lvl", "distance", 9999.0, "mm", T0 + i * TEN))  # HRXL "no target"
        events += engine.feed(feed("lvl", "distance", distance_mm(3.0), "mm", T0 + i * TEN + timedelta(minutes=1),
                                   flags=("out_of_range",)))
    assert [e for e in events + engine.flush() if e.rule == "R3"] == []
