"""The gateway's batch form (``stormwatch gateway --batch``): one message per poll cycle, identity per reading.

Unit: rows of one event time become one ``{"readings": [...]}`` message -- the very bytes the
contract's encoder gives for those readings -- and rows of another time start the next message.
On Mosquitto, a simulated site polled every 2 minutes (a rain gauge and two turbidity probes) on the
lockstep clock, whose instant's end wakes the publisher: each message holds one poll cycle of every
device (rain + 2 x turbidity and temperature = 5 readings),
every reading arrives once with its own identity (seq 0..n-1), and each is acknowledged and removed
from the outbox.
"""

from __future__ import annotations

import threading
import uuid
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from stormwatch import topics
from stormwatch.app import servers
from stormwatch.config import SiteConfig, parse_site
from stormwatch.contract import Reading, parse_readings
from stormwatch.gateway.outbox import OutboxRow
from stormwatch.gateway.publisher import MAX_BATCH_READINGS, messages
from stormwatch.gateway.schedule import StoredParticipant
from stormwatch.gateway.service import Gateway
from stormwatch.lockstep import LockstepClock
from stormwatch.profiles import ProfileLibrary
from stormwatch.simulators.scenario import load_scenario
from stormwatch.simulators.site import SimulatedSite, isolate_site
from stormwatch.wire import dump_payload
from tests.gateway_support import Conductor
from tests.waits import wait_until

SCENARIO = load_scenario("default")
T0 = datetime(2026, 6, 1, 12, tzinfo=UTC)


def _row(i: int, minute: int) -> tuple[OutboxRow, Reading]:
    r = Reading(site="s", device=f"d{i % 3}", quantity="turbidity", value=float(i), unit="NTU",
                time=T0 + timedelta(minutes=minute), gateway="gw", boot="b", seq=i, raw=[i, 0])
    return OutboxRow(i + 100, dump_payload([r.to_wire()]), r.time.isoformat(), i), r


def test_rows_of_one_poll_cycle_become_one_message_of_the_contracts_batch_form() -> None:
    made = [_row(i, minute) for i, minute in enumerate([0, 0, 0, 1, 1, 2])]
    rows, readings = [m[0] for m in made], [m[1] for m in made]
    assert messages(rows, batch=False) == [((r.id,), r.payload) for r in rows]
    batched = messages(rows, batch=True)
    assert [ids for ids, _ in batched] == [(100, 101, 102), (103, 104), (105,)]
    assert batched[0][1] == dump_payload([r.to_wire() for r in readings[:3]])
    assert parse_readings(batched[1][1]) == readings[3:5] and parse_readings(batched[2][1]) == readings[5:]
    many = [_row(i, 0)[0] for i in range(MAX_BATCH_READINGS + 1)]
    assert [len(ids) for ids, _ in messages(many, batch=True)] == [MAX_BATCH_READINGS, 1]


def _site(tmp_path: Path, site_id: str) -> SiteConfig:
    cfg = parse_site({
        "site": {"id": site_id, "jurisdiction": "ch133"}, "gateway_id": "gw-batch",
        "devices": [
            {"id": "rain-1", "profile": "tipping_bucket_modbus_counter", "poll_interval_s": 120,
             "transport": {"kind": "modbus-tcp", "host": "127.0.0.1", "port": 5020, "unit_id": 1}},
            {"id": "turb-up", "profile": "yosemitech_y511", "poll_interval_s": 120,
             "transport": {"kind": "modbus-tcp", "host": "127.0.0.1", "port": 5020, "unit_id": 2}},
            {"id": "turb-down", "profile": "yosemitech_y511", "poll_interval_s": 120,
             "transport": {"kind": "modbus-tcp", "host": "127.0.0.1", "port": 5021, "unit_id": 1}},
        ],
        "rain_gauge": "rain-1", "turbidity_pair": {"upstream": "turb-up", "downstream": "turb-down"},
    }, "batch-site", ProfileLibrary())
    return isolate_site(cfg, tmp_path / "links")


def test_a_batching_gateway_publishes_one_message_per_poll_cycle(tmp_path: Path,
                                                                  mosquitto_server: servers.Mosquitto) -> None:
    site_id = f"batch-{uuid.uuid4().hex[:8]}"
    cfg = _site(tmp_path, site_id)
    until = SCENARIO.start + timedelta(minutes=60)
    clock = LockstepClock(SCENARIO.start, until)
    site = SimulatedSite(cfg, ProfileLibrary(), SCENARIO, clock)
    site.start()
    got: list[list[Reading]] = []
    lock = threading.Lock()
    listener = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"listen-{site_id}")

    def on_message(_c: mqtt.Client, _u: object, msg: mqtt.MQTTMessage) -> None:
        with lock:
            got.append(parse_readings(msg.payload))

    subscribed = threading.Event()
    listener.on_message = on_message
    listener.on_subscribe = lambda *_: subscribed.set()
    listener.connect("127.0.0.1", mosquitto_server.port)
    listener.subscribe(topics.readings(site_id, "gw-batch"), qos=1)
    listener.loop_start()
    assert subscribed.wait(15)  # before the first instant: the clock does not wait for the listener
    # the publisher is woken once every poll of an instant is committed (both links), as on a
    # lockstep demo run, and the clock moves on once the broker has acknowledged them
    gw = Gateway(cfg, ProfileLibrary(), clock, mosquitto_server.url, tmp_path / "gw", batch=True, confirm="broker",
                 batch_gather_s=0.0, wake_on_commit=False)
    clock.add(StoredParticipant("the batching gateway", gw.outbox_depth, polled=gw.publisher.wake))
    try:
        conductor = Conductor(clock)
        gw.run(until=until)
        conductor.join()
        wait_until(lambda: sum(len(m) for m in got) >= gw.readings_made, 15, "every reading")
    finally:
        clock.stop()
        gw.stop()
        listener.loop_stop()
        listener.disconnect()
        site.stop()
    readings = [r for message in got for r in message]
    cycles = 30  # 60 minutes of 2-minute polling
    assert gw.readings_made == cycles * 5 and gw.missed_slots == 0
    assert sorted(r.seq for r in readings) == list(range(gw.readings_made))  # each once, identity kept
    assert gw.outbox_depth() == 0 and gw.publisher.acknowledged == gw.readings_made
    # one message per poll cycle, whole: rain + 2 x (turbidity, temperature) -- the first cycle may come
    # as two when the broker's CONNACK lands between the two links' commits of the first instant (the
    # publisher sends its outbox on connecting; the other link's readings follow in a second message)
    times = [SCENARIO.start + timedelta(minutes=2 * k) for k in range(cycles)]
    sizes: dict[datetime, list[int]] = defaultdict(list)
    for message in got:
        assert len({r.time for r in message}) == 1
        sizes[message[0].time].append(len(message))
    assert sorted(sizes) == times
    assert all(sizes[t] == [5] for t in times[1:]), sizes
    assert sum(sizes[times[0]]) == 5 and len(sizes[times[0]]) <= 2, sizes[times[0]]
    assert gw.publisher.published == len(got) == cycles + len(sizes[times[0]]) - 1
