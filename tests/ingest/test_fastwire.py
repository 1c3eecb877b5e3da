"""The fast parser and the full path give the same verdicts: the same readings accepted (equal, field by
field), the same refusals with the same reasons, details and dead-letter payloads -- on hand-made bad
payloads of every refusal the contract names and on hypothesis-generated ones."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stormwatch import topics
from stormwatch.clock import ManualClock
from stormwatch.config import load_site
from stormwatch.contract import PayloadError, Reading, parse_parts
from stormwatch.fastwire import fast_readings
from stormwatch.ingest.validate import ValidationResult, Validator
from stormwatch.profiles import ProfileLibrary

REPO = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
SITE = "riverside-commons"
GW = "gw-riverside-1"
TOPIC = topics.readings(SITE, GW)


def wire(**kw: object) -> dict[str, object]:
    base: dict[str, object] = {"site": SITE, "device": "turb-down", "quantity": "turbidity", "value": 12.5,
                               "unit": "NTU", "time": "2026-06-01T11:59:00Z", "gateway": GW, "boot": "b1",
                               "seq": 1, "raw": [0, 16712], "flags": []}
    base.update(kw)
    return {k: v for k, v in base.items() if v is not _DROP}


def rain(**kw: object) -> dict[str, object]:
    return wire(**{"device": "rain-1", "quantity": "rain_tips", "value": 3, "unit": "{tip}", "raw": 1420,
                   "tip_size": "0.01 in", **kw})


_DROP = object()


def body(*readings: object, batch: bool | None = None) -> bytes:
    if batch or (batch is None and len(readings) != 1):
        return json.dumps({"readings": list(readings)}).encode()
    return json.dumps(readings[0]).encode()


class Pair:
    """A validator on each path, fed the same messages (their state -- rain times -- moves alike)."""

    def __init__(self) -> None:
        profiles = ProfileLibrary()
        cfg = load_site(REPO / "examples" / "site.yaml", profiles)
        self.fast = Validator.for_sites([cfg], profiles, ManualClock(NOW))
        self.full = Validator.for_sites([cfg], profiles, ManualClock(NOW), fast=False)

    def same(self, payload: bytes, topic: str = TOPIC) -> ValidationResult:
        fast, full = self.fast.validate(topic, payload), self.full.validate(topic, payload)
        assert _verdict(fast) == _verdict(full), payload
        return fast


def _verdict(res: ValidationResult) -> tuple[Any, ...]:
    def fields(readings: list[Reading]) -> list[dict[str, Any]]:
        return [{**r.__dict__, "type": {k: type(v).__name__ for k, v in r.__dict__.items()}} for r in readings]

    return (fields(res.accepted), fields(res.late), fields(res.duplicates),
            [(d.reason, d.detail, d.topic, d.payload) for d in res.dead], res.refused)


@pytest.fixture(scope="module")
def pair() -> Pair:
    return Pair()


GOOD = [
    body(wire()),
    body(wire(value=13)),  # an integer value of a float quantity becomes 13.0
    body(wire(value=0), wire(seq=2, device="turb-up")),
    body(wire(), batch=True),  # a batch of one: its readings keep their index
    body(wire(raw=None)), body(wire(raw=_DROP, flags=_DROP)), body(wire(raw="text line")), body(wire(raw=1.5)),
    body(wire(raw=[])), body(wire(flags=["spike", "flatline"])),
    body(wire(seq=2 ** 63 - 1)), body(wire(raw=[-(2 ** 63), 2 ** 63 - 1])), body(rain(raw=2 ** 63 - 1)),
    body(wire(time="2026-06-01T11:59:00.5Z")), body(wire(time="2026-06-01T11:59:00.123456Z")),
    body(rain()), body(rain(tip_size="0.254 mm")), body(rain(tip_size=_DROP)), body(rain(value=0)),
    body(wire(device="basin-level", quantity="distance", unit="mm", value=2000.0, raw="R2000")),
    b' { "site" : "riverside-commons", "device":"turb-down","quantity":"turbidity","value":1.0,"unit":"NTU",'
    b'"time":"2026-06-01T11:59:00Z","gateway":"gw-riverside-1","boot":"b1","seq":7}\n',
]

BAD = [
    b"", b"\xff\xfe{", b"{not json", b"[]", b"null", b"42", b'"text"', b"[" * 100_000, b"{" + b'"a":' * 10,
    body(wire(value="12.5")), body(wire(value=True)), body(wire(value=None)), body(wire(value=[1])),
    body(wire(value=1e400)), body(wire(value=10 ** 400)), body(wire(value=-1.0)), body(wire(value=99999.0)),
    body(wire()).replace(b"12.5", b"NaN"), body(wire()).replace(b"12.5", b"-Infinity"),
    body(wire(seq=-1)), body(wire(seq=1.0)), body(wire(seq="5")), body(wire(seq=True)), body(wire(seq=_DROP)),
    body(wire(seq=10 ** 30)), body(wire(seq=2 ** 63)), body(wire(seq=99999999999999999999999)),
    body(wire(raw=[0, 2 ** 63])), body(wire(raw=2 ** 63)), body(wire(raw=-(2 ** 63) - 1)), body(rain(value=2 ** 63)),
    body(wire()).replace(b'"seq": 1', b'"seq": ' + b"9" * 5000),
    body(wire(site=_DROP)), body(wire(extra=1)), body(wire(site="")), body(wire(site="riverside-commons ")),
    body(wire(site="-x")), body(wire(device="turb/down")), body(wire(device="x" * 65)), body(wire(gateway="gw 1\n")),
    body(wire(device="turb-9")), body(wire(device="Überlauf-Süd")), body(wire(device="turb-down")).replace(
        b"turb-down", b"turb-\\u0064own"), body(wire(boot="\ud800")), body(wire(boot="")), body(wire(boot="b" * 65)),
    body(wire(quantity="")), body(wire(quantity="conductivity")), body(wire(quantity="q" * 65)),
    body(wire(unit="FNU")), body(wire(unit="")), body(wire(unit="u" * 33)), body(wire(site="elsewhere")),
    body(wire(gateway="gw-other")), body(wire(gateway="manual")),
    body(wire(time="2026-06-01T12:05:01Z")), body(wire(time="1970-01-01T00:00:00Z")), body(wire(time=1780000000)),
    body(wire(time="2026-06-01 11:59:00Z")), body(wire(time="2026-06-01T11:59:00z")),
    body(wire(time="2026-06-01T07:59:00-04:00")), body(wire(time="2026-06-01T11:59:00+00:00")),
    body(wire(time="2026-06-01T11:59:00.1234567Z")), body(wire(time="2026-06-01T11:59:00")),
    body(wire(time="2026-02-30T11:59:00Z")), body(wire(time="2026-06-01T23:59:60Z")),
    body(wire(time="0000-01-01T00:00:00Z")),
    body(wire(time="2026-06-01T24:00:00Z")), body(wire(time="2026-06-01")), body(wire(time="")),
    body(wire(time=""), wire(seq=2, time="")), body(wire(), wire(seq=2, time=wire()["time"] + " ")),
    body(wire(raw=[True])), body(wire(raw=[1.5])), body(wire(raw={"a": 1})), body(wire(raw=True)),
    body(wire()).replace(b"[0, 16712]", b"1e400"), body(wire(flags="spike")), body(wire(flags=[1])),
    body(wire(flags=None)), body(wire(tip_size="0.01 in")),
    body(rain(value=3.0)), body(rain(value=-1)), body(rain(value=10 ** 7)), body(rain(tip_size="0.5 in")),
    body(rain(tip_size="a lot")), body(rain(tip_size=None)), body(rain(tip_size="0.2 mm")), body(rain(tip_size=1)),
    json.dumps({"readings": []}).encode(), json.dumps({"readings": wire()}).encode(),
    json.dumps({"readings": [wire()], "site": SITE}).encode(), json.dumps({"readings": None}).encode(),
    body(wire(), wire(seq=2, value="x"), wire(seq=3, device="turb-9")),  # one bad reading of three: the rest kept
    body(wire(), wire(seq=2, boot="\udfff")), body(wire(boot="\udc00x")), body(wire(boot="\ud800A")),
    body(wire(boot="\ud83d\ude00")), body(wire(device="turb-down")).replace(b"turb-down", b"turb-\\u0064own"),
    body(wire(readings=[wire()])), body(wire(boot="readings")),
    body(wire(seq=5), wire(seq=5, value=99.0)),  # one identity, two values in one message
]


@pytest.mark.parametrize("payload", GOOD, ids=range(len(GOOD)))
def test_plain_messages_take_the_fast_path(pair: Pair, payload: bytes) -> None:
    fast = fast_readings(payload)
    assert fast is not None
    parts = parse_parts(payload)
    assert fast[0] == [p.reading for p in parts] and fast[1] == parts[0].batched
    assert pair.same(payload).accepted


@pytest.mark.parametrize("payload", BAD, ids=range(len(BAD)))
def test_every_refusal_is_the_full_paths(pair: Pair, payload: bytes) -> None:
    fast = fast_readings(payload)
    if fast is not None:  # then the contract accepts it too, equal
        assert fast[0] == [p.reading for p in parse_parts(payload)]
    pair.same(payload)


def test_a_conflict_in_a_batch_keeps_its_own_json(pair: Pair) -> None:
    first = body(wire(seq=40), wire(seq=41, device="turb-up"))
    for v in (pair.fast, pair.full):
        v.committed(v.validate(TOPIC, first).accepted)
    res = pair.same(body(wire(seq=41, device="turb-up", value=99.0), wire(seq=42)))
    assert [d.reason for d in res.dead] == ["conflicting_value"]
    assert res.dead[0].detail.startswith("readings.0: ") and json.loads(res.dead[0].payload)["value"] == 99.0
    again = pair.same(first)
    assert len(again.duplicates) == 2


def test_rain_rate_flags_alike(pair: Pair) -> None:
    pair.same(body(rain(seq=100, time="2026-06-01T11:50:00Z", value=0)))
    res = pair.same(body(rain(seq=101, time="2026-06-01T11:51:00Z", value=400)))  # 4 in in a minute
    assert res.accepted and "rain_beyond_envelope" in res.accepted[0].flags


# -- generated payloads -------------------------------------------------------------------------

_json_scalar = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
                         st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
_json = st.recursive(_json_scalar, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.text(max_size=5), inner, max_size=3), max_leaves=6)
_ids = st.sampled_from([SITE, GW, "turb-down", "turb-up", "rain-1", "basin-level", "manual", "x", "Pond 3, Inlet=N",
                        "", " x", "x ", "a/b", "Überlauf-Süd"])
_times = st.one_of(
    st.datetimes(min_value=datetime(2026, 2, 1), max_value=datetime(2026, 6, 1, 12, 10),
                 timezones=st.just(UTC)).map(lambda t: t.isoformat().replace("+00:00", "Z")),
    st.datetimes(min_value=datetime(2026, 5, 1), max_value=datetime(2026, 6, 2)).map(lambda t: t.isoformat()),
    st.sampled_from(["2026-06-01T11:59:00+02:00", "2026-06-01t11:59:00Z", "2026-06-01T11:59:00.0000001Z"]))
_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "site": _ids, "device": _ids, "gateway": _ids,
    "quantity": st.sampled_from(["turbidity", "rain_tips", "distance", "temperature", "transparency", "", "q"]),
    "value": st.one_of(st.integers(min_value=-5, max_value=5000), st.floats(min_value=-10, max_value=1e6),
                       st.sampled_from([0, 0.0, -0.0, 1e308, 2 ** 64])),
    "unit": st.sampled_from(["NTU", "{tip}", "mm", "Cel", "cm", "FNU", ""]),
    "time": _times, "boot": st.text(min_size=0, max_size=3), "seq": st.integers(min_value=-2, max_value=2 ** 65),
    "raw": st.one_of(st.none(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=4),
                     st.lists(st.integers(min_value=0, max_value=65535), max_size=3)),
    "flags": st.lists(st.sampled_from(["spike", "late", "counter_suspect", "rain_extreme_rate"]), max_size=2),
    "tip_size": st.sampled_from([None, "0.01 in", "0.2 mm", "0.254 mm", "0.5 in", "x"]),
}


#: (device, quantity, unit, values) of the example site, so most generated readings are valid ones
_SERIES = [("turb-down", "turbidity", "NTU", st.floats(min_value=0, max_value=4000) | st.integers(0, 4000)),
           ("turb-up", "temperature", "Cel", st.floats(min_value=-5, max_value=40)),
           ("rain-1", "rain_tips", "{tip}", st.integers(min_value=0, max_value=60)),
           ("basin-level", "distance", "mm", st.floats(min_value=300, max_value=5000))]


@st.composite
def readings(draw: st.DrawFn) -> dict[str, Any]:
    """A valid reading of the example site, then none to three of its fields changed, dropped or added."""
    device, quantity, unit, values = draw(st.sampled_from(_SERIES))
    out: dict[str, Any] = {
        "site": SITE, "device": device, "quantity": quantity, "value": draw(values), "unit": unit,
        "time": draw(st.datetimes(min_value=datetime(2026, 5, 31), max_value=datetime(2026, 6, 1, 12),
                                  timezones=st.just(UTC))).isoformat().replace("+00:00", "Z"),
        "gateway": GW, "boot": draw(st.text(min_size=1, max_size=4)), "seq": draw(st.integers(0, 2 ** 40)),
        "raw": draw(_FIELDS["raw"]), "flags": draw(_FIELDS["flags"])}
    if quantity == "rain_tips" and draw(st.booleans()):
        out["tip_size"] = draw(st.sampled_from(["0.01 in", "0.254 mm"]))
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        name = draw(st.sampled_from(sorted(_FIELDS)))
        how = draw(st.integers(min_value=0, max_value=5))
        if how == 0:
            out.pop(name, None)
        elif how == 1:
            out[name] = draw(_json)  # any JSON at all
        elif how == 2:
            out[draw(st.text(min_size=1, max_size=4))] = draw(_json)
        else:
            out[name] = draw(_FIELDS[name])
    return out


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(readings(), min_size=1, max_size=4), st.booleans())
def test_generated_messages_get_the_same_verdict(pair: Pair, items: list[dict[str, Any]], batch: bool) -> None:
    payload = body(*items, batch=batch or len(items) > 1)
    fast = fast_readings(payload)
    if fast is not None:
        assert fast[0] == [p.reading for p in parse_parts(payload)]
    else:
        try:
            parse_parts(payload)
        except PayloadError:
            pass
    pair.same(payload)
