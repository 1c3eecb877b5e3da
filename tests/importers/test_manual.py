"""Manual field readings (issue 16): `stormwatch readings add` stores a transparency tube's cm and a grab
sample's NTU and pH as readings with source manual and the inspector's name, at the time of sampling,
and they reach the rules like a sensor's readings.

By hand (California CGP, docs/reference/permits/ca-cgp-2022.md: pH NAL 6.5-8.5 on the daily average of
at least three samples): three grab samples at outfall-1 on Wed 3 June 2026 at 09:00, 10:00 and
11:00 PDT (UTC-7: 16:00, 17:00, 18:00 UTC) of pH 6.0, 6.5 and 6.8 average 19.3 / 3 = 6.433 < 6.5:
one ``nal_exceedance`` for outfall-1 when the local day ends (4 June 00:00 PDT = 07:00 UTC). Two
samples at outfall-2 (7.2, 7.4) are fewer than three: ``nal_undetermined``. (A sample at outfall-2 the
next morning moves event time past the end of 3 June.)
"""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import yaml
from paho.mqtt.enums import CallbackAPIVersion
from typer.testing import CliRunner

from stormwatch.app.cli import app
from stormwatch.clock import ManualClock
from stormwatch.config import parse_site
from stormwatch.contract import MANUAL_GATEWAY, manual_inspector, parse_readings, reading_source
from stormwatch.ingest.validate import Validator
from stormwatch.profiles import ProfileLibrary
from stormwatch.stores.sqlite import SqliteStore
from tests.alerts_support import ca_doc
from tests.names import run_unique
from tests.waits import wait_until

INSPECTOR = "J. Rivera"


def site_file(tmp_path: Path) -> Path:
    path = tmp_path / "ca-site.yaml"
    path.write_text(yaml.safe_dump(ca_doc()), encoding="utf-8")
    return path


def add(*args: str) -> Any:
    return CliRunner().invoke(app, ["readings", "add", *args], catch_exceptions=False)


def test_entered_readings_are_stored_as_manual_and_reach_the_daily_average_rule(tmp_path: Path) -> None:
    site = site_file(tmp_path)
    store = f"sqlite:///{tmp_path}/store.db"
    common = ["--site", str(site), "--by", INSPECTOR, "--store", store]
    for hour, value in (("09:00", "6.0"), ("10:00", "6.5"), ("11:00", "6.8")):
        result = add(*common, "--point", "outfall-1", "--sampled-at", f"2026-06-03T{hour}", "--ph", value)
        assert result.exit_code == 0, result.output
        assert "stored: 1 new" in result.output and f"by {INSPECTOR} (source: manual)" in result.output
    result = add(*common, "--point", "outfall-2", "--sampled-at", "2026-06-03T09:30", "--ph", "7.2",
                 "--transparency-cm", "28", "--turbidity-ntu", "41.5", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["stored"] == 3
    assert add(*common, "--point", "outfall-2", "--sampled-at", "2026-06-03T10:30", "--ph", "7.4").exit_code == 0
    # the next morning's sample: event time passes the end of 3 June (evaluate judges only what the data covers)
    assert add(*common, "--point", "outfall-2", "--sampled-at", "2026-06-04T08:00", "--ph", "7.3").exit_code == 0
    again = add(*common, "--point", "outfall-1", "--sampled-at", "2026-06-03T09:00", "--ph", "6.0")
    assert again.exit_code == 0 and "stored: 0 new, 1 already recorded" in again.output  # the same sample once

    db = SqliteStore(tmp_path / "store.db")
    rows = db.query_readings("s1")
    db.close()
    assert len(rows) == 8  # 3 at outfall-1, 3 + 1 + 1 at outfall-2
    assert {(reading_source(r), manual_inspector(r)) for r in rows} == {("manual", INSPECTOR)}
    ph1 = [(r.time, r.value, r.unit) for r in rows if r.device == "outfall-1"]
    assert ph1 == [(datetime(2026, 6, 3, h, tzinfo=UTC), v, "[pH]") for h, v in ((16, 6.0), (17, 6.5), (18, 6.8))]
    tube = [r for r in rows if r.quantity == "transparency"]
    assert [(r.device, r.value, r.unit, r.time) for r in tube] == [
        ("outfall-2", 28.0, "cm", datetime(2026, 6, 3, 16, 30, tzinfo=UTC))]

    out = CliRunner().invoke(app, ["evaluate", "--site", str(site), "--store", store, "--from", "2026-06-03T00:00",
                                   "--until", "2026-06-04T12:00", "--json"], catch_exceptions=False)
    assert out.exit_code == 0, out.output
    nal = [e for e in json.loads(out.stdout)["events"] if e["kind"].startswith("nal_") and e["rule"] == "NALph"]
    assert [(e["kind"], e["discharge_point"], e["samples"], e["event_time"]) for e in nal] == [
        ("nal_exceedance", "outfall-1", 3, "2026-06-04T07:00:00Z"),
        ("nal_undetermined", "outfall-2", 2, "2026-06-04T07:00:00Z")]
    assert abs(nal[0]["daily_average"] - 19.3 / 3) < 1e-9


def test_refusals_are_one_line_and_store_nothing(tmp_path: Path) -> None:
    site = site_file(tmp_path)
    store = f"sqlite:///{tmp_path}/store.db"
    common = ["--site", str(site), "--by", INSPECTOR, "--store", store, "--sampled-at", "2026-06-03T09:00"]
    cases = [
        (["--point", "outfall-1", "--ph", "14.5"], "--ph 14.5: outside 0 to 14 [pH] (grab sample, hand pH meter)"),
        (["--point", "outfall-1", "--transparency-cm", "-3"], "--transparency-cm -3: outside 0 to 120 cm"),
        (["--point", "outfall-1", "--turbidity-ntu", "4000.5"], "--turbidity-ntu 4000.5: outside 0 to 4000 NTU"),
        (["--point", "outfall-9", "--ph", "7"], "error: 'outfall-9' is not a discharge point of site 's1': "
                                                "samples are taken where stormwater leaves the site (its points: "
                                                "outfall-1, outfall-2)"),
        (["--point", "turb-1", "--ph", "7"], "error: 'turb-1' is a device of site 's1', not a discharge "
                                             "point: samples are taken where stormwater leaves the site (its "
                                             "points: outfall-1, outfall-2)"),
        (["--point", "outfall-1"], "nothing to record: give at least one of transparency (cm)"),
        (["--point", "outfall-1", "--ph", "7", "--sampled-at", "2999-01-01T00:00"], "future_time"),
    ]
    for args, message in cases:
        result = add(*common, *args)
        assert result.exit_code == 2, (args, result.output)
        assert result.output.startswith("error: ") and message in result.output, result.output
        assert result.output.count("\n") == 1
    blank = add("--site", str(site), "--by", "  ", "--store", store, "--point", "outfall-1", "--ph", "7")
    assert blank.exit_code == 2 and "the inspector's name is required" in blank.output
    both = add(*common, "--point", "outfall-1", "--ph", "7", "--broker", "mqtt://127.0.0.1:1")
    assert both.exit_code == 2 and "record it in one place" in both.output
    assert not (tmp_path / "store.db").exists() or SqliteStore(tmp_path / "store.db").query_readings("s1") == []


def test_sent_live_on_the_sites_readings_topic_and_ingest_accepts_it(mosquitto_server: Any, tmp_path: Path) -> None:
    site = site_file(tmp_path)
    got: list[tuple[str, bytes]] = []
    sub = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=run_unique("manual-readings-test-sub"))
    sub.on_message = lambda _c, _u, msg: got.append((msg.topic, msg.payload))
    subscribed = threading.Event()
    sub.on_subscribe = lambda *_a: subscribed.set()
    sub.connect("127.0.0.1", mosquitto_server.port)
    sub.loop_start()
    try:
        sub.subscribe("stormwatch/v1/s1/+/readings", qos=1)
        assert subscribed.wait(10)
        result = add("--site", str(site), "--by", INSPECTOR, "--point", "outfall-1", "--sampled-at",
                     "2026-06-03T09:00", "--ph", "6.1", "--broker", mosquitto_server.url)
        assert result.exit_code == 0, result.output
        assert "(QoS 1, acknowledged)" in result.output
        wait_until(lambda: bool(got), timeout_s=10, what="the manual reading on the broker")
    finally:
        sub.loop_stop()
        sub.disconnect()
    topic, payload = got[0]
    assert topic == f"stormwatch/v1/s1/{MANUAL_GATEWAY}/readings"
    (reading,) = parse_readings(payload)
    assert (reading.device, reading.quantity, reading.value, reading.raw) == ("outfall-1", "ph", 6.1, INSPECTOR)
    cfg = parse_site(ca_doc(), "ca-site.yaml", ProfileLibrary())
    checked = Validator.for_sites([cfg], ProfileLibrary(), ManualClock(datetime(2026, 6, 3, 17, tzinfo=UTC)))
    assert checked.validate(topic, payload).accepted == [reading]  # what ingest does with it


