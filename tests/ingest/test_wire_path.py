"""The wire path of a plain message (decoded readings written without a ``Reading`` each) gives what
the model path gives: the validator takes a message whole only when the full path accepts every
reading of it as it is, equal field by field; the event time in ns is the model's; the line of a
wire reading is the line of its ``Reading``, byte for byte -- on the hand-made and generated
payloads of tests/ingest/test_fastwire.py."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stormwatch.fastwire import _stamp, fast_wires, wire_reading
from stormwatch.stores.lineprotocol import encode_point, reading_lines, reading_point, time_ns
from tests.ingest.test_fastwire import BAD, GOOD, GW, TOPIC, Pair, body, rain, readings, wire


class Three(Pair):
    """The fast validator asked for the wire form first, then both validators as ingest asks them."""

    def check(self, payload: bytes) -> bool:
        plain = self.fast.plain(TOPIC, payload)
        fast_result = self.fast.validate(TOPIC, payload)
        full = self.full.validate(TOPIC, payload)
        if plain is None:
            return False
        wires, stamps = plain
        assert not (full.dead or full.late or full.duplicates or full.refused), payload
        made = [wire_reading(w, ns) for w, ns in zip(wires, stamps, strict=True)]
        assert [_typed(r.__dict__) for r in made] == [_typed(r.__dict__) for r in full.accepted]
        assert made == fast_result.accepted
        assert stamps == [time_ns(r.time) for r in full.accepted]
        return True


def _typed(fields: dict[str, Any]) -> dict[str, Any]:
    return {**fields, "types": {k: type(v).__name__ for k, v in fields.items()}}


@pytest.fixture(scope="module")
def three() -> Three:
    return Three()


def test_a_plain_message_takes_the_wire_path_once_its_series_is_known(three: Three) -> None:
    first = body(wire(seq=900), wire(seq=901, device="turb-up", quantity="temperature", unit="Cel", value=14))
    assert not three.check(first)  # its series checked once, through the model
    assert three.check(body(wire(seq=902), wire(seq=903, device="turb-up", quantity="temperature", unit="Cel",
                                                 value=15)))
    assert three.check(body(wire(seq=904, value=13)))  # an integer value of a float quantity: 13.0


def test_what_the_wire_path_leaves_to_the_model(three: Three) -> None:
    three.check(body(wire(seq=910)))
    stored = body(wire(seq=911))
    plain = three.fast.plain(TOPIC, stored)
    assert plain is not None
    three.fast.committed_wires(*plain)  # remembered from the wire form, as the model path remembers it
    three.full.committed(three.full.validate(TOPIC, stored).accepted)
    assert not three.check(stored)  # a duplicate
    assert len(three.same(stored).duplicates) == 1
    conflict = three.same(body(wire(seq=911, value=13.5)))  # a conflict, its stored value and time told
    assert [d.reason for d in conflict.dead] == ["conflicting_value"]
    assert not three.check(body(rain(seq=912)))  # rain: described by the site file first
    assert not three.fast.plain(TOPIC, body(wire(seq=913)), retained=True)  # late
    in_flight = body(wire(seq=915), wire(seq=916))
    assert three.fast.plain(TOPIC, in_flight) is not None
    assert three.fast.plain(TOPIC, in_flight, pending={(GW, "b1", 916)}) is None  # one being written: the model's
    assert not three.check(body(wire(seq=914, value=-1.0)))  # impossible_value


@pytest.mark.parametrize("payload", GOOD + BAD, ids=range(len(GOOD + BAD)))
def test_hand_made_payloads(three: Three, payload: bytes) -> None:
    three.check(payload)
    three.check(payload)  # again: its series known now, its identities not (nothing committed)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(readings(), min_size=1, max_size=4), st.booleans())
def test_generated_messages(three: Three, items: list[dict[str, Any]], batch: bool) -> None:
    payload = body(*items, batch=batch or len(items) > 1)
    three.check(payload)
    three.check(payload)


@settings(max_examples=300, deadline=None)
@given(st.lists(readings(), min_size=1, max_size=4), st.integers(min_value=0, max_value=999),
       st.integers(min_value=0, max_value=3), st.booleans())
def test_a_wire_readings_line_is_its_readings(items: list[dict[str, Any]], slot: int, page: int, late: bool) -> None:
    fast = fast_wires(body(*items, batch=True))
    if fast is None:
        return
    wires, stamps, _ = fast
    for w, ns in zip(wires, stamps, strict=True):
        r = wire_reading(w, ns)
        line = reading_lines([(w, page, slot, ns)], late=late)
        assert line == reading_lines([(r, page, slot, ns)], late=late)
        assert line == [encode_point(reading_point(r, late=late, slot=slot, page=page))]


@settings(max_examples=500, deadline=None)
@given(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)),
       st.integers(min_value=0, max_value=7))
def test_an_event_time_in_ns_is_the_models(t: datetime, digits: int) -> None:
    text = t.strftime("%Y-%m-%dT%H:%M:%S") + (f".{t.microsecond:06d}"[:digits + 1] if digits else "") + "Z"
    try:
        want: int | None = time_ns(datetime.fromisoformat(text))
    except ValueError:
        want = None
    got = _stamp(text)
    assert got == want or (got is None and digits == 7)


@pytest.mark.parametrize("text", ["2026-02-30T00:00:00Z", "2026-06-01T24:00:00Z", "2026-06-01T23:60:00Z",
                                  "2026-06-01T23:59:60Z", "2026-06-01T11:59:00.1234567Z", "2026-06-01T11:59:00z",
                                  "2026-06-01T11:59:00+00:00", "2026-06-01 11:59:00Z", "０２０２6-06-01T11:59:00Z",
                                  "2026-06-01T11:59:0٣Z", "0000-01-01T00:00:00Z"])
def test_other_time_texts_leave_the_wire_path(text: str) -> None:
    assert _stamp(text) is None
    _stamp(text[:16] + ":00Z")  # its minute known (when it is one): only the rest of the text is read then
    assert _stamp(text) is None
