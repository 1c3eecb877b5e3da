"""join_cycles (a poll sent one reading a message, as one cycle) gives the readings of its messages, in
order, field by field (types too), and of the same poll sent as one message -- with one shape object
for one gateway's polls; and refuses messages of different polls: another time, boot, gateway or
site, or seqs that do not follow."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stormwatch.fastwire import Cycle, fast_cycle, fast_readings, join_cycles
from tests.ingest.test_fastwire import _SERIES, body
from tests.ingest.test_fastwire_cycle import SERIES, _cycle_of, _fields


def _messages(items: list[dict[str, Any]]) -> list[Cycle]:
    out = []
    for one in items:
        cycle = fast_cycle(body(one, batch=False))
        assert cycle is not None
        out.append(cycle)
    return out


@st.composite
def polls(draw: st.DrawFn) -> list[dict[str, Any]]:
    n = draw(st.integers(min_value=1, max_value=6))
    picked = [draw(st.sampled_from(_SERIES)) for _ in range(n)]
    seq = draw(st.integers(min_value=0, max_value=2 ** 63 - 7))
    items = [{**one, "seq": seq + i} for i, one in enumerate(_cycle_of([(d, q, u, draw(v)) for d, q, u, v in picked]))]
    if draw(st.booleans()):
        for one in items:
            one.pop("raw")
    return items


@settings(max_examples=200, deadline=None)
@given(polls())
def test_a_poll_one_reading_a_message_is_its_readings(items: list[dict[str, Any]]) -> None:
    whole = fast_readings(body(*items, batch=True))
    if whole is None:  # a value the fast path leaves to the full one (a NaN...): no cycle either
        assert any(fast_cycle(body(one, batch=False)) is None for one in items)
        return
    joined = join_cycles(_messages(items))
    assert joined is not None and len(joined) == len(items)
    each = [r for one in items for r in fast_readings(body(one, batch=False))[0]]  # type: ignore[index]
    assert _fields(joined.readings()) == _fields(each) == _fields(whole[0])
    assert _fields([joined.reading(i) for i in range(len(joined))]) == _fields(each)
    cycle = fast_cycle(body(*items, batch=True))
    assert cycle is not None and joined.shape is cycle.shape  # the engine finds its routes by identity


@pytest.mark.parametrize("change", [{"time": "2026-06-01T12:00:00Z"}, {"boot": "b2"}, {"gateway": "gw-other"},
                                    {"site": "other-site"}, {"seq": 7}])
def test_messages_of_different_polls_are_not_joined(change: dict[str, Any]) -> None:
    items = [{**one, "seq": i} for i, one in enumerate(_cycle_of(SERIES))]
    items[2] = {**items[2], **change}
    assert join_cycles(_messages(items)) is None
    assert join_cycles(_messages(items[:2])) is not None and join_cycles(_messages(items[2:3])) is not None
