"""Engine: event-time order from any arrival order within lateness, duplicates, late and retained
readings, routine cadence, work-order ids on events, pack loading and overrides."""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path

import pytest

from stormwatch.alerts.engine import Engine
from stormwatch.alerts.packs import PackError, load_pack
from stormwatch.alerts.rules.storm import StormRule
from stormwatch.alerts.workorders import WorkOrders
from stormwatch.clock import ManualClock
from stormwatch.contract import Event, Reading
from stormwatch.profiles import ProfileLibrary
from tests.alerts_support import T0, Feeder, site

MIN = timedelta(minutes=1)


def scenario() -> list[Reading]:
    """A storm of 60 tips with a turbidity plume, then 7 h of dry polls and clean water."""
    feed = Feeder()
    out: list[Reading] = []
    for i in range(8 * 60):
        t = T0 + i * MIN
        out.append(feed.tips(1 if i < 60 else 0, t))
        out.append(feed("up", "turbidity", 20.0, "NTU", t))
        out.append(feed("down", "turbidity", 40.0 if 30 <= i < 60 else 21.0, "NTU", t))
    return out


def run(tmp_path: Path, readings: list[Reading], name: str) -> list[Event]:
    cfg = site("ch133")
    engine = Engine(cfg, ProfileLibrary(), load_pack("ch133"), WorkOrders(tmp_path / f"{name}.db", ManualClock(T0)),
                    lateness_s=300)
    events: list[Event] = []
    for r in readings:
        events += engine.feed(r)
    return events + engine.flush()


def test_out_of_order_within_lateness_gives_identical_events(tmp_path: Path) -> None:
    readings = scenario()
    in_order = run(tmp_path, readings, "a")
    shuffled = list(readings)
    rng = random.Random(7)
    # displace readings by up to 4 min (lateness is 5 min): swap within small blocks
    for k in range(0, len(shuffled), 12):
        block = shuffled[k:k + 12]
        rng.shuffle(block)
        shuffled[k:k + 12] = block
    assert shuffled != readings
    out_of_order = run(tmp_path, shuffled, "b")
    assert [e.to_wire() for e in out_of_order] == [e.to_wire() for e in in_order]
    kinds = [e.kind for e in in_order]
    assert "storm_inspection_due" in kinds and "turbidity_contrast" in kinds and "turbidity_cleared" in kinds


def test_duplicates_counted_once(tmp_path: Path) -> None:
    feed = Feeder()
    tips = [feed.tips(1, T0 + i * MIN) for i in range(25)]
    readings = [r for r in tips for _ in range(2)]  # every tip delivered twice (QoS 1 redelivery)
    readings += [feed.tips(0, T0 + 25 * MIN + k * timedelta(minutes=10)) for k in range(42)]
    events = [e for e in run(tmp_path, readings, "d") if e.rule == "R1"]
    assert [e.kind for e in events] == ["storm_started", "storm_ended_below_threshold"]
    assert events[-1].tips == 25  # 25 tips = 0.25 in, not 50


def test_late_and_retained_readings_do_not_trigger(tmp_path: Path) -> None:
    cfg = site("ch133")
    engine = Engine(cfg, ProfileLibrary(), load_pack("ch133"), None, lateness_s=60)
    feed = Feeder()
    engine.feed(feed.tips(0, T0 + timedelta(hours=3)))
    late = feed.tips(60, T0)  # three hours older than the watermark
    assert engine.feed(late) == []
    retained = feed.tips(60, T0 + timedelta(hours=3, minutes=5))
    assert engine.feed(retained, retained=True) == []
    assert engine.counts["late"] == 1 and engine.counts["retained"] == 1
    assert [e.kind for e in engine.flush() if e.rule == "R1"] == []


def test_routine_inspection_every_seven_days_from_last_completion(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    book = WorkOrders(tmp_path / "wo.db", clock)
    cfg = site("ch133")
    engine = Engine(cfg, ProfileLibrary(), load_pack("ch133"), book, lateness_s=0)
    feed = Feeder()
    events = engine.feed(feed.tips(0, T0))
    (first,) = [e for e in events if e.rule == "R1w"]
    assert first.due_at == T0 + timedelta(days=7) and first.work_order
    completed_at = T0 + timedelta(days=3)
    book.complete(first.work_order, "ann", "routine inspection done", at=completed_at)
    events = engine.feed(feed.tips(0, T0 + timedelta(days=4)))
    (second,) = [e for e in events if e.rule == "R1w"]
    assert second.event_time == completed_at and second.due_at == completed_at + timedelta(days=7)
    # nobody inspects: at the deadline a new period starts
    events = engine.feed(feed.tips(0, T0 + timedelta(days=10, hours=1)))
    (third,) = [e for e in events if e.rule == "R1w"]
    assert third.event_time == completed_at + timedelta(days=7)
    assert len([o for o in book.list() if o.rule == "R1w"]) == 3


def test_site_overrides_apply_and_bad_ones_name_the_key() -> None:
    pack = load_pack("ch133", {"R1": {"dry_gap_hours": 4}})
    assert pack.first(StormRule)[1].dry_gap_hours == 4
    with pytest.raises(PackError, match=r"rules\.R1\.dry_gaps"):
        load_pack("ch133", {"R1": {"dry_gaps": 4}})
    with pytest.raises(PackError, match=r"rules\.R9"):
        load_pack("ch133", {"R9": {"x": 1}})
    with pytest.raises(PackError, match=r"known: ca-cgp-2022, ch133, ch196, ch507, epa-cgp-2022, spencerport"):
        load_pack("nowhere")


def test_pack_file_errors_name_file_and_key(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("name: bad\nrules:\n  R1: {kind: storm, citation: x, dry_gap_hours: -2}\n")
    with pytest.raises(PackError, match=r"bad\.yaml: rules\.R1\.dry_gap_hours: Input should be greater than 0"):
        load_pack("bad", directory=tmp_path)


def test_malverne_pack_watches_nothing(tmp_path: Path) -> None:
    cfg = site("ch507")
    engine = Engine.for_site(cfg, ProfileLibrary())
    feed = Feeder()
    events = [e for i in range(60) for e in engine.feed(feed.tips(1, T0 + i * MIN))]
    assert events + engine.flush() == []
