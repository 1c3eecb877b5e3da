"""The ingest process's collector settings: start-up frozen, the young generation collected rarely."""

from __future__ import annotations

import gc

from stormwatch.ingest.heap import THRESHOLDS, steady_heap


def test_steady_heap_freezes_start_up_and_raises_the_thresholds() -> None:
    before = gc.get_threshold()
    try:
        steady_heap()
        assert gc.get_threshold() == THRESHOLDS
        assert gc.get_freeze_count() > 0
        assert THRESHOLDS[0] > before[0]
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
