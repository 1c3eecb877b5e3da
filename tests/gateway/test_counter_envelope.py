"""Counter plausibility is physical (issue 11 item 1; failure-kinds.md #26): property tests.

The envelope is computed here by hand from its definition (docs/reference/rain-records.md:
1.5 × 422 mm × D^0.475, D in hours), not with stormwatch.physics, and compared with what
``count_tips`` attributes for random counter sequences, widths (16/32 bit), intervals, resets
and outages.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from stormwatch.gateway.counter import CounterState, CounterStore, count_tips
from stormwatch.gateway.outbox import Outbox
from stormwatch.gateway.plan import CounterPlan, counter_plan
from stormwatch.profiles import CounterSpec

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
TIP_MM = {"0.01 in": 0.254, "0.2 mm": 0.2}


def envelope_tips(seconds: float, tip_mm: float, intensity_mm_h: float | None = None) -> int:
    """The most whole tips in ``seconds``: 1.5 × Jennings, or the gauge's own rate limit if lower."""
    if seconds <= 0:
        return 0
    mm = 1.5 * 422 * (seconds / 3600) ** 0.475
    if intensity_mm_h is not None:
        mm = min(mm, intensity_mm_h * seconds / 3600)
    return int(mm // tip_mm)


def spec(width: int, resolution: str = "0.01 in", intensity: float | None = None) -> CounterSpec:
    return CounterSpec(width_bits=width, resolution=resolution, max_intensity_mm_h=intensity)


widths = st.sampled_from([16, 32])
resolutions = st.sampled_from(["0.01 in", "0.2 mm"])
intensities = st.one_of(st.none(), st.floats(min_value=50, max_value=2000))
# Intervals from 0 s to 30 days (a gateway down for weeks), in whole seconds.
intervals = st.integers(min_value=0, max_value=30 * 86400)


@settings(max_examples=300, deadline=None)
@given(width=widths, resolution=resolutions, intensity=intensities, data=st.data())
def test_random_sequences_never_exceed_the_envelope_nor_go_negative(
        width: int, resolution: str, intensity: float | None, data: st.DataObject) -> None:
    s = spec(width, resolution, intensity)
    top = (1 << width) - 1
    steps = data.draw(st.lists(st.tuples(intervals, st.integers(min_value=0, max_value=top)), min_size=1,
                               max_size=40))
    state: CounterState | None = None
    at = T0
    for gap_s, sample in steps:
        at += timedelta(seconds=gap_s)
        result = count_tips(state, sample, at, s)
        assert type(result.tips) is int
        assert result.tips >= 0
        if state is None:
            assert result.tips == 0
        else:
            # Never more than the envelope allows since the last trusted sample.
            allowed = envelope_tips((at - state.time).total_seconds(), TIP_MM[resolution], intensity)
            assert result.tips <= allowed, (state, sample, at, result)
        state = result.state


@settings(max_examples=300, deadline=None)
@given(width=widths, resolution=resolutions, start=st.integers(min_value=0), data=st.data())
def test_plausible_rain_is_counted_exactly_through_wraps(width: int, resolution: str, start: int,
                                                         data: st.DataObject) -> None:
    # Nothing silently dropped: every rise within the envelope is counted, wraps included.
    modulus = 1 << width
    value = start % modulus
    s = spec(width, resolution)
    state = count_tips(None, value, T0, s).state
    at = T0
    total = counted = 0
    for _ in range(data.draw(st.integers(min_value=1, max_value=30))):
        gap_s = data.draw(st.integers(min_value=1, max_value=7 * 86400))
        tips = data.draw(st.integers(min_value=0, max_value=envelope_tips(gap_s, TIP_MM[resolution])))
        at += timedelta(seconds=gap_s)
        value = (value + tips) % modulus
        total += tips
        result = count_tips(state, value, at, s)
        assert result.outcome in ("rise", "wrap")
        counted += result.tips
        state = result.state
    assert counted == total


@given(width=widths)
def test_a_real_wrap_one_minute_later_counts_exactly_nine(width: int) -> None:
    # 65530 -> 3 (16-bit): 5 tips to 65535, 1 to 0, 3 more = 9. Likewise 2**32 - 6 -> 3.
    before = (1 << width) - 6
    result = count_tips(CounterState(before, T0), 3, T0 + timedelta(minutes=1), spec(width))
    assert (result.tips, result.outcome, result.flags) == (9, "wrap", ("counter_wrap",))


@settings(max_examples=200, deadline=None)
@given(width=widths, baseline=st.integers(min_value=1, max_value=65535), down_h=st.floats(min_value=0.02, max_value=72),
       after=st.integers(min_value=0, max_value=20))
def test_a_reset_during_an_outage_is_a_gap_never_rain(width: int, baseline: int, down_h: float, after: int) -> None:
    # The counter module loses power and restarts at 0; the gateway reads it ``down_h`` hours later
    # and then once a minute. Whenever the drop cannot be a wrap within the envelope, no tip is
    # attributed to the outage, the reset is confirmed with its gap, and only the tips after the
    # restart sample are counted.
    s = spec(width)
    back = T0 + timedelta(hours=down_h)
    later = back + timedelta(minutes=1)
    # Not this case: a wrap of that size is physically possible after that long, or the counter is
    # back at (or just above) the trusted value -- then it is indistinguishable from a glitch.
    assume((1 << width) - baseline > envelope_tips((back - T0).total_seconds(), 0.254))
    assume((after - baseline) % (1 << width) > envelope_tips((later - T0).total_seconds(), 0.254))
    first = count_tips(CounterState(baseline, T0), 0, back, s)
    assert (first.tips, first.outcome, first.flags) == (0, "suspect", ("counter_suspect",))
    second = count_tips(first.state, after, later, s)
    assert (second.tips, second.outcome, second.gap_start) == (after, "reset", T0)
    assert second.flags == ("counter_reset",)


def test_issue_case_1588_then_zero_ten_hours_later(tmp_path: Path) -> None:
    # The persisted baseline is 1,588; the site loses power; the gateway comes back 10 h later and
    # reads 0. Through a wrap that would be 65,536 - 1,588 = 63,948 tips (639 in); the envelope for
    # 10 h is 1.5 x 422 x 10^0.475 = 1,889.7 mm = 7,439 tips of 0.254 mm.
    assert envelope_tips(10 * 3600, 0.254) == 7439
    db = tmp_path / "gateway.sqlite3"
    outbox = Outbox(db)
    outbox.add([], {"rain-1": CounterState(1588, T0)})
    outbox.close()
    store = CounterStore(db)
    persisted = store.load("rain-1")
    store.close()
    s = spec(16)
    back = T0 + timedelta(hours=10)
    first = count_tips(persisted, 0, back, s, expected_interval_s=60)
    assert (first.tips, first.outcome) == (0, "suspect")
    second = count_tips(first.state, 0, back + timedelta(minutes=1), s, expected_interval_s=60)
    assert (second.tips, second.outcome, second.gap_start, second.flags) == (0, "reset", T0, ("counter_reset",))


def test_a_gateway_down_for_days_counts_a_plausible_rise_and_says_so() -> None:
    # Down 3 days (the counter module kept counting): 80 new tips are plausible (envelope over 72 h:
    # 1.5 x 422 x 72^0.475 = 4,827 mm) -- counted, flagged counter_catch_up (when they fell is unknown).
    s = spec(16)
    back = T0 + timedelta(days=3)
    result = count_tips(CounterState(1420, T0), 1500, back, s, expected_interval_s=60)
    assert (result.tips, result.outcome, result.flags) == (80, "rise", ("counter_catch_up",))
    # Within two poll intervals it is a plain rise.
    plain = count_tips(CounterState(1420, T0), 1421, T0 + timedelta(seconds=120), s, expected_interval_s=60)
    assert (plain.tips, plain.flags) == (1, ())


def test_profile_tightening_only_tightens() -> None:
    # A gauge whose datasheet range is 700 mm/h: 1 minute allows 11.67 mm = 45 tips of 0.254 mm,
    # fewer than the envelope's 356.
    assert envelope_tips(60, 0.254, 700) == 45
    s = spec(16, intensity=700)
    assert count_tips(CounterState(0, T0), 45, T0 + timedelta(minutes=1), s).tips == 45
    assert count_tips(CounterState(0, T0), 46, T0 + timedelta(minutes=1), s).outcome == "suspect"
    # Over a day the envelope (2,864 mm) is tighter than 700 mm/h x 24 h = 16,800 mm.
    day = envelope_tips(86400, 0.254)
    assert envelope_tips(86400, 0.254, 700) == day
    assert count_tips(CounterState(0, T0), day, T0 + timedelta(days=1), spec(32, intensity=700)).tips == day
    assert count_tips(CounterState(0, T0), day + 1, T0 + timedelta(days=1), spec(32, intensity=700)).tips == 0


def test_no_wrap_counter_of_a_file_never_wraps() -> None:
    # width_bits None (a console's running total): a drop is never a wrap, however long the gap.
    class Total:
        mode = "cumulative"
        width_bits = None
        max_intensity_mm_h = None
        tip_resolution = CounterSpec(resolution="0.01 in").tip_resolution

    result = count_tips(CounterState(10966, T0), 3, T0 + timedelta(days=365), Total())  # type: ignore[arg-type]
    assert (result.tips, result.outcome) == (0, "suspect")
    big = count_tips(CounterState(10966, T0), 10966 + 5000, T0 + timedelta(days=1), Total())  # type: ignore[arg-type]
    assert (big.tips, big.outcome) == (5000, "rise")


def test_lean_counter_plan_and_pydantic_spec_stay_in_step() -> None:
    # Every field of the profile's CounterSpec exists on the gateway's CounterPlan with the same value.
    spec = CounterSpec(resolution="0.2 mm", width_bits=32, mode="delta", max_intensity_mm_h=700.0)
    plan = counter_plan(spec, "{tip}")
    assert set(CounterSpec.model_fields) <= {f.name for f in dataclasses.fields(CounterPlan)}
    assert all(getattr(plan, name) == getattr(spec, name) for name in CounterSpec.model_fields)
    assert plan.tip_resolution == spec.tip_resolution


@settings(max_examples=100, deadline=None)
@given(width=st.sampled_from([16, 24, 32]), intensity=intensities, data=st.data())
def test_count_tips_answers_the_same_for_the_plan_and_the_spec(width: int, intensity: float | None,
                                                                 data: st.DataObject) -> None:
    s = spec(width, "0.01 in", intensity)
    plan = counter_plan(s, "{tip}")
    a: CounterState | None = None
    b: CounterState | None = None
    at = T0
    for gap_s, sample in data.draw(st.lists(st.tuples(intervals, st.integers(0, (1 << width) - 1)), max_size=20)):
        at += timedelta(seconds=gap_s)
        ra, rb = count_tips(a, sample, at, s, 60), count_tips(b, sample, at, plan, 60)
        assert (ra.tips, ra.outcome, ra.flags, ra.gap_start) == (rb.tips, rb.outcome, rb.flags, rb.gap_start)
        a, b = ra.state, rb.state


def test_retired_max_tips_per_s_is_refused_with_the_reason() -> None:
    with pytest.raises(ValidationError, match=r"max_tips_per_s is retired.*rain-records\.md"):
        CounterSpec.model_validate({"resolution": "0.01 in", "max_tips_per_s": 2.0})
