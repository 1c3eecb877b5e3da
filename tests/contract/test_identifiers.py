"""Identifiers that round-trip everywhere (issue 11 item 6).

Site, device and gateway ids follow ONE grammar (:func:`stormwatch.contract.check_identifier`),
checked when a site file is loaded and on every reading. Whatever it allows comes back identical
from MQTT topics, InfluxDB line protocol and InfluxQL, and SQLite -- shown here with the nastiest
ids it allows, on real Mosquitto and InfluxDB 1.x. Before: a device id ending in a backslash got
InfluxDB's ``400 invalid tag format`` and a newline was stored as the two characters ``\\n``.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from stormwatch import topics
from stormwatch.app import servers
from stormwatch.clock import ManualClock
from stormwatch.config import ConfigError, parse_site
from stormwatch.contract import IDENTIFIER_MAX, IDENTIFIER_PUNCTUATION, Reading, check_identifier, parse_readings
from stormwatch.ingest.validate import Validator
from stormwatch.profiles import ProfileLibrary
from stormwatch.stores.influx1 import Influx1Store
from stormwatch.stores.sqlite import SqliteStore
from tests.conftest import REPO
from tests.ingest_support import INGEST_NOW, DeadLetterListener, Publisher, Running, ids
from tests.waits import wait_until

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)

#: The nastiest ids the grammar allows: every allowed punctuation mark, line-protocol specials at
#: the end of a tag value, non-ASCII letters of two scripts, a one-character id and the longest.
SITE = "Pond 3, Inlet=N"
GATEWAY = "gw 1,a=b:@_-."
RAIN = "rain=1,"
TURB = "Überlauf-Süd, Ост=2@"
LONGEST = "L" + "ü" * (IDENTIFIER_MAX - 2) + "="
ONE = "7"

#: Ids the grammar refuses, with the character named in the error.
REFUSED = [
    ("rain\\", "'\\\\'"),          # a trailing backslash escapes line protocol's separating space
    ("rain\n1", "'\\n'"),          # a tag value cannot hold a line break
    ("rain/1", "'/'"),             # an MQTT topic separator
    ("rain+1", "'+'"), ("rain#", "'#'"),
    ("north's", "\"'\""),          # InfluxQL and Grafana quote with '
    ('say "hi"', "'\"'"),
    ("$site", "first character '$'"),
    ("-1", "first character '-'"),
    ("rain 1 ", "ends with a space"),
    ("", "empty"),
    ("x" * (IDENTIFIER_MAX + 1), f"at most {IDENTIFIER_MAX}"),
    ("tab\there", "'\\t'"),
    ("nul\x00", "'\\x00'"),
]


def site_doc(site: str = SITE, gateway: str = GATEWAY, rain: str = RAIN, turb: str = TURB) -> dict[str, Any]:
    tcp = {"kind": "modbus-tcp", "host": "127.0.0.1", "port": 5020}
    return {
        "site": {"id": site, "jurisdiction": "ch133"},
        "gateway_id": gateway,
        "devices": [
            {"id": rain, "profile": "tipping_bucket_modbus_counter", "transport": {**tcp, "unit_id": 1}},
            {"id": turb, "profile": "yosemitech_y511", "transport": {**tcp, "unit_id": 2}},
            {"id": LONGEST, "profile": "yosemitech_y511", "transport": {**tcp, "unit_id": 3}},
            {"id": ONE, "profile": "yosemitech_y511", "transport": {**tcp, "unit_id": 4}},
        ],
        "rain_gauge": rain,
    }


def test_the_nastiest_allowed_ids_load() -> None:
    cfg = parse_site(site_doc(), "nasty.yaml", ProfileLibrary())
    assert (cfg.site.id, cfg.gateway_id) == (SITE, GATEWAY)
    assert [d.id for d in cfg.devices] == [RAIN, TURB, LONGEST, ONE]
    assert len(LONGEST) == IDENTIFIER_MAX and TURB.endswith("@") and "Ост" in TURB


@pytest.mark.parametrize(("bad", "named"), REFUSED, ids=[repr(b)[:12] for b, _ in REFUSED])
@pytest.mark.parametrize("key", ["site.id", "gateway_id", "devices.0.id"])
def test_ids_outside_the_grammar_are_refused_at_config_load(key: str, bad: str, named: str) -> None:
    doc = {"site.id": site_doc(site=bad), "gateway_id": site_doc(gateway=bad), "devices.0.id": site_doc(rain=bad)}[key]
    with pytest.raises(ConfigError) as err:
        parse_site(doc, "bad.yaml", ProfileLibrary())
    first = str(err.value).splitlines()[0]
    assert first.startswith(f"bad.yaml: {key}: ")
    assert named in first
    with pytest.raises(ValueError):
        check_identifier(bad)


def _wire(device: str, quantity: str, unit: str, value: int | float, seq: int) -> bytes:
    size = {"tip_size": "0.01 in"} if quantity == "rain_tips" else {}  # the gauge's profile: 0.01 in per tip
    return json.dumps({"site": SITE, "device": device, "quantity": quantity, "value": value, "unit": unit, **size,
                       "time": (T0 + timedelta(minutes=seq)).isoformat(), "gateway": GATEWAY, "boot": "b-1",
                       "seq": seq, "raw": seq, "flags": []}, ensure_ascii=False).encode()


@pytest.mark.mosquitto
@pytest.mark.influxdb
def test_nasty_ids_round_trip_through_mqtt_line_protocol_influxql_and_sqlite(
        own_mosquitto: servers.Mosquitto, influx_server: servers.InfluxDB1, tmp_path: Path) -> None:
    profiles = ProfileLibrary()
    cfg = parse_site(site_doc(), "nasty.yaml", profiles)
    sent = [_wire(RAIN, "rain_tips", "{tip}", 3, 1), _wire(TURB, "turbidity", "NTU", 12.5, 2),
            _wire(LONGEST, "turbidity", "NTU", 4.0, 3), _wire(ONE, "turbidity", "NTU", 5.25, 4)]
    topic = topics.readings(SITE, GATEWAY)
    assert topics.parse_readings_topic(topic) == (SITE, GATEWAY)
    db = f"ids_{next(ids)}"
    sqlite_store, influx_store = SqliteStore(tmp_path / "sw.db"), Influx1Store(influx_server.url, db)
    still = ManualClock(INGEST_NOW, on_sleep="wait")
    runs = [Running(own_mosquitto, store, validator=Validator.for_sites([cfg], profiles, still), batch_ms=50)
            for store in (sqlite_store, influx_store)]
    listener = DeadLetterListener(own_mosquitto)
    pub = Publisher(own_mosquitto)
    try:
        for body in sent:
            pub.send(body, topic)
        # what the issue found: a trailing backslash and a newline -- now refused by the contract
        pub.send(_wire(RAIN, "rain_tips", "{tip}", 1, 5).replace(RAIN.encode(), b"rain\\\\"), topic)
        pub.send(_wire(RAIN, "rain_tips", "{tip}", 1, 6).replace(RAIN.encode(), b"rain\\n1"), topic)
        wait_until(lambda: all(r.ingest.written == 4 for r in runs) and len(listener.messages) == 4,
                   what="4 readings in each store and 2 x 2 dead letters")
    finally:
        pub.close()
        for run in runs:
            run.stop()
        listener.close()
    expected = [r for body in sent for r in parse_readings(body)]
    assert [r.device for r in expected] == [RAIN, TURB, LONGEST, ONE]
    try:
        # The stores' own queries, by site and by each device: identical readings from both.
        for store in (sqlite_store, influx_store):
            assert store.query_readings(SITE) == expected
            for reading in expected:
                assert store.query_readings(SITE, device=reading.device) == [reading]
    finally:
        sqlite_store.close()
        influx_store.close()
    # Independently: InfluxQL tag values and SQLite text are the ids, byte for byte.
    res = influx_server.query('SHOW TAG VALUES FROM "readings" WITH KEY IN ("site", "device")', db)
    tags = {tuple(v) for v in res["results"][0]["series"][0]["values"]}
    assert tags == {("site", SITE)} | {("device", d) for d in (RAIN, TURB, LONGEST, ONE)}
    with sqlite3.connect(tmp_path / "sw.db") as conn:
        rows = conn.execute("SELECT site, device, gateway FROM readings ORDER BY seq").fetchall()
        dead = conn.execute("SELECT reason, detail FROM deadletter ORDER BY id").fetchall()
    assert rows == [(SITE, d, GATEWAY) for d in (RAIN, TURB, LONGEST, ONE)]
    assert [reason for reason, _ in dead] == ["schema", "schema"]
    assert "character 5 '\\\\'" in dead[0][1] and "character 5 '\\n'" in dead[1][1]
    assert {(m["reason"], m["topic"]) for m in listener.messages} == {("schema", topic)}


def test_readings_refuse_ids_outside_the_grammar() -> None:
    for bad, named in REFUSED:
        with pytest.raises(ValueError, match="device") as err:
            Reading(site=SITE, device=bad, quantity="turbidity", value=1.0, unit="NTU", time=T0, gateway=GATEWAY,
                    boot="b", seq=0)
        assert named in str(err.value)


def test_the_contract_document_states_the_same_grammar() -> None:
    import yaml

    spec = yaml.safe_load((REPO / "docs" / "asyncapi.yaml").read_text("utf-8"))
    for name in ("site", "device", "gateway"):
        prop = spec["components"]["schemas"]["Reading"]["properties"][name]
        assert prop["maxLength"] == IDENTIFIER_MAX
        assert prop["pattern"] == r"^[\p{L}\p{N}]([\p{L}\p{N} _.,=:@-]*[\p{L}\p{N}_.,=:@-])?$"
    assert sorted(IDENTIFIER_PUNCTUATION) == sorted(" _.,=:@-")
