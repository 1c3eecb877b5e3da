"""Validator: every kind of bad input becomes a dead letter with its reason; never an exception."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from stormwatch import topics
from stormwatch.clock import ManualClock
from stormwatch.config import load_site
from stormwatch.ingest.validate import Validator
from stormwatch.profiles import ProfileLibrary
from tests.conftest import REPO

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
SITE = "riverside-commons"
GW = "gw-riverside-1"
TOPIC = topics.readings(SITE, GW)


@pytest.fixture()
def validator() -> Validator:
    profiles = ProfileLibrary()
    return Validator.for_sites([load_site(REPO / "examples" / "site.yaml", profiles)], profiles, ManualClock(NOW))


def wire(**kw: object) -> dict[str, object]:
    base: dict[str, object] = {"site": SITE, "device": "turb-down", "quantity": "turbidity", "value": 12.5,
                               "unit": "NTU", "time": "2026-06-01T11:59:00Z", "gateway": GW, "boot": "b1",
                               "seq": 1, "raw": [0, 16712], "flags": []}
    base.update(kw)
    return base


def payload(*readings: dict[str, object]) -> bytes:
    if len(readings) == 1:
        return json.dumps(readings[0]).encode()
    return json.dumps({"readings": list(readings)}).encode()


def reasons(v: Validator, body: bytes, topic: str = TOPIC) -> list[str]:
    return [d.reason for d in v.validate(topic, body).dead]


def test_good_reading_accepted(validator: Validator) -> None:
    res = validator.validate(TOPIC, payload(wire()))
    assert [r.value for r in res.accepted] == [12.5] and not res.dead and not res.late


@pytest.mark.parametrize(("body", "reason"), [
    (b"\xff\xfe{", "not_utf8"),
    (b"{not json", "bad_json"),
    (payload(wire(value="high")), "schema"),
    (payload(wire(seq=-1)), "schema"),
    (b'{"site": "riverside-commons"}', "schema"),
    (payload(wire(device="turb-9")), "unknown_device"),
    (payload(wire(quantity="conductivity")), "unknown_quantity"),
    (payload(wire(unit="FNU")), "unit_mismatch"),  # the Y511 profile reports NTU; keep NTU and FNU apart
    (payload(wire(site="elsewhere")), "topic_mismatch"),
    (payload(wire(time="2026-06-01T12:05:01Z")), "future_time"),  # 301 s ahead, limit 300 s
    (payload(wire(time="1970-01-01T00:00:00Z")), "implausible_time"),  # a box without an RTC, before NTP
    (payload(wire(time="2026-03-03T11:59:59Z")), "implausible_time"),  # 90 days + 1 s behind (Mar 3 + 90 d = Jun 1)
])
def test_bad_input_dead_lettered_with_reason(validator: Validator, body: bytes, reason: str) -> None:
    res = validator.validate(TOPIC, body)
    assert [d.reason for d in res.dead] == [reason]
    assert not res.accepted
    assert res.dead[0].payload == body and res.dead[0].topic == TOPIC and res.dead[0].received_at == NOW


def test_nan_value_is_schema_and_names_value(validator: Validator) -> None:
    for literal in ("NaN", "Infinity", "-Infinity"):
        body = payload(wire()).replace(b"12.5", literal.encode())
        res = validator.validate(TOPIC, body)
        assert [d.reason for d in res.dead] == ["schema"]
        assert res.dead[0].detail.startswith("value")


def test_topic_and_site_checks(validator: Validator) -> None:
    assert reasons(validator, payload(wire()), "stormwatch/v1/x/readings") == ["bad_topic"]
    other = topics.readings("elsewhere", GW)
    assert reasons(validator, payload(wire(site="elsewhere")), other) == ["unknown_site"]
    assert reasons(validator, payload(wire(gateway="gw-2")), topics.readings(SITE, "gw-2")) == ["unknown_gateway"]


def test_exactly_max_future_is_accepted(validator: Validator) -> None:
    assert not validator.validate(TOPIC, payload(wire(time="2026-06-01T12:05:00Z"))).dead


def test_derived_level_quantity_accepted(validator: Validator) -> None:
    # basin-level is a maxbotix_hrxl with a level section: the gateway may publish sediment_depth in m.
    res = validator.validate(TOPIC, payload(wire(device="basin-level", quantity="sediment_depth", value=0.41,
                                                 unit="m")))
    assert len(res.accepted) == 1
    assert reasons(validator, payload(wire(device="basin-level", quantity="distance", value=2000, unit="m"))) \
        == ["unit_mismatch"]  # the HRXL reports distance in mm


def test_batch_keeps_good_readings_and_rejects_bad_one(validator: Validator) -> None:
    res = validator.validate(TOPIC, payload(wire(seq=1), wire(seq=2, unit="FNU"), wire(seq=3)))
    assert [r.seq for r in res.accepted] == [1, 3]
    assert [d.reason for d in res.dead] == ["unit_mismatch"]
    assert res.dead[0].detail.startswith("readings.1: ")
    assert json.loads(res.dead[0].payload)["seq"] == 2


def test_duplicates_only_after_commit_and_retained_is_late(validator: Validator) -> None:
    body = payload(wire(seq=5))
    first = validator.validate(TOPIC, body)
    # Not committed yet (e.g. the store was down): a redelivery must be accepted again, not dropped.
    assert len(validator.validate(TOPIC, body).accepted) == 1
    validator.committed(first.accepted)
    again = validator.validate(TOPIC, body)
    assert [r.seq for r in again.duplicates] == [5] and not again.accepted and not again.dead
    stale = validator.validate(TOPIC, payload(wire(seq=6, time="2026-06-01T09:00:00Z")), retained=True)
    assert [r.seq for r in stale.late] == [6] and not stale.accepted


def test_age_bound_is_90_days_and_configurable() -> None:
    from stormwatch.gateway.outbox import DEFAULT_MAX_AGE_S as OUTBOX_MAX_AGE_S
    from stormwatch.ingest.validate import DEFAULT_MAX_AGE_S

    assert DEFAULT_MAX_AGE_S == 3 * OUTBOX_MAX_AGE_S == 90 * 86400  # outbox replays stay inside the bound
    profiles = ProfileLibrary()
    sites = [load_site(REPO / "examples" / "site.yaml", profiles)]
    v = Validator.for_sites(sites, profiles, ManualClock(NOW))
    exactly = v.validate(TOPIC, payload(wire(time="2026-03-03T12:00:00Z")))  # exactly 90 days: accepted
    assert len(exactly.accepted) == 1 and not exactly.dead
    replay = v.validate(TOPIC, payload(wire(seq=2, time="2026-05-02T12:00:00Z")))  # a 30-day outage's replay
    assert len(replay.accepted) == 1
    detail = v.validate(TOPIC, payload(wire(seq=3, time="1970-01-01T00:00:00Z"))).dead[0].detail
    assert detail.startswith("event time 1970-01-01T00:00:00+00:00 is 20605.5 days behind the clock")
    wider = Validator.for_sites(sites, profiles, ManualClock(NOW), max_age_s=None)  # imports of old files
    assert len(wider.validate(TOPIC, payload(wire(time="1970-01-01T00:00:00Z"))).accepted) == 1


def test_late_after_is_opt_in() -> None:
    profiles = ProfileLibrary()
    v = Validator.for_sites([load_site(REPO / "examples" / "site.yaml", profiles)], profiles, ManualClock(NOW),
                            late_after_s=3600)
    res = v.validate(TOPIC, payload(wire(time=(NOW - timedelta(hours=3)).isoformat())))
    assert len(res.late) == 1
