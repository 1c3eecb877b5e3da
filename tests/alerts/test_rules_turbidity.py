"""R2 turbidity contrast (Ch. 133 §133-6C, Ch. 196 §196-8C) with the Washington criterion
(WAC 173-201A-200): <= 5 NTU over background when background <= 50 NTU, <= 10 % over above 50.
Readings every minute; 5-minute medians; sustained 15 min."""

from __future__ import annotations

from datetime import timedelta

from stormwatch.alerts.engine import Engine
from stormwatch.alerts.packs import load_pack
from stormwatch.contract import Event
from stormwatch.profiles import ProfileLibrary
from tests.alerts_support import T0, Feeder, site

MIN = timedelta(minutes=1)


def run(minutes: int, up, down, rules=None, up_flags=lambda i: (), down_flags=lambda i: ()) -> list[Event]:
    """``up(i)``/``down(i)`` give the NTU at minute i (None = no reading)."""
    cfg = site("ch133", rules=rules)
    engine = Engine(cfg, ProfileLibrary(), load_pack("ch133", cfg.rules), None, lateness_s=120)
    feed = Feeder()
    events: list[Event] = []
    for i in range(minutes):
        t = T0 + i * MIN
        if up(i) is not None:
            events += engine.feed(feed("up", "turbidity", up(i), "NTU", t, flags=up_flags(i)))
        if down(i) is not None:
            events += engine.feed(feed("down", "turbidity", down(i), "NTU", t, flags=down_flags(i)))
    events += engine.flush()
    return [e for e in events if e.rule == "R2"]


def test_26_over_20_for_20_min_is_a_possible_violation() -> None:
    events = run(20, lambda i: 20.0, lambda i: 26.0)
    (ev,) = [e for e in events if e.kind == "turbidity_contrast"]
    assert ev.upstream_ntu == 20.0 and ev.downstream_ntu == 26.0
    assert ev.event_time == T0 + 15 * MIN  # third violating window closes at 15 min
    assert ev.citation == "Ch. 133 §133-6C"
    assert len(ev.evidence) == 3
    assert [v for _, v in ev.evidence[0]["upstream"]] == [20.0] * 5
    assert [v for _, v in ev.evidence[0]["downstream"]] == [26.0] * 5
    # Ch. 133 §133-6C is the Washington-style criterion (background + 5 NTU below 50 NTU): named as
    # the criterion, never as a "reason" (it is no cause of anything)
    assert [(x["criterion"], x["status"], x["allowed_ntu"], "reason" in x) for x in ev.evidence] == \
        [("washington", "violating", 25.0, False)] * 3
    assert ev.due_at == ev.event_time + timedelta(hours=24)


def test_26_over_20_for_10_min_is_not_sustained() -> None:
    events = run(30, lambda i: 20.0, lambda i: 26.0 if i < 10 else 21.0)
    assert [e.kind for e in events] == []


def test_24_over_20_is_compliant() -> None:
    assert run(30, lambda i: 20.0, lambda i: 24.0) == []


def test_25_over_20_is_exactly_the_limit() -> None:
    assert run(30, lambda i: 20.0, lambda i: 25.0) == []


def test_87_over_80_is_within_ten_percent() -> None:
    assert run(30, lambda i: 80.0, lambda i: 87.0) == []


def test_89_over_80_exceeds_ten_percent() -> None:
    assert [e.kind for e in run(20, lambda i: 80.0, lambda i: 89.0)] == ["turbidity_contrast"]


def test_single_1900_ntu_sample_is_not_a_violation() -> None:
    assert run(30, lambda i: 20.0, lambda i: 1900.0 if i == 7 else 22.0) == []


def test_missing_upstream_is_undetermined_never_violation() -> None:
    events = run(30, lambda i: None, lambda i: 300.0)
    assert [e.kind for e in events] == ["turbidity_undetermined"]
    assert "upstream" in events[0].message
    (window,) = events[0].evidence  # a window not judged says why, and by which criterion it would be
    assert (window["criterion"], window["status"], window["reason"]) == \
        ("washington", "undetermined", "no upstream (background) reading")


def test_upstream_goes_missing_mid_violation_breaks_the_run() -> None:
    # 10 min violating, then upstream missing: not 15 min of *confirmed* contrast
    events = run(30, lambda i: 20.0 if i < 10 else None, lambda i: 40.0)
    assert [e.kind for e in events] == ["turbidity_undetermined"]


def test_flagged_downstream_needs_verification() -> None:
    events = run(20, lambda i: 20.0, lambda i: 200.0, down_flags=lambda i: ("out_of_range",))
    assert [e.kind for e in events] == ["turbidity_needs_verification"]


def test_clears_with_hysteresis() -> None:
    events = run(60, lambda i: 20.0, lambda i: 30.0 if i < 20 else 21.0)
    assert [e.kind for e in events] == ["turbidity_contrast", "turbidity_cleared"]
    assert events[1].event_time == T0 + 35 * MIN  # 3 compliant windows after the run ended at 20 min
    assert events[0].occurrence == events[1].occurrence


def test_absolute_criterion_needs_no_background() -> None:
    events = run(20, lambda i: None, lambda i: 160.0, rules={"R2": {"criterion": "absolute",
                                                                     "absolute_limit_ntu": 150}})
    assert [e.kind for e in events] == ["turbidity_contrast"]
    assert run(20, lambda i: None, lambda i: 140.0, rules={"R2": {"criterion": "absolute"}}) == []
