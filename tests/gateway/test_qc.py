"""Edge QC history tests (flatline, spike) and the outbox drop policy by size and age."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from stormwatch.contract import Reading
from stormwatch.gateway.outbox import Outbox
from stormwatch.gateway.qc import ValueHistory
from stormwatch.profiles import QcSpec

T0 = datetime(2026, 6, 1, tzinfo=UTC)


def test_flatline_after_n_identical_samples() -> None:
    h = ValueHistory()
    qc = QcSpec(flatline_samples=4, flatline_tolerance=0.0)
    flags = [h.check(v, qc) for v in [5.0, 5.0, 5.0, 5.0, 5.0, 5.1, 5.1]]
    # the 4th equal sample is the first flatline; a change ends it
    assert flags == [(), (), (), ("flatline",), ("flatline",), (), ()]


def test_flatline_tolerance() -> None:
    h = ValueHistory()
    qc = QcSpec(flatline_samples=3, flatline_tolerance=0.01)
    assert [h.check(v, qc) for v in [1.0, 1.004, 1.008, 1.03]] == [(), (), ("flatline",), ()]


def test_spike_against_the_median_of_neighbours() -> None:
    h = ValueHistory()
    qc = QcSpec(spike_delta=50.0, spike_window=3)
    values = [10.0, 12.0, 11.0, 400.0, 12.0, 13.0, 70.0]
    # 400 is 389 above the median 11 of [10, 12, 11]; after it the median of [11, 400, 12] is 12:
    # 12 is fine; 70 is 57 above the median 13 of [400, 12, 13].
    assert [h.check(v, qc) for v in values] == [(), (), (), ("spike",), (), (), ("spike",)]


def test_no_qc_no_flags() -> None:
    h = ValueHistory()
    assert [h.check(1.0, None) for _ in range(5)] == [()] * 5


def _r(seq: int, quantity: str, minute: float) -> Reading:
    return Reading(site="s", device="d", quantity=quantity, value=1 if quantity == "rain_tips" else 1.5,
                   unit="{tip}" if quantity == "rain_tips" else "NTU", time=T0 + timedelta(minutes=minute),
                   gateway="g", boot="b", seq=seq)


def test_outbox_age_bound_drops_old_non_rain_never_rain(tmp_path: Path) -> None:
    box = Outbox(tmp_path / "o.sqlite3", max_age_s=3600)
    box.add([_r(0, "rain_tips", 0), _r(1, "turbidity", 0), _r(2, "turbidity", 30)])
    box.add([_r(3, "turbidity", 61), _r(4, "rain_tips", 61)])  # minute 0 is now 61 min old
    assert [r.seq for r in box.pending(10)] == [0, 2, 3, 4]  # the old rain tip stays
    assert box.dropped == 1 and box.depth() == 4
    box.close()


def test_outbox_byte_bound_and_counters_survive_reopen(tmp_path: Path) -> None:
    path = tmp_path / "o.sqlite3"
    box = Outbox(path)
    box.add([_r(i, "turbidity", i) for i in range(10)])
    size = box.size_bytes()
    box.close()
    one = size // 10
    box = Outbox(path, max_bytes=one * 6 + 1)  # reopened: counters rebuilt from the table
    assert box.depth() == 10 and box.size_bytes() == size
    box.add([_r(10, "rain_tips", 10)])
    assert box.size_bytes() <= one * 6 + 1
    assert [r.seq for r in box.pending(20)][-1] == 10 and box.depth() <= 6
    box.delete([r.id for r in box.pending(20)])
    assert box.depth() == 0 and box.size_bytes() == 0
    box.close()
