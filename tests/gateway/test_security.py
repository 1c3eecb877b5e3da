"""MQTT credentials and TLS settings (stormwatch/runtime/mqtt.py) and secrets never logged."""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stormwatch import topics
from stormwatch.config import parse_site
from stormwatch.profiles import ProfileLibrary
from stormwatch.runtime.mqtt import BrokerUrlError, parse_broker_url
from tests.gateway_support import Collector, RegisterServer, run_on_lockstep

SECRET = "s3cr3t-Pa55w0rd"


def test_tls_files_from_url_or_environment() -> None:
    env = {"STORMWATCH_MQTT_CA_FILE": "/env/ca.pem", "STORMWATCH_MQTT_CERT_FILE": "/env/c.pem",
           "STORMWATCH_MQTT_KEY_FILE": "/env/k.pem", "STORMWATCH_MQTT_PASSWORD": SECRET,
           "STORMWATCH_MQTT_USERNAME": "gw"}
    b = parse_broker_url("mqtts://broker.example:8883", env)
    assert (b.tls, b.ca_file, b.cert_file, b.key_file, b.username, b.password) == (
        True, "/env/ca.pem", "/env/c.pem", "/env/k.pem", "gw", SECRET)
    b = parse_broker_url("mqtts://u:p@h?ca_file=/u/ca.pem&cert_file=/u/c.pem&key_file=/u/k.pem", env)
    assert (b.ca_file, b.cert_file, b.key_file, b.username, b.password) == ("/u/ca.pem", "/u/c.pem", "/u/k.pem",
                                                                          "u", "p")
    assert SECRET not in repr(parse_broker_url("mqtt://h", env)) and SECRET not in b.safe_url()
    with pytest.raises(BrokerUrlError, match="both cert_file and key_file"):
        parse_broker_url("mqtts://h?cert_file=/c.pem", {})
    with pytest.raises(BrokerUrlError, match="unknown broker URL option"):
        parse_broker_url("mqtts://h?password=x", {})


@pytest.mark.mosquitto
def test_password_in_the_url_never_appears_in_logs(mosquitto_server, tmp_path: Path, caplog) -> None:
    srv = RegisterServer(unit_ids=(1,)).start()
    srv.registers[1][0] = 7
    site_id = f"sec-{uuid.uuid4().hex[:8]}"
    cfg = parse_site({"site": {"id": site_id, "jurisdiction": "ch133"}, "gateway_id": "gw-t", "devices": [
        {"id": "rain-1", "profile": "tipping_bucket_modbus_counter", "poll_interval_s": 60,
         "transport": {"kind": "modbus-tcp", "host": "127.0.0.1", "port": srv.port, "unit_id": 1}}]},
        "sec-site", ProfileLibrary())
    sub = Collector(mosquitto_server.port, topics.readings(site_id, "gw-t"), f"sub-{site_id}")
    caplog.set_level(logging.DEBUG)
    start = datetime(2026, 6, 1, tzinfo=UTC)
    url = f"mqtt://gateway:{SECRET}@127.0.0.1:{mosquitto_server.port}"
    try:  # the one slot is polled, however busy the machine
        run_on_lockstep(cfg, ProfileLibrary(), url, tmp_path / "gw", start, start + timedelta(seconds=60))
        got = sub.wait_for(1)
    finally:
        sub.close()
        srv.stop()
    assert len(got) == 1 and got[0].raw == 7  # connected with the credentials and published
    text = "\n".join(f"{r.getMessage()} {r.args!r}" for r in caplog.records)
    assert "mqtt://gateway@127.0.0.1" in text  # the URL is logged -- without the password
    assert SECRET not in text and SECRET not in caplog.text
