"""Every payload refusal has the right reason, and the reasons are one documented set.

A payload nested past the parser's depth (``[`` x 100,000) is ``bad_json``, never an
``internal_error`` with a traceback; payload types are strict: ``"value": "100.00"`` is refused, not
coerced (it would be stored as an SQLite integer), and so is a tip count ``"3"``.

* :data:`VALIDATOR_CASES`: for each reason the validator (contract + configuration checks) gives,
  payloads that must get exactly that reason;
* the reasons produced by ingest and the stores themselves (``duplicate``, ``conflicting_value``,
  ``superseded``, ``internal_error``, ``store_rejected``) have their own tests on real Mosquitto and
  InfluxDB 1.x;
* :func:`test_every_reason_is_covered_and_documented` fails when a reason is added to
  :data:`stormwatch.reasons.REASONS` without a case here, a row in docs/ingest.md and the enum of
  docs/asyncapi.yaml.
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import yaml

from stormwatch import topics
from stormwatch.app import servers
from stormwatch.clock import ManualClock
from stormwatch.contract import PayloadError, parse_readings
from stormwatch.ingest.validate import ValidationResult, Validator
from stormwatch.reasons import REASONS, UnknownReason
from stormwatch.stores.base import DeadLetter
from stormwatch.stores.influx1 import Influx1Store
from stormwatch.stores.sqlite import SqliteStore
from tests.conftest import REPO
from tests.ingest_support import (
    GW,
    INGEST_NOW,
    SITE,
    T0,
    TOPIC,
    DeadLetterListener,
    Publisher,
    Running,
    ids,
    make_validator,
    tip_wire,
    wire,
)
from tests.waits import wait_until

#: 5,000 decimal digits: beyond Python's int/str conversion limit of 4,300 digits.
LONG_INT = "9" * 5000


def _edit(payload: bytes, old: bytes, new: bytes) -> bytes:
    assert old in payload, (old, payload)
    return payload.replace(old, new)


#: reason -> (topic, payload, a word the detail must contain) that must be refused with it.
VALIDATOR_CASES: dict[str, list[tuple[str, bytes, str]]] = {
    "not_utf8": [(TOPIC, b"\xff\xfe{", "utf-8")],
    "bad_json": [
        (TOPIC, b"{not json", "Expecting"),
        (TOPIC, b"[" * 100_000, "nested deeper"),
        (TOPIC, b'{"value": ' + LONG_INT.encode() + b"}", "4300"),
        (TOPIC, _edit(wire(1), b'"boot": "boot-a"', b'"boot": "\\ud800"'), "surrogate"),
    ],
    "schema": [
        (TOPIC, wire(1, "100.00"), "value"),
        (TOPIC, tip_wire(1, 3).replace(b'"value": 3', b'"value": "3"'), "value"),
        (TOPIC, tip_wire(1, 3).replace(b'"value": 3', b'"value": 3.0'), "whole number of tips"),
        (TOPIC, wire(1, True), "value"),
        (TOPIC, _edit(wire(5), b'"seq": 5', b'"seq": "5"'), "seq"),
        # beyond what SQLite's INTEGER and InfluxDB's integer fields hold
        (TOPIC, _edit(wire(5), b'"seq": 5', b'"seq": 99999999999999999999999'), "seq: 99999999999999999999999 is"),
        (TOPIC, wire(5, raw=[0, 2 ** 63]), "raw: 9223372036854775808 is beyond"),
        (TOPIC, _edit(wire(1), b'"time": "2026-06-01T12:01:00+00:00"', b'"time": 1780315260'), "time"),
        (TOPIC, _edit(wire(1), b'"time": "2026-06-01T12:01:00+00:00"', b'"time": "1780315260"'), "time"),
        (TOPIC, _edit(wire(1), b'"flags": []', b'"flags": [1]'), "flags.0"),
        (TOPIC, wire(1, 0.0).replace(b'"value": 0.0', b'"value": NaN'), "finite"),
        (TOPIC, wire(1, tip_size="0.01 in"), "only a rain_tips reading has a tip size"),
        (TOPIC, tip_wire(1, 3, tip_size="3 furlongs"), "tip resolution"),
        (TOPIC, tip_wire(1, 3, tip_size="0.000001 mm"), "a tipping bucket tips at"),
        (TOPIC, b'{"site": "riverside-commons"}', "Field required"),
        (TOPIC, json.dumps({"readings": []}).encode(), "readings"),
    ],
    "bad_topic": [("stormwatch/v1/riverside-commons/readings", wire(1), "not a readings topic")],
    "topic_mismatch": [(TOPIC, wire(1, site="elsewhere"), "elsewhere")],
    "unknown_site": [(topics.readings("elsewhere", GW), wire(1, site="elsewhere"), "elsewhere")],
    "unknown_gateway": [(topics.readings(SITE, "gw-9"), wire(1, gateway="gw-9"), "gw-9")],
    "unknown_device": [(TOPIC, wire(1, device="turb-9"), "turb-9")],
    "unknown_quantity": [(TOPIC, wire(1, quantity="conductivity"), "conductivity")],
    "unit_mismatch": [(TOPIC, wire(1, unit="FNU"), "FNU")],
    # the example site's rain-1 tips at 0.01 in (its profile): a 0.2 mm reading names another gauge
    "tip_size_mismatch": [(TOPIC, tip_wire(1, 3, tip_size="0.2 mm"), "0.2 mm"),
                          (TOPIC, tip_wire(1, 3, tip_size="0.1 mm"), "0.01 in")],
    "impossible_value": [(TOPIC, wire(1, -0.5), "turbidity"), (TOPIC, tip_wire(1, 2 ** 63), "32-bit")],
    "future_time": [(TOPIC, wire(1, time=(T0 + timedelta(minutes=15, seconds=1)).isoformat()), "ahead")],
    "implausible_time": [(TOPIC, wire(1, time="1970-01-01T00:01:00Z"), "behind the clock")],
}
#: Reasons that need more than one message, or are given by ingest or a store: reason -> its test
#: (``file::name``; a bare name is in this file).
TESTED_APART = {
    "duplicate": "test_redelivery_is_a_duplicate_and_a_validator_bug_an_internal_error",
    "conflicting_value": ("ingest/test_one_identity_one_value.py::"
                          "test_a_gateway_replay_with_another_value_is_conflicting_value"),
    "superseded": ("ingest/test_one_identity_one_value.py::"
                   "test_readings_add_refuses_a_second_value_and_corrects_it_explicitly"),
    "store_rejected": "test_line_influxdb_refuses_is_store_rejected",
    "internal_error": "test_redelivery_is_a_duplicate_and_a_validator_bug_an_internal_error",
}


def _cases() -> list[tuple[str, str, bytes, str]]:
    return [(reason, topic, body, word) for reason, cases in VALIDATOR_CASES.items()
            for topic, body, word in cases]


@pytest.mark.parametrize(("reason", "topic", "body", "word"), _cases(),
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(_cases())])
def test_validator_refuses_with_the_reason(reason: str, topic: str, body: bytes, word: str,
                                           caplog: pytest.LogCaptureFixture) -> None:
    # ManualClock: 12:10 on the scenario day, so the wire() readings (12:00 + seq minutes) are past.
    validator = make_validator(ManualClock(INGEST_NOW, on_sleep="wait"))
    with caplog.at_level(logging.WARNING):
        result = validator.validate(topic, body)
    assert [d.reason for d in result.dead] == [reason], [d.detail for d in result.dead]
    assert word in result.dead[0].detail
    assert result.dead[0].payload == body and not result.accepted and not result.late
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]  # a refusal is not a crash


def test_strict_numbers_per_quantity() -> None:
    # rain_tips: a JSON integer; any other quantity: a JSON number, held as a float whatever its JSON form.
    (turbidity,) = parse_readings(wire(1, 100))
    assert turbidity.value == 100.0 and type(turbidity.value) is float
    (tips,) = parse_readings(tip_wire(1, 3))
    assert tips.value == 3 and type(tips.value) is int
    with pytest.raises(PayloadError) as refused:
        parse_readings(wire(1, "100.00"))
    assert (refused.value.reason, refused.value.detail) == ("schema", "value: must be a JSON number, not a string "
                                                                      "('100.00')")


def test_a_dead_letter_reason_outside_the_set_cannot_be_made() -> None:
    with pytest.raises(UnknownReason, match=r"stormwatch\.reasons\.REASONS"):
        DeadLetter("too_wet", "detail", TOPIC, b"{}", T0)


def _documented_reasons() -> list[str]:
    text = (REPO / "docs" / "ingest.md").read_text(encoding="utf-8")
    table = text[text.index("| reason | when |"):]
    table = table[:table.index("\n\n")]
    return re.findall(r"^\| `([a-z_0-9]+)` \|", table, flags=re.MULTILINE)


def test_every_reason_is_covered_and_documented() -> None:
    assert sorted(set(VALIDATOR_CASES) | set(TESTED_APART)) == sorted(REASONS)
    assert set(VALIDATOR_CASES).isdisjoint(TESTED_APART)
    for where in set(TESTED_APART.values()):
        file, _, name = where.rpartition("::")
        if file:
            assert f"\ndef {name}(" in (REPO / "tests" / file).read_text(encoding="utf-8"), where
        else:
            assert callable(globals()[name]), where
    assert _documented_reasons() == list(REASONS)  # one row each, in the same order
    spec = yaml.safe_load((REPO / "docs" / "asyncapi.yaml").read_text(encoding="utf-8"))
    enum = spec["components"]["messages"]["deadLetter"]["payload"]["properties"]["reason"]["enum"]
    assert enum == list(REASONS)


class _BuggyValidator:
    """The real validator with a bug on one payload (the kind of fault ``internal_error`` exists for)."""

    def __init__(self, inner: Validator) -> None:
        self.inner = inner

    def validate(self, topic: str, payload: bytes, *, retained: bool = False,
                 received_at: datetime | None = None) -> ValidationResult:
        if payload == b'{"trigger": "bug"}':
            raise KeyError("a bug")
        return self.inner.validate(topic, payload, retained=retained, received_at=received_at)

    def __getattr__(self, name: str) -> object:  # everything else: the real validator's
        return getattr(self.inner, name)


@pytest.mark.mosquitto
def test_redelivery_is_a_duplicate_and_a_validator_bug_an_internal_error(
        own_mosquitto: servers.Mosquitto, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # End to end on Mosquitto into SQLite: the nasty payloads of the issues get their reasons, no
    # ERROR is logged for them, and ingest keeps storing the good readings in between.
    store = SqliteStore(tmp_path / "sw.db")
    listener = DeadLetterListener(own_mosquitto)
    run = Running(own_mosquitto, store, batch_ms=50)
    run.ingest.validator = _BuggyValidator(run.ingest.validator)  # type: ignore[assignment]
    pub = Publisher(own_mosquitto)
    try:
        with caplog.at_level(logging.WARNING):
            pub.send(b"[" * 100_000)
            pub.send(wire(1, "100.00"))
            pub.send(tip_wire(2, 3).replace(b'"value": 3', b'"value": "3"'))
            pub.send(wire(3, 100))
            pub.send(tip_wire(4, 3))
            wait_until(lambda: run.ingest.written == 2, what="2 readings written")
            pub.send(wire(3, 100))  # the same reading again (identity gateway, boot, seq 3)
            pub.send(b'{"trigger": "bug"}')
            pub.send(wire(5, 7.5))
            wait_until(lambda: run.ingest.written == 3 and len(listener.messages) == 5, what="3 written, 5 dead")
        assert dict(run.ingest.dead_lettered) == {"bad_json": 1, "schema": 2, "duplicate": 1, "internal_error": 1}
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        # only the validator bug is an ERROR (with its traceback); the bad payloads are refusals
        assert [r.getMessage() for r in errors] == [f"validator failed on a message from {TOPIC}"]
        assert errors[0].exc_info is not None
        details = {(m["reason"], m["detail"]) for m in listener.messages}
        assert ("schema", "value: must be a JSON number, not a string ('100.00')") in details
        assert ("schema", "value: must be a JSON number, not a string ('3')") in details
        assert ("bad_json", "nested deeper than the JSON decoder allows") in details
        assert ("internal_error", "KeyError: 'a bug'") in details
        assert {m["reason"] for m in listener.messages} == {"bad_json", "schema", "duplicate", "internal_error"}
    finally:
        pub.close()
        run.stop()
        listener.close()
        store.close()
    # What SQLite holds, read with sqlite3: the numeric turbidity as a REAL, the tip count as an INTEGER.
    with sqlite3.connect(tmp_path / "sw.db") as db:
        rows = db.execute("SELECT seq, quantity, value, typeof(value) FROM readings ORDER BY seq").fetchall()
        dead = db.execute("SELECT reason FROM deadletter ORDER BY id").fetchall()
    assert rows == [(3, "turbidity", 100.0, "real"), (4, "rain_tips", 3, "integer"), (5, "turbidity", 7.5, "real")]
    assert sorted(r for (r,) in dead) == ["bad_json", "duplicate", "internal_error", "schema", "schema"]


@pytest.mark.influxdb
def test_line_influxdb_refuses_is_store_rejected(influx_server: servers.InfluxDB1) -> None:
    # A field type conflict (the shard holds `value` as a string) is InfluxDB's refusal, not ours.
    db = f"reasons_{next(ids)}"
    influx_server.query(f'CREATE DATABASE "{db}"')
    ns = 1_780_315_200_000_000_000
    store = Influx1Store(influx_server.url, db)
    try:
        assert store.write_lines([f'readings,site={SITE} value="text" {ns}']) == []
        (reading,) = parse_readings(wire(1, 12.5))
        assert store.write_readings([reading]) == 0
    finally:
        store.close()
    res = influx_server.query('SELECT "reason", "detail" FROM deadletter', db)["results"][0]
    ((_, reason, detail),) = res["series"][0]["values"]
    assert reason == "store_rejected" and "field type conflict" in detail
