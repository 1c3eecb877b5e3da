"""Counter glitch vs wrap vs reset, and restart double-count (failure-kinds.md #6, #7, #26).

Plausibility is the world-record envelope (docs/reference/rain-records.md): 1.5 × 422 mm ×
D^0.475 (D in hours). Over 60 s that is 1.5 × 422 × (1/60)^0.475 = 90.5 mm = 356 tips of 0.254 mm
(hand-computed below with the formula, not with stormwatch.physics).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stormwatch.gateway.counter import CounterError, CounterState, CounterStore, count_tips
from stormwatch.gateway.outbox import Outbox
from stormwatch.profiles import CounterSpec

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
SPEC16 = CounterSpec(mode="cumulative", width_bits=16, resolution="0.01 in")


def envelope_tips(seconds: float, tip_mm: float = 0.254) -> int:
    """Jennings (1950) × 1.5, by hand: the most whole tips in ``seconds``."""
    return int(1.5 * 422 * (seconds / 3600) ** 0.475 // tip_mm)


def run(samples: list[int], spec: CounterSpec = SPEC16, step_s: float = 60.0,
        state: CounterState | None = None) -> list[int]:
    """Tips per sample for samples taken every ``step_s`` seconds."""
    tips = []
    for i, s in enumerate(samples):
        result = count_tips(state, s, T0 + timedelta(seconds=i * step_s), spec)
        assert isinstance(result.tips, int)
        tips.append(result.tips)
        state = result.state
    return tips


def test_first_sample_is_a_baseline() -> None:
    result = count_tips(None, 1420, T0, SPEC16)
    assert (result.tips, result.outcome, result.flags) == (0, "baseline", ("counter_baseline",))


def test_plain_rise() -> None:
    assert run([100, 103, 103, 110]) == [0, 3, 0, 7]


def test_glitch_is_not_rain() -> None:
    # [115, 49, 115]: one bad sample, 0 new tips (not 66 + 66).
    assert run([115, 49, 115]) == [0, 0, 0]
    # Tips that fell during the glitch are still counted on recovery.
    assert run([115, 49, 118]) == [0, 0, 3]


def test_16bit_wrap_is_ten_tips() -> None:
    tips = run([65530, 4])
    assert tips == [0, 10]
    res = count_tips(CounterState(65530, T0), 4, T0 + timedelta(seconds=60), SPEC16)
    assert res.outcome == "wrap"


def test_drop_too_big_for_a_wrap_at_plausible_rate_is_suspect() -> None:
    # 100 -> 50 as a wrap would be 65,486 tips in 60 s; the envelope allows 356.
    assert envelope_tips(60) == 356
    res = count_tips(CounterState(100, T0), 50, T0 + timedelta(seconds=60), SPEC16)
    assert (res.tips, res.outcome) == (0, "suspect")


def test_reset_after_logger_reboot_counts_three() -> None:
    # 812 -> 0 -> 3: the tips before the reset were already counted; 3 new ones.
    assert run([812, 0, 3]) == [0, 0, 3]
    assert sum(run([800, 812, 0, 3, 5])) == 12 + 3 + 2


def test_cumulative_total_drop_and_back_is_not_rain() -> None:
    # The "1588.0 -> 0.0 -> 1588.0" case, as whole tips.
    assert run([1588, 0, 1588]) == [0, 0, 0]


def test_implausible_jump_up_is_suspect_not_rain() -> None:
    assert run([115, 60000, 115]) == [0, 0, 0]


def test_24_bit_wrap() -> None:
    spec = CounterSpec(width_bits=24, resolution="0.2 mm")
    assert run([2**24 - 2, 1], spec=spec) == [0, 3]


def test_delta_mode() -> None:
    spec = CounterSpec(mode="delta", resolution="0.01 in")
    # First read: unknown period -> baseline; then each read is the delta itself.
    assert run([7, 3, 0, 5], spec=spec) == [0, 3, 0, 5]
    # 500 tips (127 mm) in 60 s is beyond the envelope (356 tips = 90.5 mm): a reset, no rain
    # invented, the minute is a data gap.
    assert run([0, 500], spec=spec) == [0, 0]
    res = count_tips(CounterState(0, T0), 500, T0 + timedelta(seconds=60), spec)
    assert (res.tips, res.outcome, res.flags, res.gap_start) == (0, "reset", ("counter_reset",), T0)
    assert count_tips(CounterState(0, T0), 356, T0 + timedelta(seconds=60), spec).tips == 356


def test_delta_after_a_lost_count_is_a_gap_with_its_tips() -> None:
    # A count the device reset and nobody read: the 4 tips after it are known, the time since the
    # trusted sample is a gap -- never 4 tips posing as the whole two minutes.
    spec = CounterSpec(mode="delta", resolution="0.01 in")
    res = count_tips(CounterState(0, T0), 4, T0 + timedelta(seconds=120), spec, 60.0, gap_before=True)
    assert (res.tips, res.outcome, res.gap_start, res.flags) == (4, "reset", T0, ("counter_reset",))
    assert res.state == CounterState(0, T0 + timedelta(seconds=120))
    first = count_tips(None, 4, T0, spec, 60.0, gap_before=True)  # the first sample stays a baseline
    assert (first.tips, first.outcome) == (0, "baseline")


def test_bad_sample_raises() -> None:
    with pytest.raises(CounterError):
        count_tips(None, 70000, T0, SPEC16)
    with pytest.raises(CounterError):
        count_tips(None, 12.5, T0, SPEC16)


def test_restart_reading_same_value_creates_no_rain(tmp_path: Path) -> None:
    # Failure #7: the state is persisted (committed with the reading in the outbox DB).
    db = tmp_path / "gateway.sqlite3"
    outbox = Outbox(db)
    first = count_tips(None, 1400, T0, SPEC16)
    second = count_tips(first.state, 1420, T0 + timedelta(seconds=60), SPEC16)
    assert second.tips == 20
    outbox.add([], {"rain-1": second.state})
    outbox.close()

    store = CounterStore(db)  # "after the restart"
    persisted = store.load("rain-1")
    assert persisted == CounterState(1420, T0 + timedelta(seconds=60))
    again = count_tips(persisted, 1420, T0 + timedelta(seconds=600), SPEC16)
    assert (again.tips, again.outcome) == (0, "rise")
    assert store.load("nope") is None
    store.close()
