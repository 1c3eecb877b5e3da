"""poll_cycle (a poll sent one reading a message, taken as one cycle from its messages' decoded readings,
fast_wire) gives what fast_cycle gives of the same poll sent as one message -- the same verdict and the
same readings field by field (types too), with one shape object for one gateway's polls -- on
generated polls, some with one field of one reading changed; and refuses messages of different polls:
another time, boot, gateway or site, or seqs that do not follow."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings

from stormwatch.fastwire import Wire, fast_cycle, fast_readings, fast_wire, poll_cycle
from tests.ingest.test_fastwire import body
from tests.ingest.test_fastwire_cycle import SERIES, _cycle_of, _fields, poll_items


def _wires(items: list[dict[str, Any]]) -> list[Wire] | None:
    wires = [fast_wire(body(one, batch=False)) for one in items]
    return None if any(w is None for w in wires) else wires  # type: ignore[return-value]


@settings(max_examples=300, deadline=None)
@given(poll_items(6))
def test_a_poll_one_reading_a_message_is_the_poll_in_one(items: list[dict[str, Any]]) -> None:
    whole = fast_cycle(body(*items, batch=True))
    wires = _wires(items)
    if wires is None:  # a message the decoder refuses is the full path's, on its own
        assert whole is None
        return
    cycle = poll_cycle(wires)
    if whole is None:
        assert cycle is None
        return
    assert cycle is not None and len(cycle) == len(items)
    each = [r for one in items for r in fast_readings(body(one, batch=False))[0]]  # type: ignore[index]
    assert _fields(cycle.readings()) == _fields(whole.readings()) == _fields(each)
    assert _fields([cycle.reading(i) for i in range(len(cycle))]) == _fields(each)
    assert cycle.shape is whole.shape  # the engine finds its routes by identity


@pytest.mark.parametrize("change", [{"time": "2026-06-01T12:00:00Z"}, {"boot": "b2"}, {"gateway": "gw-other"},
                                    {"site": "other-site"}, {"seq": 7}, {"flags": ["spike"]}])
def test_messages_of_different_polls_are_not_one_cycle(change: dict[str, Any]) -> None:
    items = [{**one, "seq": i} for i, one in enumerate(_cycle_of(SERIES))]
    items[2] = {**items[2], **change}
    wires = _wires(items)
    assert wires is not None and poll_cycle(wires) is None
    assert poll_cycle(wires[:2]) is not None
    assert fast_wire(body(*items[:2], batch=True)) is None and poll_cycle([]) is None
