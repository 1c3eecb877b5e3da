"""stormwatch.runtime.gcbatch: the young generation's threshold is raised inside the block and the
interpreter's own thresholds come back after it, also when the block raises."""

from __future__ import annotations

import gc

import pytest

from stormwatch.runtime.gcbatch import BATCH_THRESHOLD, fewer_collections


def test_the_threshold_is_raised_inside_and_restored_after() -> None:
    before = gc.get_threshold()
    with fewer_collections():
        inside = gc.get_threshold()
        with fewer_collections(10):  # nested with a lower one: the higher threshold stays
            assert gc.get_threshold() == inside
        assert gc.get_threshold() == inside
    assert inside == (max(before[0], BATCH_THRESHOLD), *before[1:])
    assert gc.get_threshold() == before


def test_the_thresholds_come_back_when_the_block_raises() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError, match="boom"), fewer_collections(250_000):
        assert gc.get_threshold()[0] == 250_000
        raise RuntimeError("boom")
    assert gc.get_threshold() == before


def test_cycles_are_still_collected_inside() -> None:
    class Node:
        def __init__(self) -> None:
            self.me = self

    with fewer_collections():
        gc.collect()
        Node()
        assert gc.collect() >= 1  # the cycle made inside the block is found
