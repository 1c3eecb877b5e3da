"""R1 honours every quality flag of rain readings (issue 11 items 1 and 5; rules.md R1).

* ``counter_reset``: rain since the gauge's last trusted reading is unknown -> a data_gap from that
  reading to the reset, never dry;
* ``counter_suspect``: not coverage (neither rain nor dry);
* a count beyond the world-record envelope is not rain (data gap);
* any other flag: the storm's events say ``needs_verification``.

Expected values by hand: the test site's gauge is 0.01 in per tip (50 tips = 0.5 in qualify) and
polled every 600 s (silence allowance 2 x 600 s = 20 min); the envelope over 10 min is
1.5 x 422 x (10/60)^0.475 mm = 270.3 mm = 1,064 tips of 0.254 mm.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from stormwatch.alerts.engine import Engine
from stormwatch.alerts.packs import load_pack
from stormwatch.alerts.workorders import WorkOrders
from stormwatch.clock import ManualClock
from stormwatch.contract import Event, Reading
from stormwatch.profiles import ProfileLibrary
from tests.alerts_support import T0, Feeder, site

TEN = timedelta(minutes=10)


def engine(tmp_path: Path) -> tuple[Engine, WorkOrders]:
    cfg = site("ch133")
    wo = WorkOrders(tmp_path / "wo.db", ManualClock(T0))
    return Engine(cfg, ProfileLibrary(), load_pack("ch133", cfg.rules), wo, lateness_s=0), wo


def rain(feed: Feeder, tips: int, i: int, *flags: str) -> Reading:
    return feed("rain", "rain_tips", tips, "{tip}", T0 + i * TEN, flags=tuple(flags))


def run(eng: Engine, readings: list[Reading]) -> list[Event]:
    out: list[Event] = []
    for r in readings:
        out += eng.feed(r)
    return [e for e in out + eng.flush() if e.rule == "R1"]


def test_envelope_over_ten_minutes_by_hand() -> None:
    assert int(1.5 * 422 * (10 / 60) ** 0.475 // 0.254) == 1064


def test_counter_reset_opens_a_gap_since_the_last_trusted_reading(tmp_path: Path) -> None:
    eng, _ = engine(tmp_path)
    feed = Feeder()
    events = run(eng, [rain(feed, 0, 0), rain(feed, 0, 1), rain(feed, 0, 2, "counter_suspect"),
                       rain(feed, 0, 3, "counter_reset"), rain(feed, 0, 4)])
    gaps = [e for e in events if e.kind == "data_gap"]
    assert [(g.gap_start, g.gap_end) for g in gaps] == [(T0 + TEN, T0 + 3 * TEN)]
    assert "unknown, not zero" in gaps[0].message and "counter reset" in gaps[0].message
    assert [(g.start, g.end) for g in eng.gaps()] == [(T0 + TEN, T0 + 3 * TEN)]


def test_suspect_readings_are_not_coverage(tmp_path: Path) -> None:
    # Trusted at 0; suspects at +10, +20, +30 min: after 20 min of event time without a trusted
    # reading the gauge is "silent" -- a gap opens at the last trusted reading, closed by the reset.
    eng, _ = engine(tmp_path)
    feed = Feeder()
    events = run(eng, [rain(feed, 0, 0)] + [rain(feed, 0, i, "counter_suspect") for i in (1, 2, 3)]
                 + [rain(feed, 2, 4, "counter_reset")])
    gaps = [e for e in events if e.kind == "data_gap"]
    assert [(g.gap_start, g.gap_end) for g in gaps] == [(T0, None), (T0, T0 + 4 * TEN)]
    assert gaps[0].event_time == T0 + 2 * TEN  # silent for more than two poll intervals


def test_flagged_rain_never_silently_opens_a_storm(tmp_path: Path) -> None:
    eng, wo = engine(tmp_path)
    feed = Feeder()
    readings = [rain(feed, 0, 0), rain(feed, 30, 1, "device_error"), rain(feed, 30, 2)]
    readings += [rain(feed, 0, i) for i in range(3, 3 + 40)]  # dry for 6 h 40 min
    events = run(eng, readings)
    assert [e.kind for e in events] == ["storm_started", "storm_qualified", "storm_inspection_due"]
    assert all(e.needs_verification == ["device_error"] for e in events)
    assert all("needs verification" in e.message for e in events)
    assert events[-1].tips == 60
    assert events[-1].to_wire()["needs_verification"] == ["device_error"]
    assert [o.kind for o in wo.list() if o.rule == "R1"] == ["storm_inspection"]  # still due


def test_clean_storm_needs_no_verification(tmp_path: Path) -> None:
    eng, _ = engine(tmp_path)
    feed = Feeder()
    readings = [rain(feed, 0, 0, "counter_baseline"), rain(feed, 30, 1, "counter_wrap"), rain(feed, 30, 2)]
    readings += [rain(feed, 0, i) for i in range(3, 3 + 40)]
    events = run(eng, readings)
    assert [e.kind for e in events] == ["storm_started", "storm_qualified", "storm_inspection_due"]
    assert all(e.needs_verification is None for e in events)
    assert "needs_verification" not in events[-1].to_wire()


def test_flagged_reading_never_silently_closes_a_storm(tmp_path: Path) -> None:
    # 60 clean tips, then dry readings; the one that completes the 6-h dry gap is flagged device_error.
    eng, _ = engine(tmp_path)
    feed = Feeder()
    readings = [rain(feed, 0, 0), rain(feed, 60, 1)] + [rain(feed, 0, i) for i in range(2, 37)]
    readings.append(rain(feed, 0, 37, "device_error"))  # 36 x 10 min = 6 h after the last tip
    events = run(eng, readings)
    assert [e.kind for e in events] == ["storm_started", "storm_qualified", "storm_inspection_due"]
    assert [e.needs_verification for e in events] == [None, None, ["device_error"]]


def test_catch_up_tips_after_an_outage_are_counted_and_flagged(tmp_path: Path) -> None:
    # The gateway was away 3 h; its counter rose by 55 tips meanwhile (possible: the envelope over
    # 3 h is 1.5 x 422 x 3^0.475 = 1,069 mm). Counted, the storm needs verification, and the outage
    # itself is a gap.
    eng, _ = engine(tmp_path)
    feed = Feeder()
    readings = [rain(feed, 0, 0), rain(feed, 55, 18, "counter_catch_up")] + [rain(feed, 0, i) for i in range(19, 60)]
    events = run(eng, readings)
    storms = [e for e in events if e.kind != "data_gap"]
    assert [e.kind for e in storms] == ["storm_started", "storm_qualified", "storm_inspection_due"]
    assert storms[-1].tips == 55 and storms[-1].needs_verification == ["counter_catch_up"]
    gaps = [(e.gap_start, e.gap_end) for e in events if e.kind == "data_gap"]
    assert gaps == [(T0, None), (T0, T0 + 18 * TEN)]


def test_a_count_beyond_the_envelope_is_not_rain(tmp_path: Path) -> None:
    # 1,065 tips 10 min after the previous reading: one more than physics allows -> no storm, a gap.
    eng, wo = engine(tmp_path)
    feed = Feeder()
    events = run(eng, [rain(feed, 0, 0), rain(feed, 1065, 1), rain(feed, 0, 2)])
    assert [e.kind for e in events] == ["data_gap"]
    assert (events[0].gap_start, events[0].gap_end) == (T0, T0 + TEN)
    assert "more rain than physically possible" in events[0].message
    assert [o for o in wo.list() if o.rule == "R1"] == []
    # Exactly the envelope is rain (a storm of 1,064 tips = 10.64 in).
    (tmp_path / "b").mkdir()
    eng2, _ = engine(tmp_path / "b")
    feed2 = Feeder()
    events2 = run(eng2, [rain(feed2, 0, 0), rain(feed2, 1064, 1)])
    assert [e.kind for e in events2] == ["storm_started", "storm_qualified"]
    assert events2[-1].tips == 1064


def test_impossible_values_never_reach_a_rule(tmp_path: Path) -> None:
    eng, _ = engine(tmp_path)
    feed = Feeder()
    assert eng.feed(rain(feed, -5, 0)) == []
    assert eng.feed(feed("up", "turbidity", -3.0, "NTU", T0)) == []
    assert eng.counts["impossible"] == 2 and eng.counts["fed"] == 0


def test_readings_of_one_instant_are_judged_together_and_the_first_not_at_all(tmp_path: Path) -> None:
    cfg = site("ch133")
    eng = Engine(cfg, ProfileLibrary(), load_pack("ch133", cfg.rules), None, lateness_s=120)
    feed = Feeder()
    # The first reading covers an unknown interval: 1,500 tips are not judged (never refuse real rain).
    # Then three readings at +10 min: 1,000 + 64 = 1,064 tips since the previous instant fit the
    # envelope; the third (1 more tip) does not -- it is refused and the 10 minutes become a gap.
    events = run(eng, [rain(feed, 1500, 0), rain(feed, 1000, 1), rain(feed, 64, 1), rain(feed, 1, 1)])
    assert [e.kind for e in events] == ["storm_started", "storm_qualified", "data_gap"]
    assert events[1].tips == 1500
    assert (events[2].gap_start, events[2].gap_end) == (T0, T0 + TEN)
    assert "1065 tips" in events[2].message
    assert eng.in_progress()[0].tips == 1500 + 1064