def _closed_port() -> int:
    """A local TCP port nothing listens on (bound, then closed)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_broker_that_cannot_be_reached_is_one_line_and_nothing_sent(tmp_path: Path) -> None:
    """Published through the one MQTT session (stormwatch.runtime.mqttsession.publish_once): a broker
    nobody answers at says so at once, naming the broker, with nothing sent."""
    port = _closed_port()
    result = add("--site", str(site_file(tmp_path)), "--by", INSPECTOR, "--point", "outfall-1", "--ph", "6.1",
                 "--broker", f"mqtt://127.0.0.1:{port}")
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and "Traceback" not in result.output
    assert result.output.startswith(f"error: broker mqtt://127.0.0.1:{port}: ") and "(nothing sent)" in result.output


def test_a_broker_cluster_url_reaches_the_node_that_answers(mosquitto_server: Any, tmp_path: Path) -> None:
    """As for every stormwatch client, a URL listing several nodes tries them in order: the first is
    down, the reading reaches the broker through the second (what the raw client it replaced could not)."""
    got: list[bytes] = []
    sub = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=run_unique("manual-cluster-test-sub"))
    sub.on_message = lambda _c, _u, msg: got.append(msg.payload)
    subscribed = threading.Event()
    sub.on_subscribe = lambda *_a: subscribed.set()
    sub.connect("127.0.0.1", mosquitto_server.port)
    sub.loop_start()
    try:
        sub.subscribe(f"stormwatch/v1/s1/{MANUAL_GATEWAY}/readings", qos=1)
        assert subscribed.wait(10)
        result = add("--site", str(site_file(tmp_path)), "--by", INSPECTOR, "--point", "outfall-1", "--sampled-at",
                     "2026-06-03T09:30", "--ph", "6.4", "--broker",
                     f"mqtt://127.0.0.1:{_closed_port()},127.0.0.1:{mosquitto_server.port}")
        assert result.exit_code == 0, result.output
        assert "(QoS 1, acknowledged)" in result.output
        wait_until(lambda: bool(got), timeout_s=10, what="the manual reading on the broker")
    finally:
        sub.loop_stop()
        sub.disconnect()
    (reading,) = parse_readings(got[0])
    pdt_0930 = datetime(2026, 6, 3, 16, 30, tzinfo=UTC)
    assert (reading.quantity, reading.value, reading.time) == ("ph", 6.4, pdt_0930)
