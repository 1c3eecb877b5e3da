"""fast_cycle (a message decoded straight into a poll cycle's columns) accepts only what fast_readings
accepts, with the same readings field by field (types too), and takes every plain poll cycle that
fast_readings takes: on the fast parser's hand-made payloads and on generated cycles, some with one
field of one reading changed."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stormwatch.fastwire import Cycle, fast_cycle, fast_readings
from tests.ingest.test_fastwire import _FIELDS, _SERIES, BAD, GOOD, GW, SITE, body


def _fields(readings: list[Any]) -> list[dict[str, Any]]:
    return [{**r.__dict__, "type": {k: type(v).__name__ for k, v in r.__dict__.items()}} for r in readings]


def _plain_cycle(readings: list[Any]) -> bool:
    r0 = readings[0]
    return all(r.site == r0.site and r.gateway == r0.gateway and r.boot == r0.boot and r.time is r0.time
               and not r.flags and r.seq == r0.seq + i for i, r in enumerate(readings))


def same_verdict(payload: bytes) -> Cycle | None:
    cycle = fast_cycle(payload)
    fast = fast_readings(payload)
    if cycle is None:
        assert fast is None or not _plain_cycle(fast[0]), payload
        return None
    assert fast is not None, payload
    assert _fields(cycle.readings()) == _fields(fast[0]), payload
    assert _fields([cycle.reading(i) for i in range(len(cycle))]) == _fields(fast[0])
    return cycle


@pytest.mark.parametrize("payload", GOOD + BAD, ids=range(len(GOOD + BAD)))
def test_hand_made_messages(payload: bytes) -> None:
    same_verdict(payload)


def test_a_poll_cycle_is_one_cycle_with_one_shape() -> None:
    cycles = [same_verdict(body(*({**one, "seq": seq + i} for i, one in enumerate(_cycle_of(SERIES))), batch=True))
              for seq in (10, 14)]
    assert cycles[0] is not None and cycles[1] is not None
    assert cycles[0].shape is cycles[1].shape and len(cycles[0]) == 4 and cycles[1].seq == 14


SERIES = [("turb-down", "turbidity", "NTU", 12.0), ("turb-up", "turbidity", "NTU", 11),
          ("rain-1", "rain_tips", "{tip}", 2), ("basin-level", "distance", "mm", 2000.5)]


def _cycle_of(series: list[tuple[str, str, str, Any]]) -> list[dict[str, Any]]:
    out = []
    for device, quantity, unit, value in series:
        one = {"site": SITE, "device": device, "quantity": quantity, "value": value, "unit": unit,
               "time": "2026-06-01T11:59:00Z", "gateway": GW, "boot": "b1", "seq": 0, "raw": [1, 2]}
        if quantity == "rain_tips":
            one["tip_size"] = "0.01 in"
        out.append(one)
    return out


def poll_items(most: int) -> st.SearchStrategy[list[dict[str, Any]]]:
    """The readings of one poll of 1 to ``most`` series, gap-free seqs; sometimes one field of one reading
    changed or dropped, as the fast parser's test does."""
    @st.composite
    def items_of(draw: st.DrawFn) -> list[dict[str, Any]]:
        n = draw(st.integers(min_value=1, max_value=most))
        picked = [draw(st.sampled_from(_SERIES)) for _ in range(n)]
        series = [(d, q, u, draw(values)) for d, q, u, values in picked]
        seq = draw(st.integers(min_value=0, max_value=2 ** 63 - 1 - most))
        items = [{**one, "seq": seq + i} for i, one in enumerate(_cycle_of(series))]
        if draw(st.booleans()):
            one = draw(st.sampled_from(items))
            name = draw(st.sampled_from(sorted(_FIELDS)))
            if draw(st.integers(min_value=0, max_value=5)) == 0:
                one.pop(name, None)
            else:
                one[name] = draw(_FIELDS[name])
        return items
    return items_of()


@st.composite
def cycles(draw: st.DrawFn) -> bytes:
    items = draw(poll_items(4))
    return body(*items, batch=draw(st.booleans()) or len(items) > 1)


@settings(max_examples=300, deadline=None)
@given(cycles())
def test_generated_cycles(payload: bytes) -> None:
    same_verdict(payload)
